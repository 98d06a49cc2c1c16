"""Benchmarks run once at a tiny size so they do not rot (no timed assertions), and the
pieces that make their numbers trustworthy: Captum's quantity equals OAR-P's, the
interleaving rotates, the memory probe sees an allocation, the learning summary reads
a comparison folder, the shared command line records what reproduces a run, and every
documented command still gets past its command line."""
import importlib
import json
import re
import shlex
import subprocess
from pathlib import Path

import pytest
import torch
from conftest import PAD, char_tokenizer, tiny_llama

from benchmarks import answer_checking, common, credit_toy, oar_p_implementations, run_all, scaling, smollm2_baseline, step_cost
from oar_lite.lab import compare, credit
from oar_lite.course import toy
from oar_lite.attribution import perturbation_scores

toy_model = pytest.mark.skipif(not (toy.MODEL_DIR / "config.json").exists(),
                               reason=f"the shipped toy model ({toy.MODEL_DIR}) is missing")


# ------------------------------------------------------------------ the pieces

def test_captum_feature_ablation_equals_oar_p_answer_joint(sequence):
    model, tok = tiny_llama(), char_tokenizer()
    ids, reasoning, answer = sequence
    A = answer.stop - answer.start
    captum = oar_p_implementations.captum_scores(model, tok, ids, reasoning, answer, pad_token_id=PAD)
    ours = perturbation_scores(model, ids, reasoning, answer, mode="answer_joint", pad_token_id=PAD, batch_size=4)
    assert captum.shape == ours.shape == (reasoning.stop - reasoning.start,)
    assert (captum < 0).any()  # Captum keeps the sign; OAR-P clamps at 0
    torch.testing.assert_close((captum / A).clamp(min=0), ours, atol=1e-6, rtol=1e-5)


def test_token_counts_bounds(sequence):
    ids, reasoning, answer = sequence
    counts = oar_p_implementations.token_counts(ids, reasoning, answer, batched_tokens=0)
    R, end = reasoning.stop - reasoning.start, answer.stop - 1
    assert counts["naive"] == (R + 1) * ids.numel()
    assert counts["ideal_prefix_reuse"] == end + sum(end - t for t in range(reasoning.start, reasoning.stop))
    # Measured tokens of the batched version lie between the ideal and the naive count.
    stats = {}
    perturbation_scores(tiny_llama(), ids, reasoning, answer, mode="answer_joint", pad_token_id=PAD,
                        batch_size=4, stats=stats)
    assert counts["ideal_prefix_reuse"] <= stats["forward_tokens"] < counts["naive"]


def test_interleaved_rotates_order_and_drops_warmup():
    calls = []
    runs = common.interleaved({"a": lambda r: calls.append(("a", r)), "b": lambda r: calls.append(("b", r)),
                               "c": lambda r: calls.append(("c", r))}, warmup=1, repeats=2, progress=False)
    assert [len(v) for v in runs.values()] == [2, 2, 2]
    firsts = [calls[i][0] for i in range(0, 9, 3)]
    assert len(set(firsts)) == 3  # each method leads one round
    with pytest.raises(ValueError, match="repeats"):
        common.interleaved({"a": lambda r: None}, warmup=0, repeats=0)


