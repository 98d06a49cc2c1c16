"""`oar_lite.lab.adapter_signal`: ARCA's adapter residual measured against the shipped SmolLM2
ground truth and on an adapted model's own completions (issue 37 item 2)."""
import json

import pytest
import torch

import oar_lite as ol
from oar_lite.course import toy
from oar_lite.lab import adapter_signal, ground_truth

peft = pytest.importorskip("peft")


def _adapted_toy(init_lora_weights=False):
    """The shipped toy model with a LoRA adapter: random (B != 0) unless ``init_lora_weights``,
    drawn from a fixed seed so that what the model samples does not depend on the tests before."""
    model, tokenizer = toy.load_model()
    torch.manual_seed(0)
    config = peft.LoraConfig(r=4, target_modules="all-linear", init_lora_weights=init_lora_weights)
    return peft.get_peft_model(model, config).eval(), tokenizer


def test_adapter_completions_score_each_answered_completion_with_every_method():
    model, tokenizer = _adapted_toy()
    prompts = [p["prompt"] for p in toy.make_problems(2, seed=0)]
    methods = ("adapter-residual", "entropy")
    rows = adapter_signal.adapter_completions(model, tokenizer, prompts, group_size=3, max_new_tokens=40, seed=0,
                                              methods=methods, add_special_tokens=True)
    assert 1 <= len(rows) <= 6
    for row in rows:
        lengths = {m: len(row["scores"][m]) for m in methods}
        assert len(set(lengths.values())) == 1 and min(lengths.values()) >= 1, lengths
        assert all(torch.isfinite(torch.tensor(s)).all() for s in row["scores"].values())
        assert max(row["scores"]["adapter-residual"]) > 0  # a non-zero adapter moves the hidden states
    fresh, _ = _adapted_toy(init_lora_weights=True)  # LoRA's B = 0: the adapter changes nothing yet
    zero = adapter_signal.adapter_completions(fresh, tokenizer, prompts, group_size=3, max_new_tokens=40, seed=0,
                                              methods=("adapter-residual",), add_special_tokens=True)
    assert zero and all(max(r["scores"]["adapter-residual"]) == 0 for r in zero)


def _result_from_stored(method_as: dict) -> dict:
    """A measurement whose scores are the shipped file's stored ones, renamed (`method_as`)."""
    data = ground_truth.load_ground_truth()
    rows = [{"scores": {new: rec["scores"][old] for new, old in method_as.items()}} for rec in data["completions"]]
    completions = [{"scores": {new: rec["scores"][old] for new, old in method_as.items()}}
                   for rec in data["completions"][:5]]
    return {"settings": {"methods": list(method_as)}, "ground_truth": rows, "adapter_completions": completions}


def test_result_tables_score_the_labels_as_the_ground_truth_table_does():
    result = _result_from_stored({"adapter-residual": "oar-p:last", "entropy": "entropy"})
    tables = adapter_signal.result_tables(result)
    shipped = ground_truth.ground_truth_table(methods=["oar-p:last", "entropy"])
    assert tables["ground_truth"]["adapter-residual"] == shipped["oar-p:last"]
    assert tables["ground_truth"]["entropy"] == shipped["entropy"]
    data = ground_truth.load_ground_truth()
    share = [ol.reshape.effective_share(ol.CreditConfig(method="adapter-residual").reshape(
        torch.tensor(rec["scores"]["oar-p:last"], dtype=torch.float64))) for rec in data["completions"][:5]]
    row = tables["concentration"]["adapter-residual"]
    assert row["n"] == 5 and row["effective_share"] == pytest.approx(sum(share) / 5)


def test_result_tables_refuse_a_measurement_of_another_file():
    result = _result_from_stored({"adapter-residual": "oar-p:last"})
    result["ground_truth"] = result["ground_truth"][:-1]
    with pytest.raises(ValueError, match="scored completions for .* in the ground-truth file"):
        adapter_signal.result_tables(result)




def test_agreement_is_zero_against_itself_and_finds_a_changed_score():
    shipped = json.loads(adapter_signal.RESULT_PATH.read_text())
    same = adapter_signal.agreement(shipped, shipped)
    assert set(same) == set(shipped["settings"]["methods"])
    n = len(shipped["adapter_completions"])
    assert all(a["ground_truth_max_abs"] == 0 == a["completions_max_abs"] and a["completions_same_text"] == n
               for a in same.values())
    changed = json.loads(json.dumps(shipped))
    changed["ground_truth"][3]["scores"]["entropy"][1] += 0.25
    changed["adapter_completions"][0]["text"] += " (resampled)"
    moved = adapter_signal.agreement(shipped, changed)
    assert moved["entropy"]["ground_truth_max_abs"] == pytest.approx(0.25)
    assert moved["adapter-residual"]["ground_truth_max_abs"] == 0
    assert all(a["completions_same_text"] == n - 1 for a in moved.values())
    with pytest.raises(ValueError, match="different files"):
        adapter_signal.agreement(shipped, {**changed, "ground_truth": changed["ground_truth"][:-1]})


