"""The threshold-free learning measure (mean held-out accuracy over a run, paired against
GRPO) and the bootstrap interval of a weighting's SNR against uniform's."""
import pytest
import torch

from oar_lite import gradient_quality as gq, regime


def _records(method, seed, accs, every=2):
    return [{"type": "eval", "method": method, "seed": seed, "step": k * every, "eval_accuracy": a}
            for k, a in enumerate(accs)]


def _runs(seeds=6):
    recs = []
    for s in range(seeds):
        noise = 0.02 * (s % 3)  # seeds differ, the pairing removes it
        recs += _records("uniform", s, [0.5, 0.60 + noise, 0.70 + noise, 0.70 + noise])
        recs += _records("oracle", s, [0.5, 0.70 + noise, 0.80 + noise, 0.80 + noise])  # +0.1 at every evaluation
        recs += _records("half", s, [0.5, 0.65 + noise, 0.75 + noise, 0.75 + noise])    # +0.05
        recs += _records("worse", s, [0.5, 0.55 + noise, 0.65 + noise, 0.60 + noise])   # below GRPO
    return recs


def test_accuracy_area_is_paired_and_leaves_out_step_zero():
    t = regime.accuracy_area_table(_runs(), methods=["uniform", "oracle", "half", "worse"], n_boot=500)
    m = t["methods"]
    assert t["steps"] == [2, 4, 6] and t["seeds"] == list(range(6))
    assert m["uniform"]["area"][0] == pytest.approx((0.6 + 0.7 + 0.7) / 3)  # step 0's 0.5 left out
    assert m["oracle"]["diff"] == pytest.approx(0.1)
    # the seeds' spread cancels in the paired difference: a tight interval around +0.1
    assert m["oracle"]["diff_ci"][0] == pytest.approx(0.1) and m["oracle"]["diff_ci"][1] == pytest.approx(0.1)
    assert m["oracle"]["ci"][1] - m["oracle"]["ci"][0] > 0.01  # while the unpaired one is wide
    assert m["half"]["recovered"] == pytest.approx(0.5)
    assert m["worse"]["recovered"] < 0 and m["worse"]["diff_ci"][1] < 0
    assert m["uniform"]["recovered"] is None and m["oracle"]["recovered"] is None


def test_accuracy_area_reads_up_to_the_budget_and_refuses_mismatched_schedules():
    t = regime.accuracy_area_table(_runs(), max_step=2, n_boot=200)
    assert t["steps"] == [2] and t["methods"]["oracle"]["diff"] == pytest.approx(0.1)
    recs = _runs(3) + _records("sparse", 0, [0.5, 0.6]) + _records("sparse", 1, [0.5, 0.6]) + _records("sparse", 2, [0.5, 0.6])
    with pytest.raises(ValueError, match="evaluated at steps"):
        regime.accuracy_area_table(recs, n_boot=100)
    with pytest.raises(ValueError, match="no 'uniform' runs"):
        regime.accuracy_area_table(_records("oracle", 0, [0.5, 0.6]) + _records("oracle", 1, [0.5, 0.6]))
    with pytest.raises(ValueError, match="at least 2 seeds"):
        regime.accuracy_area_table(_records("uniform", 0, [0.5, 0.6]))


def test_results_dir_is_package_data():
    assert regime.RESULTS_DIR.is_dir() and (regime.RESULTS_DIR / "regimes.json").exists()
    assert regime.RESULTS_DIR.parent.name == "data" and regime.RESULTS_DIR.parent.parent.name == "oar_lite"


def test_snr_ratio_interval_ranks_a_quieter_weighting():
    torch.manual_seed(0)
    truth = torch.randn(40)
    batches = 80
    loud = truth + 3.0 * torch.randn(batches, 40)
    quiet = truth + 1.0 * torch.randn(batches, 40)       # same signal, a third of the noise
    same = truth + 3.0 * torch.randn(batches, 40)        # as noisy as uniform
    grads = {"uniform": loud, "quiet": quiet, "same": same}
    stats = gq.gradient_stats(grads)
    ci = gq.snr_ratio_intervals(grads, n_boot=500)
    assert ci["uniform"] == (1.0, 1.0)
    ratio = stats["quiet"]["snr"] / stats["uniform"]["snr"]
    assert ci["quiet"][0] < ratio < ci["quiet"][1] and ci["quiet"][0] > 3  # clearly above uniform
    assert ci["same"][0] < 1 < ci["same"][1]                             # indistinguishable from uniform
    with pytest.raises(ValueError, match="reference"):
        gq.snr_ratio_intervals({"quiet": quiet})
    with pytest.raises(ValueError, match="same 80 batches"):
        gq.snr_ratio_intervals({"uniform": loud, "short": quiet[:10]})


def test_snr_ratio_intervals_do_not_depend_on_the_column_blocks(monkeypatch):
    """The Gram matrices summed over blocks of 7 columns give the intervals of one block."""
    g = torch.Generator().manual_seed(1)
    grads = {"uniform": torch.randn(12, 40, generator=g), "quiet": 0.3 * torch.randn(12, 40, generator=g) + 1}
    whole = gq.snr_ratio_intervals(grads, n_boot=200)
    monkeypatch.setattr(gq, "STATS_BLOCK_BYTES", 12 * 7 * 8)
    blocked = gq.snr_ratio_intervals(grads, n_boot=200)
    for label in grads:
        assert blocked[label] == pytest.approx(whole[label], rel=1e-10)


def test_credit_regime_benchmark_reuses_grpo_runs_and_reports_the_area(tmp_path):
    """A screen that changes only the boost trains the oracle and reads GRPO's runs from another folder."""
    from benchmarks import credit_regime as bench
    js = tmp_path / "regimes.json"
    first = bench.main(["--name", "base", "--profile", "tiny", "--seeds", "0", "1", "--methods", "uniform", "oracle",
                        "--target", "0.95", "--out", str(tmp_path / "a"), "--json", str(js)])
    assert set(first["table"]["methods"]) == {"uniform", "oracle"}
    second = bench.main(["--name", "boost 3", "--profile", "tiny", "--seeds", "0", "1", "--methods", "oracle",
                         "--set", "boost=3", "--target", "0.95", "--out", str(tmp_path / "b"), "--json", str(js),
                         "--reuse", str(tmp_path / "a")])
    assert list(second["table"]["methods"]) == ["uniform", "oracle"]  # GRPO reused, the oracle retrained
    assert second["table"]["methods"]["uniform"]["steps"] == first["table"]["methods"]["uniform"]["steps"]
    assert not (tmp_path / "b" / "runs" / "uniform-seed0").exists()
    area = second["area"]["methods"]
    assert area["uniform"]["diff"] == 0 and len(area["oracle"]["area"]) == 2
    assert set(bench.json.loads(js.read_text())) == {"base", "boost 3"}
    assert "Mean held-out accuracy over the run" in bench.render(second)