def test_peak_memory_sees_a_torch_allocation():
    if not common.rss_peak_supported():
        pytest.skip("no /proc/self/clear_refs on this OS")
    _, mib, out = common.peak_memory(lambda: torch.ones(64 * 2**20 // 4).sum(), torch.device("cpu"))
    assert float(out) == 64 * 2**20 // 4
    assert mib >= 48  # a 64 MiB tensor, touched


def test_synthetic_sequence_layout():
    tok = char_tokenizer()
    ids, reasoning, answer = common.synthetic_sequence(tok, 20, prompt_length=5, marker=" A=", answer="42", end=".")
    assert ids.numel() == 25 and reasoning == slice(5, 19) and answer == slice(22, 24)
    assert tok.decode(ids[reasoning.stop:]) == " A=42."
    assert not torch.isin(ids[:reasoning.stop], torch.tensor(tok.all_special_ids)).any()
    with pytest.raises(ValueError, match="no reasoning tokens"):
        common.synthetic_sequence(tok, 4, marker=" A=", answer="42", end=".")


def test_smollm2_baseline_counts_the_prompts_that_give_grpo_a_signal():
    rows = [{"reward": r, "steps": s, "parsed": True, "ended": True, "tokens": 10}
            for r, s in ((1.0, 1), (0.0, 1), (0.0, 2), (0.0, 2), (1.0, 3), (1.0, 3))]
    s = smollm2_baseline.summarize(rows, 2, {"seconds": 2.0, "completion_tokens": 60})
    assert s["accuracy"] == 0.5 and s["accuracy_by_steps"] == {1: 0.5, 2: 0.0, 3: 1.0}
    assert s["prompts_mixed"] == 1 / 3 and s["prompts_any_correct"] == 2 / 3  # groups [1, 0], [0, 0], [1, 1]
    assert s["completions_per_s"] == 3.0 and s["tokens_per_s"] == 30.0


# ------------------------------------------------------------------ each benchmark once, tiny

@toy_model
def test_step_cost_runs(tmp_path):
    report = step_cost.main(["--model", "toy", "--prompts", "1", "--group-size", "4", "--max-new-tokens", "40",
                             "--warmup", "0", "--repeats", "1", "--threads", "1", "--no-progress",
                             "--out", str(tmp_path / "s.json")])
    res = report["models"][0]
    assert res["same_rollouts"]
    assert set(res["methods"]) == {"uniform", "oar-g", "oar-p"}
    assert res["methods"]["uniform"]["ratio_vs_grpo"]["median"] == 1.0
    assert "| oar-p |" in report["markdown"]
    assert "targets (issue 17): oar-g <= 1.30x, oar-p <= 2.00x" in report["markdown"]  # step_cost.TARGETS["toy"]
    from oar_lite.attribution import CreditConfig

    assert res["credit"]["batch_size"] == CreditConfig("oar-p").batch_size == 64  # the trainer's OAR-P limits
    assert json.loads((tmp_path / "s.json").read_text())["models"][0]["model"] == "toy"


@toy_model
@pytest.mark.parametrize("method", ["entropy-top", "grail"])
def test_step_cost_times_the_lab_baselines(tmp_path, method):
    """``--methods uniform entropy-top`` (TRL's top_entropy_quantile) and ``--methods uniform grail``
    (GRAIL's saliency, `oar_lite.lab.grail`) as methods of the step-cost benchmark, on the same
    rollouts as GRPO, their attribution phase timed."""
    assert method in step_cost.EXTRA_METHODS and method not in step_cost.METHODS
    report = step_cost.main(["--model", "toy", "--prompts", "2", "--group-size", "4", "--max-new-tokens", "40",
                             "--methods", "uniform", method, "--reward", "spread", "--warmup", "0",
                             "--repeats", "1", "--threads", "1", "--no-progress", "--out", str(tmp_path / "s.json")])
    res = report["models"][0]
    assert set(res["methods"]) == {"uniform", method} and res["same_rollouts"]
    assert res["methods"][method]["scored_rows"] > 0 and res["methods"][method]["phases"]["attribute"]["median"] > 0
    assert f"| {method} |" in report["markdown"]


@toy_model
def test_step_cost_spread_reward_scores_rows_where_math_scores_none(tmp_path):
    """``--reward spread`` (a cost-only reward) gives the groups a spread, so rows are scored
    where right-or-wrong gives none; the report names the reward."""
    assert {step_cost.spread_reward(t, {}) for t in ("a", "b", "c", "d")} == {0.0, 1.0}
    task = step_cost.make_task("toy", None, reward="spread")
    assert task.reward is step_cost.spread_reward and step_cost.make_task("toy", None).reward is None
    report = step_cost.main(["--model", "toy", "--prompts", "2", "--group-size", "4", "--max-new-tokens", "40",
                             "--methods", "uniform", "--reward", "spread", "--warmup", "0", "--repeats", "1",
                             "--threads", "1", "--no-progress", "--out", str(tmp_path / "s.json")])
    res = report["models"][0]
    assert res["reward"] == "spread" and res["methods"]["uniform"]["scored_rows"] >= 6
    assert "cost-only reward 'spread'" in report["markdown"]


@toy_model
def test_step_cost_scored_rounds_run_only_steps_that_score_rows(tmp_path):
    """--scored-rounds keeps only steps on which GRPO scores a row: every kept round of every
    method scored rows, on the same rollouts, and the report says which steps and how many
    candidates it drew."""
    report = step_cost.main(["--model", "toy", "--prompts", "2", "--group-size", "4", "--max-new-tokens", "40",
                             "--methods", "uniform", "oar-g", "--warmup", "1", "--repeats", "2", "--scored-rounds",
                             "--threads", "1", "--no-progress", "--out", str(tmp_path / "s.json")])
    res = report["models"][0]
    search = res["scored_rounds"]
    assert len(search["steps"]) == 3 and search["candidates"] >= 3  # warm-up + repeats
    assert search["steps"] == sorted(set(search["steps"])) and search["steps"][0] >= step_cost.FIRST_STEP
    assert res["steps"] == search["steps"][1:]  # the warm-up round took the first
    for method in ("uniform", "oar-g"):
        assert len(res["methods"][method]["scored_rows_per_round"]) == 2
        assert all(n > 0 for n in res["methods"][method]["scored_rows_per_round"])
    assert res["same_rollouts"]
    assert res["methods"]["oar-g"]["scored_rows_per_round"] == res["methods"]["uniform"]["scored_rows_per_round"]
    assert f"{len(search['steps'])} of the {search['candidates']} candidate steps" in report["markdown"]
    # Every round, warm-up included, is logged as it ends, with the step it ran and each method's time.
    assert [(r["round"], r["step"]) for r in res["rounds"]] == list(zip([-1, 0, 1], search["steps"]))
    for r in res["rounds"]:
        assert r["scored_rows"] > 0 and set(r["step_seconds"]) == {"uniform", "oar-g"}
    kept = [r["step_seconds"]["oar-g"] / r["step_seconds"]["uniform"] for r in res["rounds"][1:]]
    assert kept == res["methods"]["oar-g"]["ratio_vs_grpo"]["values"]
    assert "partial" not in json.loads((tmp_path / "s.json").read_text())  # dropped once the model finished
    # Without the option the rounds run consecutive steps, as before.
    plain = step_cost.main(["--model", "toy", "--prompts", "1", "--group-size", "2", "--max-new-tokens", "20",
                            "--methods", "uniform", "--warmup", "1", "--repeats", "2", "--threads", "1",
                            "--no-progress", "--out", str(tmp_path / "p.json")])["models"][0]
    assert plain["steps"] == [1000, 1001] and plain["scored_rounds"] is None


@toy_model
def test_step_cost_saves_the_rounds_so_far(tmp_path, monkeypatch):
    """A run stopped in round 1 (a time limit on a lent GPU) leaves round 0 in its JSON."""
    real_interleaved = common.interleaved

    def stop_after_round_0(fns, *, after_round, **kwargs):
        def after(r, results):
            after_round(r, results)
            if r == 0:
                raise KeyboardInterrupt
        return real_interleaved(fns, after_round=after, **kwargs)

    monkeypatch.setattr(common, "interleaved", stop_after_round_0)
    with pytest.raises(KeyboardInterrupt):
        step_cost.main(["--model", "toy", "--prompts", "1", "--group-size", "2", "--max-new-tokens", "20",
                        "--methods", "uniform", "oar-g", "--warmup", "0", "--repeats", "3", "--threads", "1",
                        "--no-progress", "--out", str(tmp_path / "s.json")])
    partial = json.loads((tmp_path / "s.json").read_text())["partial"]
    assert partial["model"] == "toy" and [r["step"] for r in partial["rounds"]] == [1000]
    assert set(partial["rounds"][0]["step_seconds"]) == {"uniform", "oar-g"}


def test_scoring_steps_keeps_the_first_that_score_and_stops_at_the_cap():
    drawn = []

    def scored_rows(step):
        drawn.append(step)
        return float(step % 3 == 0)  # every third step scores a row

    steps, candidates = step_cost.scoring_steps(scored_rows, 2, max_candidates=10, first=1000)
    assert steps == [1002, 1005] and candidates == 6 and drawn == list(range(1000, 1006))
    drawn.clear()
    with pytest.raises(ValueError, match=r"only 1 of 4 candidate steps \(1000-1003\).*2 needed"):
        step_cost.scoring_steps(scored_rows, 2, max_candidates=4, first=1000)
    assert drawn == [1000, 1001, 1002, 1003]  # no step past the cap
    with pytest.raises(ValueError, match="max_candidates >= need"):
        step_cost.scoring_steps(scored_rows, 3, max_candidates=2)


@toy_model
def test_step_cost_scored_rounds_cap_raises_and_restores_the_weights(tmp_path, monkeypatch):
    """When too few candidate steps score a row, the search stops at --max-candidates with a
    clear error, leaving the weights and torch's random state as it found them. Here the
    steps really run (and update the weights when they score rows) but report no scored
    row, so the search sees none."""
    import oar_lite.train

    loaded, real_scored = {}, []
    real_load, real_step = common.load, oar_lite.train.train_step

    def load(name, device, dtype=None):
        loaded["model"], tok = real_load(name, device, dtype)
        loaded["weights"] = {n: p.detach().clone() for n, p in loaded["model"].named_parameters()}
        loaded["rng"] = torch.get_rng_state()
        return loaded["model"], tok

    def train_step(*args, **kwargs):
        record = real_step(*args, **kwargs)
        real_scored.append(record["scored_rows"])
        return {**record, "scored_rows": 0.0}

    monkeypatch.setattr(common, "load", load)
    monkeypatch.setattr(oar_lite.train, "train_step", train_step)
    with pytest.raises(ValueError, match=r"only 0 of 3 candidate steps \(1000-1002\).*Raise --max-candidates"):
        step_cost.main(["--model", "toy", "--prompts", "2", "--group-size", "4", "--max-new-tokens", "40",
                        "--methods", "uniform", "--warmup", "0", "--repeats", "1", "--scored-rounds",
                        "--max-candidates", "3", "--threads", "1", "--no-progress", "--out", str(tmp_path / "s.json")])
    assert len(real_scored) == 3 and max(real_scored) > 0  # some step did update the weights
    for n, p in loaded["model"].named_parameters():
        assert torch.equal(p, loaded["weights"][n]), n
    assert torch.equal(torch.get_rng_state(), loaded["rng"])  # each step reseeded torch; undone
    with pytest.raises(ValueError, match="must include 'uniform'"):
        step_cost.measure_model("toy", methods=["oar-g"], warmup=0, repeats=1, device=torch.device("cpu"),
                                settings=step_cost.SETTINGS["toy"], scored_rounds=True)
    with pytest.raises(ValueError, match="only applies with --scored-rounds"):
        step_cost.main(["--model", "toy", "--max-candidates", "3", "--out", str(tmp_path / "s.json")])


@toy_model
def test_oar_p_implementations_runs_and_agree(tmp_path):
    report = oar_p_implementations.main(["--model", "toy", "--sequences", "1", "--min-reasoning", "5",
                                         "--warmup", "0", "--repeats", "1", "--threads", "1", "--no-progress",
                                         "--extra-max-waste", "0", "1", "--out", str(tmp_path / "o.json")])
    seq = report["models"][0]["sequences"][0]
    for name in ("batched", "naive", "captum", "batched_w0", "batched_w1"):
        assert seq["max_abs_diff"][name] < 1e-4  # main() also raises when they disagree
    tk = seq["tokens"]
    assert tk["ideal_prefix_reuse"] <= tk["batched"] <= tk["naive"]
    (no_waste, most_passes), (more_waste, fewer_passes) = seq["work_by_max_waste"]["0"], seq["work_by_max_waste"]["1"]
    assert no_waste == tk["ideal_prefix_reuse"] < more_waste and fewer_passes < most_passes
    assert seq["peak_mib"]["batched"] is None or seq["peak_mib"]["batched"]["n"] == 1  # measured apart, once
    assert "OAR-P, max_waste 1 (" in report["markdown"]


@toy_model
def test_scaling_runs_and_plots(tmp_path):
    report = scaling.main(["--model", "toy", "--lengths", "12", "20", "--repeats", "1", "--warmup", "0",
                           "--threads", "1", "--no-progress", "--out", str(tmp_path / "sc.json"),
                           "--plot", str(tmp_path / "sc.png")])
    assert [r["length"] for r in report["lengths"]] == [12, 20]
    assert report["lengths"][1]["oar_p_tokens"] > report["lengths"][0]["oar_p_tokens"]
    assert (tmp_path / "sc.png").stat().st_size > 10_000


@toy_model
def test_answer_checking_runs(tmp_path):
    report = answer_checking.main(["--repeats", "1", "--no-progress", "--out", str(tmp_path / "a.json")])
    sizes = report["sizes"]
    assert [r["chars"] for r in sizes] == sorted(r["chars"] for r in sizes) and len(sizes) == 3
    assert sizes[0]["reward_vs_smallest"]["median"] == sizes[0]["offsets_vs_smallest"]["median"] == 1.0
    assert "| completion chars |" in report["markdown"]
    assert json.loads((tmp_path / "a.json").read_text())["command"].endswith(str(tmp_path / "a.json"))


@toy_model
def test_credit_toy_runs(tmp_path):
    report = credit_toy.main(["--n", "6", "--methods", "uniform", "oar-p:last", "oar-g:last", "--threads", "1",
                              "--no-progress", "--out", str(tmp_path / "c.json")])
    assert report["scored"] >= 1 and report["results"]["uniform"]["auc_mean"] == 0.5  # constant scores: chance
    assert list(report["rank_agreement"]) == ["last"] and -1 <= report["rank_agreement"]["last"]["mean"] <= 1
    assert "| oar-p:last |" in report["markdown"] and "| pivotal |" in report["markdown"]
    assert json.loads((tmp_path / "c.json").read_text())["command"].startswith("python -m benchmarks.credit_toy --n 6")


@toy_model
def test_oar_p_rows_together_agree_and_stay_within_the_work_bound(tmp_path):
    report = oar_p_implementations.main(["--model", "toy", "--sequences", "3", "--min-reasoning", "5",
                                         "--rows-together", "--per-sequence", "0", "--warmup", "0", "--repeats", "1",
                                         "--threads", "1", "--no-progress", "--out", str(tmp_path / "r.json")])
    rows = report["models"][0]["rows_together"]
    assert rows["rows"] == 3 and report["models"][0]["sequences"] == []
    for name in ("rows", "per_row", "captum"):
        assert rows["max_abs_diff"][name] < 1e-4  # main() also raises when they disagree
    assert rows["ideal_tokens"] <= rows["tokens"] <= 1.15 * rows["ideal_tokens"] + 3 * 70  # + clean-pass padding
    assert "rows together" in report["markdown"]


@toy_model
@pytest.mark.parametrize("path", ["batched", "per-row"])
def test_scaling_runs_one_pass_alone(tmp_path, path):
    report = scaling.main(["--model", "toy", "--lengths", "40", "--repeats", "1", "--warmup", "0", "--threads", "1",
                           "--oar-p-path", path, "--oar-p-positions", "widest", "--token-budget", "300",
                           "--no-progress", "--out", str(tmp_path / "sc.json"), "--plot", str(tmp_path / "sc.png")])
    row = report["lengths"][0]
    assert row["oar_p_path"] == path and row["oar_p_positions"] == "widest"
    assert row["oar_p_passes"] == 2  # the clean pass and the one pass, not split again
    assert 1 < row["oar_p_scored"] < row["R"]
    if path == "batched":  # the budget counts the cached prefix too
        assert row["oar_p_max_pass_held_tokens"] <= 300


def _compare_folder(path):
    """A finished comparison: 2 methods x 2 seeds, GRPO reaching 0.8 at step 10 on seed 0 only."""
    curves = {("uniform", 0): [0.5, 0.8, 0.8], ("uniform", 1): [0.5, 0.6, 0.7],
              ("oar-g", 0): [0.5, 0.8, 0.9], ("oar-g", 1): [0.5, 0.9, 0.9]}
    for (method, seed), accs in curves.items():
        run = path / "runs" / f"{method}-seed{seed}"
        run.mkdir(parents=True)
        rows = []
        for i, acc in enumerate(accs):
            step = 5 * i
            if step:
                rows += [{"type": "train", "step": s, "method": method, "seed": seed, "reward_mean": acc,
                          "weight_std": 0.1, "time_generate": 1.0, "time_reward": 0.1,
                          "time_attribute": 0.5 if method == "oar-g" else 0.0, "time_update": 1.0,
                          "wall_time": 2.1 * s} for s in range(step - 4, step + 1)]
            rows.append({"type": "eval", "step": step, "method": method, "seed": seed, "eval_accuracy": acc,
                         "wall_time": 2.1 * step})
        (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_run_all_summarises_a_compare_folder(tmp_path):
    _compare_folder(tmp_path / "cmp")  # still running: no compare.json, so compare's default target 0.85
    run_all.main(["--only", "learning", "--compare-folder", str(tmp_path / "cmp"), "--out", str(tmp_path)])
    summary = json.loads((tmp_path / "learning.json").read_text())
    grpo, oar = summary["methods"]["uniform"], summary["methods"]["oar-g"]
    assert summary["target"] == 0.85
    assert grpo["steps_to_target"] == [15, 15] and grpo["reached"] == 0 and oar["steps_to_target"] == [10, 5]
    assert oar["paired_diff_vs_grpo"] == pytest.approx([0.1, 0.2])
    md = (tmp_path / "summary.md").read_text()
    assert "| GRPO |" in md and ">= 15.0 (0/2 reached)" in md and "7.5 (2/2 reached)" in md
    # A finished comparison's compare.json sets the target.
    (tmp_path / "cmp" / "compare.json").write_text(json.dumps({"target": 0.75, "settings": None}))
    run_all.main(["--only", "learning", "--compare-folder", str(tmp_path / "cmp"), "--out", str(tmp_path)])
    summary = json.loads((tmp_path / "learning.json").read_text())
    assert summary["methods"]["uniform"]["steps_to_target"] == [5, 15]


def test_parser_and_start_record_the_command_and_machine():
    ap = common.parser("Title line\nmore", "x.json", repeats=5)
    args = ap.parse_args(["--threads", "1", "--clock", "wall"])
    assert args.repeats == 5 and args.warmup == 1 and args.out == common.DEFAULT_OUT / "x.json"
    device, report = common.start(args, "demo", ["--threads", "1", "--note", "two words"], extra=3)
    assert device.type == "cpu" and common.CLOCK["clock"] == "wall"
    assert report["command"] == "python -m benchmarks.demo --threads 1 --note 'two words'"
    assert report["machine"]["torch_threads"] == 1 and report["extra"] == 3
    assert common.rounds(report) == "5 rounds after 1 warm-up"
    common.setup(1, "cpu")  # back to CPU seconds for the other tests


def test_the_recorded_command_names_run_folders_by_runs(monkeypatch, tmp_path):
    """Provenance names no folder of one machine: a path inside ``$RUNS`` is recorded as
    ``$RUNS/...``, left unquoted, so the line pasted into a shell gives back the same words."""
    runs = tmp_path / "runs"
    monkeypatch.setenv("RUNS", f"{runs}/")
    argv = ["--out", f"{runs}/a b", f"--json={runs}", "--model", f"{runs}-other", "--note", "two words", str(runs)]
    line = common.command("demo", argv)
    assert line == f"python -m benchmarks.demo --out $RUNS'/a b' --json=$RUNS --model {runs}-other --note 'two words' $RUNS"
    words = line.removeprefix("python -m benchmarks.demo ")
    echoed = subprocess.run(["bash", "-c", f'printf "%s\\n" {words}'], env={"RUNS": str(runs)}, capture_output=True, text=True)
    assert echoed.stdout.splitlines() == argv
    monkeypatch.delenv("RUNS")
    assert common.command("demo", argv[:2]) == f"python -m benchmarks.demo --out '{runs}/a b'"  # no $RUNS: as given


def test_run_all_skips_learning_without_a_comparison(tmp_path, capsys):
    run_all.main(["--only", "learning", "--compare-folder", str(tmp_path / "none"), "--out", str(tmp_path)])
    assert "no comparison" in capsys.readouterr().out
    assert (tmp_path / "summary.md").exists()


@toy_model
def test_run_all_in_bfloat16_the_gpu_default(tmp_path, monkeypatch):
    """--device cuda loads the models in bfloat16 (`oar_lite.course.models.default_dtype`); on a CPU
    --dtype bfloat16 runs the same dtype through the benchmarks: the training step (its
    methods, same rollouts) and the three OAR-P implementations, whose scores agree at
    bfloat16's tolerance (the default 1e-4 holds in float32 only)."""
    monkeypatch.setitem(common.DTYPE, "dtype", None)
    loaded = []
    real_load = common.load

    def load(name, device, dtype=None):
        model, tok = real_load(name, device, dtype)
        loaded.append(next(model.parameters()).dtype)
        return model, tok

    monkeypatch.setattr(common, "load", load)
    run_all.main(["--quick", "--only", "step_cost", "oar_p_implementations", "--dtype", "bfloat16",
                  "--threads", "1", "--out", str(tmp_path)])
    assert loaded == [torch.bfloat16, torch.bfloat16]
    step = json.loads((tmp_path / "step_cost_quick_bfloat16.json").read_text())
    assert step["machine"]["dtype"] == "bfloat16" and step["models"][0]["same_rollouts"]
    oar_p = json.loads((tmp_path / "oar_p_implementations_quick_bfloat16.json").read_text())
    assert "--tolerance 0.05" in oar_p["command"]
    diffs = oar_p["models"][0]["sequences"][0]["max_abs_diff"]
    timed = [diffs[k] for k in ("batched", "fixed64", "naive", "captum")]
    assert 0 < max(timed) < run_all.HALF_PRECISION_TOLERANCE  # rounding, not equality, in bfloat16
    summary = (tmp_path / "summary_quick_bfloat16.md").read_text()
    assert "bfloat16 weights" in summary and "FAILED" not in summary


def test_run_all_keeps_the_others_when_one_benchmark_fails(tmp_path, monkeypatch):
    argvs = {}

    def fake(name, fail=False):
        def main(argv):
            argvs[name] = argv
            if fail:
                raise RuntimeError(f"{name} broke")
            return {"command": f"python -m benchmarks.{name}", "markdown": f"table of {name}"}
        return main

    monkeypatch.setattr(step_cost, "main", fake("step_cost"))
    monkeypatch.setattr(scaling, "main", fake("scaling", fail=True))
    monkeypatch.setattr(oar_p_implementations, "main", fake("oar_p_implementations"))
    with pytest.raises(RuntimeError, match="scaling failed"):
        run_all.main(["--only", "step_cost", "scaling", "oar_p_implementations", "--scored-rounds",
                      "--out", str(tmp_path)])
    summary = (tmp_path / "summary.md").read_text()
    assert "table of step_cost" in summary and "table of oar_p_implementations" in summary
    assert "## scaling\n\nFAILED" in summary and "RuntimeError: scaling broke" in summary
    assert "--scored-rounds" in argvs["step_cost"] and "--scored-rounds" not in argvs["scaling"]
    assert "--tolerance" not in argvs["oar_p_implementations"] and "--dtype" not in argvs["oar_p_implementations"]
    run_all.main(["--only", "oar_p_implementations", "--dtype", "float16", "--out", str(tmp_path)])
    argv = argvs["oar_p_implementations"]
    assert argv[argv.index("--dtype") + 1] == "float16" and argv[argv.index("--tolerance") + 1] == "0.05"
    assert argv[argv.index("--out") + 1].endswith("oar_p_implementations_float16.json")


def test_setup_rejects_an_unknown_dtype(monkeypatch):
    monkeypatch.setitem(common.DTYPE, "dtype", None)
    with pytest.raises(ValueError, match="dtype must be one of"):
        common.setup(1, "cpu", dtype="float8")
    common.setup(1, "cpu", dtype="float16")
    assert common.model_dtype("cpu") == torch.float16
    common.setup(1, "cpu")
    assert common.model_dtype("cpu") == torch.float32


def _documented_commands() -> list[tuple[str, list[str]]]:
    """Every ``python -m benchmarks.X ...`` of benchmarks/RESULTS.md, the Makefile and
    scripts/gpu_run.sh (its device as a CPU run here would give it, its output folder under
    ``$RUNS``), as (X, argv); run folders stay ``$RUNS/...``."""
    root = Path(__file__).resolve().parents[1]
    results = re.sub(r"`[^`]*`", lambda m: m.group(0).replace("\n", " "),
                     (root / "benchmarks/RESULTS.md").read_text().replace("\\\n", " "))  # continued lines joined
    make = (root / "Makefile").read_text().replace("\\\n", " ")
    gpu_run = (root / "scripts/gpu_run.sh").read_text().replace("\\\n", " ").replace('"$dev"', "cpu").replace("$out", "$RUNS")
    return [(m.group(1), shlex.split(m.group(2), comments=True)) for text in (results, make, gpu_run)
            for m in re.finditer(r"-m benchmarks\.(\w+)([^`\n]*)", text)]


DOCUMENTED = _documented_commands()


def test_the_documented_commands_are_found():
    assert len(DOCUMENTED) >= 20 and {m for m, _ in DOCUMENTED} >= {"credit_toy", "smollm2_baseline", "step_cost",
                                                                    "oar_p_implementations", "scaling", "gradient_quality",
                                                                    "credit_regime", "run_all", "answer_checking"}
    assert not [argv for _, argv in DOCUMENTED if any(w.startswith("/") for w in argv)], \
        "a documented command names an absolute path: write run folders as $RUNS/... (RESULTS.md says what it is)"


@pytest.mark.parametrize("module, argv", [pytest.param(m, argv, id=f"{i}-{m}") for i, (m, argv) in enumerate(DOCUMENTED)])
def test_documented_commands_still_parse(module, argv, monkeypatch, tmp_path, capsys):
    """Each command RESULTS.md, the Makefile and scripts/gpu_run.sh give gets through its
    benchmark's command line and `common.start`, with ``$RUNS`` an empty temporary folder; the
    first expensive call stops it before any work or file (a command with none, such as
    ``smollm2_learning power``, runs to its end on the shipped data). A command naming an input
    under ``$RUNS`` that a run must have written first (an adapter, a toy model, runs to read
    back) refuses it by name before any work: skipped, with that refusal as the reason."""
    if "cuda" in argv:
        pytest.skip("needs a GPU")

    class Stop(BaseException):  # not an Exception: run_all goes on past a benchmark's Exception
        pass

    def stop(*args, **kwargs):
        raise Stop

    from benchmarks import gpu_memory, smollm2_learning
    from oar_lite.lab.findings import positive
    from oar_lite.course import models

    for owner, name in ((common, "load"), (toy, "load_model"), (compare, "compare"), (credit, "credit_benchmark"),
                        (step_cost, "measure_model"), (models, "load_smollm2"), (smollm2_learning, "collect"),
                        (positive, "findings"), (gpu_memory, "measure"), (gpu_memory, "table")):
        monkeypatch.setattr(owner, name, stop)
    monkeypatch.setitem(common.CLOCK, "clock", common.CLOCK["clock"])
    runs = tmp_path / "runs"
    runs.mkdir()
    argv, threads = [w.replace("$RUNS", str(runs)) for w in argv], torch.get_num_threads()
    try:
        importlib.import_module(f"benchmarks.{module}").main(argv)
    except Stop:
        pass
    except SystemExit as exit_:
        said = (capsys.readouterr().err.strip().splitlines() or [""])[-1]
        refused = re.search(r"error: .* (\S+): no \S+ there; expected", said)  # common.require_inputs
        # an input under $RUNS, or under results/ (the Makefile's runs, ignored by git), a command before it writes
        if exit_.code == 2 and refused and (Path(refused[1]).is_relative_to(runs) or refused[1].startswith("results/")):
            pytest.skip(said.replace(str(runs), "$RUNS"))
        raise
    finally:
        torch.set_num_threads(threads)


def test_timed_then_memory_times_plain_calls_and_measures_memory_apart():
    """Each call runs warmup + repeats times timed and memory_repeats times under peak_memory;
    the result is the last timed call's, and the peak sees the call's allocation."""
    calls = []

    def big():
        calls.append("big")
        return torch.ones(32 * 2**20 // 4).sum()

    out = common.timed_then_memory({"big": big, "none": lambda: None}, warmup=1, repeats=3,
                                   device=torch.device("cpu"), progress=False, memory_repeats=2)
    assert len(calls) == 1 + 3 + 2
    assert len(out["big"]["seconds"]) == 3 and all(s >= 0 for s in out["big"]["seconds"])
    assert float(out["big"]["result"]) == 32 * 2**20 // 4
    if common.rss_peak_supported():
        assert len(out["big"]["peak_mib"]) == 2 and min(out["big"]["peak_mib"]) >= 24
        assert max(out["none"]["peak_mib"]) < 24


def test_smollm2_collect_refuses_a_run_trained_past_its_steps_and_records_the_timed_pairs(tmp_path, monkeypatch):
    from benchmarks import smollm2_learning

    def folder(name, method, seed, steps_logged):
        out = tmp_path / name
        out.mkdir()
        settings = {"method": method, "seed": seed, "learning_rate": 3e-4, "steps": 2, "heldout_seed": 2026, "train_seed": 0}
        (out / "run.json").write_text(json.dumps({
            "command": "run", "machine": {}, "settings": settings, "trl_config": {}, "finished": True,
            "log": [{"step": s, "reward": 0.5, "step_time": 1.0} for s in steps_logged]}))
        (out / "heldout.jsonl").write_text(json.dumps({"step": 0, "decoding": "greedy", "correct": [[1]]}) + "\n")
        return str(out)

    good = [folder("a", "uniform", 1, [1, 2]), folder("b", "oar-g", 1, [1, 2])]
    out = tmp_path / "log.json"
    smollm2_learning.main(["collect", "--name", "t", "--cost-seed", "1", "--json", str(out), *good])
    log = json.loads(out.read_text())
    assert log["cost_seeds"] == [1] and [r["method"] for r in log["runs"]] == ["uniform", "oar-g"]
    # A run from before its split was recorded was split by question text (issue 38): its log says so.
    assert log["runs"][0]["settings"]["split"] == {**smollm2_learning.OLD_SPLIT, "by": "question"}
    assert smollm2_learning.SPLIT["by"] == "numbers"  # runs from now on record the clean split
    # A run whose RUNS was not exported recorded its folder whole; the shipped log writes it $RUNS,
    # a path that only contains the folder's name further in stays, and so does a command without RUNS set.
    recorded = f"python -m x run --out {tmp_path}/runs/clean --model=/data{tmp_path}/runs/m --seed 1"
    run_json = Path(good[0]) / "run.json"
    run_json.write_text(json.dumps({**json.loads(run_json.read_text()), "command": recorded}))
    monkeypatch.setenv("RUNS", str(tmp_path / "runs") + "/")
    smollm2_learning.main(["collect", "--name", "t", "--json", str(out), *good])
    assert json.loads(out.read_text())["runs"][0]["command"] == \
        f"python -m x run --out $RUNS/clean --model=/data{tmp_path}/runs/m --seed 1"
    assert smollm2_learning.portable_command(f"run --out={tmp_path}/runs/c") == "run --out=$RUNS/c"
    monkeypatch.delenv("RUNS")
    assert smollm2_learning.portable_command(recorded) == recorded
    past = folder("c", "uniform", 2, [1, 2, 3])
    with pytest.raises(SystemExit, match=r"steps \[3\] beyond the 2 it was run for"):
        smollm2_learning.main(["collect", "--name", "t", "--json", str(out), past])
    alone = [*good, folder("d", "oar-p", 1, [1, 2])]  # ran at another time: no step cost from it
    smollm2_learning.main(["collect", "--name", "t", "--untimed", "oar-p", "--json", str(out), *alone])
    assert json.loads(out.read_text())["untimed"] == ["oar-p"]
    for wrong in ("uniform", "oar-q"):
        with pytest.raises(SystemExit, match="expected methods of the collected runs other than GRPO's"):
            smollm2_learning.main(["collect", "--name", "t", "--untimed", wrong, "--json", str(out), *alone])


def test_the_shipped_data_the_benchmarks_name_exists():
    """A benchmark's default data path (``SHIPPED``) is where the lab keeps its shipped results:
    a path left behind by a move must fail here, not at the end of a run."""
    from benchmarks import smollm2_learning, weight_uniformity

    assert smollm2_learning.SHIPPED.is_dir() and any(smollm2_learning.SHIPPED.glob("*.json"))
    assert weight_uniformity.SHIPPED.is_file()


def test_trl_step_cost_pieces():
    """The TRL step-cost benchmark's methods, reward, prompt and its agreement of a budget's scores
    with the default budget's (which can fail: a changed score or weight shows)."""
    from benchmarks import trl_step_cost as tsc

    assert tsc.method_names([1024, 16384]) == ["grpo", "oar-p", "oar-p@1024", "oar-p@16384"]
    assert [tsc._budget(m) for m in tsc.method_names([1024])] == [None, None, 1024]
    texts = ["a", "b", "c", "d"]
    assert tsc.trl_spread_reward([[{"role": "assistant", "content": t}] for t in texts]) == \
        [step_cost.spread_reward(t, {}) for t in texts] and set(tsc.trl_spread_reward(texts)) == {0.0, 1.0}
    messages = tsc.long_prompt("Tom has 3 apples. How many?")
    assert [m["role"] for m in messages] == ["user", "assistant", "user"] and "The answer is 8." in messages[1]["content"]
    s = torch.tensor([0.1, 0.5, 0.3, 0.9])
    w = torch.tensor([0.5, 1.2, 0.9, 1.4])
    same = tsc.score_agreement([(s, w)], [(s.clone(), w.clone())])
    assert same == {"rows": 1, "min_spearman": pytest.approx(1.0), "max_abs_score_diff": 0.0, "max_abs_weight_diff": 0.0}
    swapped = tsc.score_agreement([(s, w)], [(s[[1, 0, 2, 3]], w + 0.25)])
    assert swapped["min_spearman"] < 1 and swapped["max_abs_score_diff"] == pytest.approx(0.4)
    assert swapped["max_abs_weight_diff"] == pytest.approx(0.25)
    with pytest.raises(ValueError, match="different rows scored"):
        tsc.score_agreement([(s, w)], [])
    with pytest.raises(ValueError, match="--budgets must be >= 1"):
        tsc.main(["--budgets", "0", "--no-progress"])


def test_smollm2_collect_shares_one_step_zero_measurement_and_refuses_a_disagreeing_one(tmp_path):
    """The pre-registered study measures step 0 (the base model) in the first seed's runs only;
    `collect --step-zero-from` copies those records, marked, into the runs that did not measure it,
    and stops when two runs measured the base model differently or a run is on another split."""
    from benchmarks import smollm2_learning

    split = dict(smollm2_learning.SPLIT)

    def folder(name, seed, records, run_split=split):
        out = tmp_path / name
        out.mkdir()
        settings = {"method": "uniform", "seed": seed, "learning_rate": 3e-4, "steps": 2, "split": run_split}
        (out / "run.json").write_text(json.dumps({"command": "run", "machine": {}, "settings": settings,
                                                  "trl_config": {}, "finished": True, "log": [{"step": 1}]}))
        (out / "heldout.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
        return str(out)

    def record(step, correct, decoding="greedy"):
        return {"step": step, "decoding": decoding, "cpu_seconds": 1.0 + step, "correct": correct,
                "answered": [[1]] * len(correct), "tokens": [[5]] * len(correct)}

    base = [record(0, [[1], [0]]), record(0, [[0], [0]], "t1")]
    first = folder("uniform-seed10", 10, [*base, record(2, [[1], [1]])])
    same = folder("oar-g-seed10", 10, [{**r, "cpu_seconds": 9.0} for r in base] + [record(2, [[1], [0]])])
    later = folder("uniform-seed11", 11, [record(2, [[0], [1]])])
    out = tmp_path / "clean.json"
    smollm2_learning.main(["collect", "--name", "clean", "--step-zero-from", "uniform-seed10", "--json", str(out),
                           first, same, later])
    runs = {r["name"]: r for r in json.loads(out.read_text())["runs"]}
    copied = [r for r in runs["uniform-seed11"]["heldout"] if r["step"] == 0]
    assert [(r["decoding"], r["correct"], r["copied_from"]) for r in copied] == \
        [("greedy", [[1], [0]], "uniform-seed10"), ("t1", [[0], [0]], "uniform-seed10")]
    assert not any("copied_from" in r for r in runs["oar-g-seed10"]["heldout"])  # measured its own, equal
    assert [r["step"] for r in runs["uniform-seed11"]["heldout"]] == [0, 0, 2]
    differ = folder("oar-g-seed11", 11, [record(0, [[0], [0]]), base[1]])
    with pytest.raises(SystemExit, match=r"measured step 0 differently \(\['greedy'\]\)"):
        smollm2_learning.main(["collect", "--name", "clean", "--step-zero-from", "uniform-seed10", "--json",
                               str(out), first, differ])
    other = folder("uniform-seed12", 12, [record(2, [[0], [1]])], {**split, "by": "question"})
    with pytest.raises(SystemExit, match="on another split"):
        smollm2_learning.main(["collect", "--name", "clean", "--step-zero-from", "uniform-seed10", "--json",
                               str(out), first, other])
    with pytest.raises(SystemExit, match="expected the folder name of one of the collected runs"):
        smollm2_learning.main(["collect", "--name", "clean", "--step-zero-from", "seed99", "--json", str(out), first])