def test_the_benchmark_records_the_run_that_trained_the_adapter(tmp_path, monkeypatch):
    from benchmarks import adapter_residual

    run = tmp_path / "uniform-seed1-lr0.0003"
    (run / "checkpoint-12").mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"command": f"python -m benchmarks.smollm2_learning run --out {tmp_path}",
                                              "settings": {"method": "uniform", "seed": 1, "split": {"by": "numbers"}}}))
    (run / "heldout.jsonl").write_text("\n".join(json.dumps(r) for r in (
        {"step": 0, "decoding": "greedy", "accuracy": 0.3}, {"step": 12, "decoding": "greedy", "accuracy": 0.6},
        {"step": 12, "decoding": "t1", "accuracy": 0.4})) + "\n")
    monkeypatch.setenv("RUNS", str(tmp_path))
    recorded = adapter_residual.adapter_run(run / "checkpoint-12", "code at abc1234")
    assert recorded == {"command": "python -m benchmarks.smollm2_learning run --out $RUNS", "method": "uniform (GRPO)",
                        "seed": 1, "steps": 12, "split": {"by": "numbers"},
                        "heldout_accuracy_step12": {"greedy": 0.6, "t1": 0.4}, "note": "code at abc1234"}
    assert adapter_residual.adapter_run(tmp_path / "elsewhere" / "checkpoint-4") == {}


def test_the_shipped_measurement_reads():
    """The shipped file: every method in both tables, every ground-truth completion scored, the
    adapter run recorded, and the reading 06 prints made from it."""
    tables = adapter_signal.result_tables()
    shipped = json.loads(adapter_signal.RESULT_PATH.read_text())
    assert set(tables["ground_truth"]) == set(tables["concentration"]) == set(shipped["settings"]["methods"])
    assert len(shipped["ground_truth"]) == len(ground_truth.load_ground_truth()["completions"])
    assert shipped["settings"]["adapter_run"]["steps"] == 12
    assert f"AUC {tables['ground_truth']['adapter-residual']['auc_mean']:.2f}" in adapter_signal.reading(tables)


def test_score_ground_truth_scores_each_completion_as_token_scores_does(monkeypatch):
    """The scoring loop on a toy completion (the prompt rebuild is tested above): each method's
    scores are `token_scores` of the record's spans, OAR-G's noise drawn from seed and index."""
    model, tokenizer = _adapted_toy()
    prompt = tokenizer("43+75:")["input_ids"]
    completion = tokenizer("4+7+0=11 5+3+1=9 A=118", add_special_tokens=False)["input_ids"]
    seg = ol.segment_completion_ids(tokenizer, completion)
    rec = {"completion_ids": completion, "reasoning": [seg.reasoning.start, seg.reasoning.stop],
           "answer_span": [seg.answer.start, seg.answer.stop]}
    P = len(prompt)
    ids, reasoning = torch.tensor(prompt + completion), slice(P + seg.reasoning.start, P + seg.reasoning.stop)
    answer = slice(P + seg.answer.start, P + seg.answer.stop)
    monkeypatch.setattr(ground_truth, "rebuilt_sequence", lambda completion, tokenizer: (ids, P, reasoning, answer))
    methods = ("adapter-residual", "oar-g:answer_mean")
    (row,) = adapter_signal.score_ground_truth(model, tokenizer, {"completions": [rec]}, methods, seed=3)
    assert row["scores"]["adapter-residual"] == ol.token_scores("adapter-residual", model, ids, reasoning, answer).tolist()
    generator = torch.Generator().manual_seed(ol.seeding.derive_seed(3, 0))
    expected = ol.token_scores("oar-g:answer_mean", model, ids, reasoning, answer, generator=generator)
    assert row["scores"]["oar-g:answer_mean"] == pytest.approx(expected.tolist())
    assert set(row["cpu_seconds"]) == set(methods)


def _tables(residual_auc, share):
    row = lambda m, ci=0.05: {"auc_mean": m, "auc_ci95": ci, "auc_n": 15}
    return {"ground_truth": {"adapter-residual": row(residual_auc), "oar-p:last": row(0.33), "entropy": row(0.61)},
            "concentration": {"adapter-residual": {"effective_share": share, "n": 31},
                              "oar-p:last": {"effective_share": 0.79, "n": 31}, "entropy": {"effective_share": 0.83, "n": 31}},
            "settings": {}}


def test_the_reading_follows_the_intervals():
    text = adapter_signal.reading(_tables(0.62, 0.85))
    assert "AUC 0.62 (95% interval 0.57 to 0.67" in text and "above chance (0.5)" in text
    assert "overlaps those of entropy and lies apart from oar-p:last's" in text
    assert "no more concentrated than the others" in text
    low = adapter_signal.reading(_tables(0.52, 0.5))
    assert "an interval that includes chance (0.5)" in low and "more concentrated than oar-p:last and entropy" in low
    assert "below chance" in adapter_signal.reading(_tables(0.30, 0.9))


def test_the_benchmark_refuses_a_folder_without_an_adapter(tmp_path, capsys):
    from benchmarks import adapter_residual

    with pytest.raises(SystemExit):
        adapter_residual.main(["--adapter", str(tmp_path), "--out", str(tmp_path / "out.json")])
    assert "no adapter_config.json there; expected a peft adapter folder" in capsys.readouterr().err
    assert not (tmp_path / "out.json").exists()
