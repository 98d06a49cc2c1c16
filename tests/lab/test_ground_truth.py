"""The Monte-Carlo ground truth: the estimator (on the shipped toy model) and the evaluation
that reads the data file (on hand-made files)."""
import argparse
import json
import math

import pytest
import torch

from oar_lite.lab import ground_truth, stats
from oar_lite.course import toy


@pytest.fixture(scope="module")
def toy_case():
    """The toy model, one 2-digit held-out problem and the model's own greedy completion."""
    model, tokenizer = toy.load_model()
    problem = next(p for p in toy.load_eval_set() if p["digits"] == 2)
    prompt_ids = tokenizer(problem["prompt"])["input_ids"]
    out = model.generate(input_ids=torch.tensor([prompt_ids]), do_sample=False, max_new_tokens=40,
                         pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id)
    completion_ids = out[0, len(prompt_ids):].tolist()
    completion_ids = completion_ids[: completion_ids.index(tokenizer.eos_token_id) + 1]
    return model, tokenizer, problem, prompt_ids, completion_ids


def judge(problem):
    return lambda text: toy.reward(text, problem) == 1.0


def test_finished_completion_is_judged_as_it_stands(toy_case):
    model, tokenizer, problem, prompt_ids, _ = toy_case
    right = toy.chain_of_thought(problem["a"], problem["b"], filler_rate=0)
    wrong = right[: right.index("A=") + 2] + str(int(problem["answer"]) + 1)
    for text, expected in ((right, 8), (wrong, 0)):
        ids = tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        counts = ground_truth.prefix_success_counts(model, tokenizer, prompt_ids, ids, judge(problem),
                                              positions=[len(ids)], k=8, max_new_tokens=8)
        assert counts.tolist() == [expected]


