"""`oar_lite.lab.credit`: the credit-assignment benchmark on the shipped toy model."""
import math

import pytest
import torch

from oar_lite.lab import credit


def test_benchmark_on_a_few_completions_is_sane(shipped):
    model, tokenizer = shipped
    methods = ["uniform", "random", "entropy", "oar-p:answer_mean", "oar-g:answer_mean"]
    results, records = credit.credit_benchmark(methods, n=8, seed=0, model=model, tokenizer=tokenizer,
                                               return_records=True, progress=False)
    assert set(results) == set(methods)
    assert results["uniform"]["auc_mean"] == 0.5 and results["uniform"]["auc_std"] == 0.0
    assert 0.3 < results["random"]["auc_mean"] < 0.7
    assert results["oar-p:answer_mean"]["auc_mean"] > 0.6  # the shipped model reads the result digits
    for m, r in results.items():
        assert 5 <= r["n"] <= 8 and r["n_sampled"] == 8
        assert all(math.isfinite(r[k]) for k in ("auc_mean", "auc_all_mean", "p_at_k_mean", "seconds_per_completion"))
        assert 0 <= r["auc_mean"] <= 1 and 0 <= r["p_at_k_mean"] <= 1
    for rec in records:
        R = rec["reasoning"].stop - rec["reasoning"].start
        assert rec["labels"].shape == (R,) and all(s.shape == (R,) for s in rec["scores"].values())
    table = credit.results_table(results)
    assert table.count("\n") == len(methods) + 1 and "`oar-p:answer_mean`" in table
    with pytest.raises(ValueError, match="unknown method"):
        credit.credit_benchmark(["oar-x"], n=2, model=model, tokenizer=tokenizer)


def test_options_go_to_the_methods_that_declare_them(shipped):
    model, tokenizer = shipped
    with pytest.raises(TypeError, match=r"\['batch_sise'\] are declared by none of the methods"):
        credit.credit_benchmark(["oar-p:last", "oar-g"], n=1, model=model, tokenizer=tokenizer, batch_sise=2)
    results = credit.credit_benchmark(["oar-p:last", "oar-g:last"], n=2, model=model, tokenizer=tokenizer, progress=False,
                                      batch_size=2, noise_std=0.01)  # OAR-P's limit and OAR-G's noise, each its own
    assert set(results) == {"oar-p:last", "oar-g:last"}


def test_mode_agreement_of_oar_p_and_oar_g():
    a, b = torch.tensor([1.0, 2.0, 3.0]), torch.tensor([3.0, 2.0, 1.0])
    records = [{"scores": {"oar-p:last": a, "oar-g:last": a, "oar-p:answer_mean": a, "oar-g:answer_mean": b}},
               {"scores": {"oar-p:last": a, "oar-g:last": a, "oar-p:answer_mean": a, "oar-g:answer_mean": torch.ones(3)}}]
    out = credit.mode_agreement(records, ["oar-p:last", "oar-g:last", "oar-p:answer_mean", "oar-g:answer_mean"])
    assert {mode: a["n"] for mode, a in out.items()} == {"last": 2, "answer_mean": 1}  # a constant row is left out
    assert out["last"]["mean"] == pytest.approx(1.0) and out["answer_mean"]["mean"] == pytest.approx(-1.0)


def test_label_means_weigh_each_completion_alike():
    """Scores are divided by their completion's sum first: a long completion with large scores
    counts as much as a short one."""
    from oar_lite.course import toy

    P, S, N = toy.PIVOTAL, toy.SUPPORT, toy.NEUTRAL
    records = [{"scores": {"m": torch.tensor([3.0, 1.0])}, "labels": torch.tensor([P, N])},
               {"scores": {"m": torch.tensor([100.0, 100.0, 200.0])}, "labels": torch.tensor([P, S, S])}]
    means = credit.label_means(records, "m")
    assert means[toy.LABEL_NAMES[P]] == pytest.approx((0.75 + 0.25) / 2)
    assert means[toy.LABEL_NAMES[S]] == pytest.approx(0.375)
    assert means[toy.LABEL_NAMES[N]] == pytest.approx(0.25)