def test_estimates_lie_in_range_repeat_and_do_not_depend_on_the_other_positions(toy_case):
    model, tokenizer, problem, prompt_ids, completion_ids = toy_case
    C = len(completion_ids)
    positions = [0, 1, C // 2, C - 1, C]
    kwargs = dict(k=6, max_new_tokens=30, seed=3)
    counts = ground_truth.prefix_success_counts(model, tokenizer, prompt_ids, completion_ids, judge(problem),
                                          positions=positions, **kwargs)
    assert counts.shape == (len(positions),) and counts.dtype == torch.long
    assert ((counts >= 0) & (counts <= 6)).all()
    again = ground_truth.prefix_success_counts(model, tokenizer, prompt_ids, completion_ids, judge(problem),
                                         positions=positions, **kwargs)
    assert torch.equal(counts, again)
    some = ground_truth.prefix_success_counts(model, tokenizer, prompt_ids, completion_ids, judge(problem),
                                        positions=[C // 2, 1], **kwargs)
    assert some.tolist() == [counts[2].item(), counts[1].item()]
    # the greedy completion of an easy problem is right, and once its answer is written so is every rollout
    assert toy.reward(tokenizer.decode(completion_ids, skip_special_tokens=True), problem) == 1.0
    assert counts[-1] == 6 and counts[-2] == 6


def test_estimator_rejects_bad_input(toy_case):
    model, tokenizer, problem, prompt_ids, completion_ids = toy_case
    with pytest.raises(ValueError, match="positions"):
        ground_truth.prefix_success_counts(model, tokenizer, prompt_ids, completion_ids, judge(problem),
                                     positions=[len(completion_ids) + 1])
    with pytest.raises(ValueError, match="temperature"):
        ground_truth.prefix_success_counts(model, tokenizer, prompt_ids, completion_ids, judge(problem), temperature=0)
    with pytest.raises(ValueError, match="prompt_ids"):
        ground_truth.prefix_success_counts(model, tokenizer, [], completion_ids, judge(problem))


def make_file(tmp_path, completions, name="gt.json"):
    path = tmp_path / name
    path.write_text(json.dumps({"settings": {"mc_cpu_seconds": 1.0}, "completions": completions}))
    return path


def completion(p, scores, correct=False):
    se = stats.mc_standard_error([round(x * 16) for x in p], 16).tolist()
    return {"p": p, "se": se, "rollouts": [16] * len(p), "reasoning": [0, len(p) - 1], "correct": correct,
            "scores": scores}


def test_table_on_a_hand_made_file(tmp_path):
    p1 = [0.5, 0.5, 0.9, 0.9, 0.1, 0.1]  # jumps of +0.4 at token 1 and -0.8 at token 3
    jump1 = [0.0, 0.4, 0.0, 0.8, 0.0]
    p2 = [1.0, 1.0, 0.75, 0.0]  # +-0.25 (pivotal) and 0.75
    jump2 = [0.0, 0.25, 0.75]
    p3 = [1.0, 1.0, 0.9]  # no pivot: left out of the AUC
    jump3 = [0.0, 0.1]

    def methods(j):
        return {"perfect": j, "inverted": [-x for x in j], "constant": [1.0] * len(j)}

    path = make_file(tmp_path, [completion(p1, methods(jump1)), completion(p2, methods(jump2), True),
                                completion(p3, methods(jump3), True)])
    table = ground_truth.ground_truth_table(path)
    assert list(table) == ["perfect", "inverted", "constant"]
    assert table["perfect"]["auc_mean"] == 1.0 and table["inverted"]["auc_mean"] == 0.0
    assert table["constant"]["auc_mean"] == 0.5
    assert table["perfect"]["auc_n"] == 2  # the third has no pivotal token
    assert table["perfect"]["spearman_mean"] == pytest.approx(1.0)
    assert table["inverted"]["spearman_mean"] == pytest.approx(-1.0)
    assert table["constant"]["spearman_n"] == 0 and math.isnan(table["constant"]["spearman_mean"])
    # a higher threshold leaves only the 0.75 / 0.8 jumps pivotal, but the perfect score still ranks them first
    strict = ground_truth.ground_truth_table(path, threshold=0.7, methods=["perfect"])
    assert list(strict) == ["perfect"] and strict["perfect"]["auc_mean"] == 1.0
    assert "| `perfect` | 1.00" in ground_truth.ground_truth_markdown(table)

    summary = ground_truth.ground_truth_summary(path)
    assert summary["completions"] == 3 and summary["right"] == 2 and summary["wrong"] == 1
    assert summary["reasoning_tokens"] == 10 and summary["pivotal_tokens"] == 4
    assert summary["completions_with_pivot"] == 2 and summary["rollouts_min"] == 16
    assert summary["pivotal_tokens_beyond_2se"] == 4  # 1 -> 0.75 has SE 0.108: beyond 2 SE
    assert summary["prefixes"] == 13 and summary["prefixes_inside"] == 8 and summary["rollouts_inside_min"] == 16
    inside_se = [s for rec in (p1, p2, p3) for s, x in zip(stats.mc_standard_error([round(x * 16) for x in rec], 16).tolist(), rec)
                 if 0 < x < 1]
    assert summary["se_mean_inside"] == pytest.approx(sum(inside_se) / 8) and summary["se_mean_inside"] > summary["se_mean"]
    noisy = ground_truth.ground_truth_summary(make_file(tmp_path, [completion([0.5, 0.75], {"m": [1.0]})], "noisy.json"))
    assert noisy["pivotal_tokens"] == 1 and noisy["pivotal_tokens_beyond_2se"] == 0  # 0.25 < 2 * 0.165


def test_table_rejects_bad_files(tmp_path):
    good = completion([0.0, 1.0], {"m": [1.0]})
    with pytest.raises(ValueError, match="R \\+ 1"):
        ground_truth.load_ground_truth(make_file(tmp_path, [{**good, "p": [0.0, 1.0, 1.0]}]))
    with pytest.raises(ValueError, match="expected R"):
        ground_truth.load_ground_truth(make_file(tmp_path, [{**good, "scores": {"m": [1.0, 2.0]}}]))
    with pytest.raises(ValueError, match="no ground-truth file"):
        ground_truth.load_ground_truth(tmp_path / "missing.json")
    with pytest.raises(ValueError, match="not scored in the file"):
        ground_truth.ground_truth_table(make_file(tmp_path, [good]), methods=["other"])
    with pytest.raises(ValueError, match="threshold"):
        ground_truth.ground_truth_table(make_file(tmp_path, [good]), threshold=0)


def test_plot_marks_the_pivotal_tokens():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from oar_lite.lab.plots import plot_ground_truth

    rec = completion([0.5, 0.5, 0.9, 0.1], {"a": [0.0, 2.0, 1.0], "b": [1.0, 1.0, 1.0]})
    rec["tokens"] = ["x", "y", "z", "<eos>"]
    fig, axes = plt.subplots(2, 1, sharex=True)
    plot_ground_truth(axes, rec, methods=["a", "b"])
    assert len(axes[0].patches) == 2  # tokens 1 (+0.4) and 2 (-0.8) are pivotal
    heights = [bar.get_height() for bar in axes[1].patches if bar.get_width() < 0.5]
    assert sorted(heights) == [0.0, 0.5, 1.0, 1.0, 1.0, 1.0]  # each method divided by its maximum
    assert [t.get_text() for t in axes[1].get_xticklabels()] == ["x", "y", "z"]
    plt.close(fig)


def test_a_method_scored_on_some_completions_counts_only_those(tmp_path):
    a = completion([0.5, 1.0, 1.0], {"m": [2.0, 1.0], "slow": [0.0, 1.0]})
    b = completion([1.0, 0.0, 0.0], {"m": [1.0, 0.0]})
    table = ground_truth.ground_truth_table(make_file(tmp_path, [a, b]))
    assert table["m"]["auc_n"] == 2 and table["m"]["auc_mean"] == 1.0
    assert table["slow"]["auc_n"] == 1 and table["slow"]["auc_mean"] == 0.0


def test_the_shipped_file_loads_and_gives_a_table_without_a_model():
    data = ground_truth.load_ground_truth()  # ground_truth.GROUND_TRUTH_PATH
    table = ground_truth.ground_truth_table(data)
    assert {"oar-p:last", "oar-p:answer_mean", "oar-g:answer_mean", "entropy", "captum-ig:answer_joint"} <= set(table)
    for row in table.values():
        assert row["auc_n"] >= 1 and 0.0 <= row["auc_mean"] <= 1.0 and -1.0 <= row["spearman_mean"] <= 1.0
    summary = ground_truth.ground_truth_summary(data)
    assert summary["right"] >= 1 and summary["wrong"] >= 1 and summary["rollouts_min"] >= 16
    for rec in data["completions"]:  # the recorded error is the formula's
        se = stats.mc_standard_error(rec["successes"], rec["rollouts"])
        assert se.tolist() == pytest.approx(rec["se"], abs=1e-5)
        assert [c / k for c, k in zip(rec["successes"], rec["rollouts"])] == pytest.approx(rec["p"], abs=1e-5)


def test_the_shipped_file_is_complete_and_follows_its_selection_rule():
    """Every completion has every method's scores; K is k at p = 0 or 1 and, strictly inside
    (0, 1), k after pass 1 and k + k_extra after pass 2; the AUC has an interval (two or
    more completions with a pivot); round 2 of the selection holds one right and one wrong
    completion of each of its problems, all after round 1's."""
    data = ground_truth.load_ground_truth()
    settings, completions = data["settings"], data["completions"]
    k = settings["k"]
    for rec in completions:
        assert set(rec["scores"]) == set(settings["methods"])
        inside_k = k + settings["k_extra"] if rec["mc_passes"] == 2 else k
        assert all(n == (inside_k if 0 < p < 1 else k) for n, p in zip(rec["rollouts"], rec["p"]))
    summary = ground_truth.ground_truth_summary(data)
    assert summary["completions_with_pivot"] >= 2
    first = [rec for rec in completions if rec["selection_round"] == 1]
    second = [rec for rec in completions if rec["selection_round"] == 2]
    assert len(first) == settings["completions"] and len(second) == settings["extra_completions"]
    assert min(rec["problem_index"] for rec in second) > max(rec["problem_index"] for rec in first)
    for right, wrong in zip(second[::2], second[1::2]):
        assert right["correct"] and not wrong["correct"] and right["problem_index"] == wrong["problem_index"]
        assert 0 < right["group_correct"] < settings["group_size"]


def test_continuations_are_k_samples_cut_at_eos_and_repeat_with_the_seed(toy_case):
    model, tokenizer, _, prompt_ids, completion_ids = toy_case
    prefix = prompt_ids + completion_ids[:3]
    rows = ground_truth.sample_continuations(model, tokenizer, prefix, k=5, max_new_tokens=6, seed=3)
    assert len(rows) == 5 and all(len(r) <= 6 and tokenizer.eos_token_id not in r for r in rows)
    assert rows == ground_truth.sample_continuations(model, tokenizer, prefix, k=5, max_new_tokens=6, seed=3)
    with pytest.raises(ValueError, match="k >= 1"):
        ground_truth.sample_continuations(model, tokenizer, prefix, k=0, max_new_tokens=6)


def test_rebuilt_sequence_gives_back_the_scored_tokens_of_the_shipped_file():
    """Each shipped completion rebuilt with SmolLM2's tokenizer: the prompt has the file's length,
    the answer span decodes to the answer the file records, the reasoning ends before it; another
    tokenizer (another prompt length) is refused."""
    from oar_lite.course.models import load_smollm2

    data = ground_truth.load_ground_truth()
    _, tokenizer = load_smollm2()
    for rec in data["completions"]:
        ids, P, reasoning, answer = ground_truth.rebuilt_sequence(rec, tokenizer)
        assert P == rec["prompt_tokens"] and ids[P:].tolist() == list(rec["completion_ids"])
        assert reasoning.stop - reasoning.start == len(rec["p"]) - 1 and reasoning.stop <= answer.start
        assert tokenizer.decode(ids[answer]).strip() == str(rec["answer"]) or not rec["correct"]
    _, other = toy.load_model()
    with pytest.raises(ValueError, match="the prompt format changed"):
        ground_truth.rebuilt_sequence(data["completions"][0], other)


def test_rescore_adds_a_method_and_compares_the_stored_ones(tmp_path, monkeypatch, toy_case):
    """scripts/mc_ground_truth.py --phase rescore on a hand-made file whose one completion is the
    toy model's (the prompt rebuild is stubbed: the toy world has no chat template): a method the
    file lacks is added with `token_scores`' values, a stored one is compared and left as it is,
    and the file records the rescore."""
    from conftest import load_script

    import oar_lite as ol

    script = load_script("mc_ground_truth")
    model, tokenizer, _, prompt_ids, completion_ids = toy_case
    seg = ol.segment_completion_ids(tokenizer, completion_ids)
    P = len(prompt_ids)
    ids = torch.tensor(prompt_ids + completion_ids)
    reasoning, answer = slice(P + seg.reasoning.start, P + seg.reasoning.stop), slice(P + seg.answer.start, P + seg.answer.stop)
    R = reasoning.stop - reasoning.start
    entropy = ol.token_scores("entropy", model, ids, reasoning, answer).tolist()
    stored = [round(x, 7) + (0.5 if t == 1 else 0.0) for t, x in enumerate(entropy)]  # one stored score off by 0.5
    rec = completion([0.5] * (R + 1), {"entropy": stored})
    path = tmp_path / "gt.json"
    path.write_text(json.dumps({"settings": {"methods": ["entropy"]}, "completions": [rec]}))
    monkeypatch.setattr(ground_truth, "rebuilt_sequence", lambda completion, tok: (ids, P, reasoning, answer))
    args = argparse.Namespace(out=path, methods=["grail", "entropy"], seed=0, oar_p_batch=8, ig_steps=8,
                              argv=["--phase", "rescore"])
    record = script.rescore(args, model, tokenizer)
    data = json.loads(path.read_text())
    (got,) = data["completions"]
    assert got["scores"]["grail"] == pytest.approx(ol.token_scores("grail", model, ids, reasoning, answer).tolist(), abs=1e-6)
    assert got["scores"]["entropy"] == stored  # compared, not replaced
    assert record["added"] == ["grail"] and record["compared"]["entropy"] == pytest.approx(0.5, abs=1e-6)
    assert data["settings"]["methods"] == ["entropy", "grail"] and data["settings"]["rescored"] == [record]
    assert record["command"] == "python scripts/mc_ground_truth.py --phase rescore"

