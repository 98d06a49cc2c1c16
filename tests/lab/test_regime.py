"""`oar_lite.lab.regime`: steps to a target over seeds, the threshold-free mean held-out accuracy
over a run (paired against GRPO), and whether credit pays (one rule, `regime.pays`)."""
import pytest

from oar_lite.lab import regime


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
    assert regime.RESULTS_DIR.parent.name == "data" and regime.RESULTS_DIR.parent.parent.name == "lab"


@pytest.mark.slow
def test_credit_regime_benchmark_reuses_grpo_runs_and_reports_the_area(tmp_path):
    """A screen that changes only the boost trains the oracle and reads GRPO's runs from another folder."""
    from benchmarks import credit_regime as bench
    js = tmp_path / "regimes.json"
    first = bench.main(["--name", "base", "--profile", "tiny", "--seeds", "0", "1", "--methods", "uniform", "oracle",
                        "--target", "0.95", "--out", str(tmp_path / "a"), "--json", str(js)])
    assert set(first["table"]["methods"]) == {"uniform", "oracle"}
    second = bench.main(["--name", "boost 3", "--profile", "tiny", "--seeds", "0", "1", "--methods", "oracle",
                         "--boost", "3", "--target", "0.95", "--out", str(tmp_path / "b"), "--json", str(js),
                         "--reuse", str(tmp_path / "a")])
    assert list(second["table"]["methods"]) == ["uniform", "oracle"]  # GRPO reused, the oracle retrained
    assert second["table"]["methods"]["uniform"]["steps"] == first["table"]["methods"]["uniform"]["steps"]
    assert not (tmp_path / "b" / "runs" / "uniform-seed0").exists()
    area = second["area"]["methods"]
    assert area["uniform"]["diff"] == 0 and len(area["oracle"]["area"]) == 2
    assert set(bench.json.loads(js.read_text())) == {"base", "boost 3"}
    assert "Mean held-out accuracy over the run" in bench.render(second)


def test_learning_table_speedup_recovered_fraction_and_censoring():
    from oar_lite.lab import regime
    recs = []
    for s in range(5):
        recs += _records("uniform", s, [0.5, 0.6, 0.7, 0.7, 0.8 if s % 2 else 0.79, 0.8])      # step 8 or 10
        recs += _records("oracle", s, [0.5, 0.7, 0.8, 0.8, 0.8, 0.8])                         # step 4
        recs += _records("half", s, [0.5, 0.6, 0.7, 0.8, 0.8, 0.8])                           # step 6
        recs += _records("never", s, [0.5, 0.5, 0.5, 0.5, 0.5, 0.5])                          # censored at 12
    t = regime.learning_table(recs, target=0.8, methods=["uniform", "oracle", "half", "never"], n_boot=500)
    m = t["methods"]
    assert m["oracle"]["steps"] == [4.0] * 5 and m["uniform"]["steps"] == [10.0, 8.0, 10.0, 8.0, 10.0]
    assert m["oracle"]["speedup"] == pytest.approx(9.2 / 4)
    assert m["oracle"]["speedup_ci"][0] > 1.5
    assert m["half"]["recovered"] == pytest.approx((9.2 - 6) / (9.2 - 4))
    assert m["never"]["censored"] == 5 and m["never"]["steps"] == [12.0] * 5 and m["never"]["recovered"] < 0
    assert m["uniform"]["recovered"] is None and m["oracle"]["recovered"] is None
    with pytest.raises(ValueError, match="at least 2 seeds"):
        regime.learning_table(_records("uniform", 0, [0.5]), target=0.8)


def test_learning_table_reads_longer_runs_at_the_budget():
    from oar_lite.lab import regime
    recs = []
    for s in range(3):
        recs += _records("uniform", s, [0.5, 0.6, 0.7, 0.8])  # reaches 0.8 at step 6
        recs += _records("oracle", s, [0.5, 0.8, 0.8, 0.8])   # step 2
    t = regime.learning_table(recs, target=0.8, max_step=4, n_boot=200)
    assert t["methods"]["uniform"]["steps"] == [6.0] * 3 and t["methods"]["uniform"]["censored"] == 3
    assert t["methods"]["oracle"]["steps"] == [2.0] * 3


def _entry(speedup, oracle_ci, seeds, prompts=2, steps=30, reused=()):
    table = {"target": 0.75, "seeds": list(range(seeds)),
             "methods": {"uniform": {"mean": 12.0, "ci": (10.0, 14.0), "speedup": 1.0, "speedup_ci": (1.0, 1.0)},
                         "oracle": {"mean": 12.0 / speedup, "ci": oracle_ci, "speedup": speedup,
                                    "speedup_ci": (speedup - 0.2, speedup + 0.2)}}}
    return {"note": "", "table": table, "reused": {"methods": list(reused)},
            "settings": {"prompts_per_step": prompts, "group_size": 4, "steps": steps, "boost": 9.0,
                         "learning_rate": 1e-4, "digits": [2, 4]}}


def test_pays_needs_the_speedup_and_its_paired_interval_above_1():
    assert regime.pays(_entry(2.0, (5.0, 7.0), 10)["table"])
    assert not regime.pays(_entry(1.4, (7.0, 9.0), 10)["table"])  # too small a speed-up
    # The steps' own intervals do not decide (the old rule asked them to be disjoint): the paired
    # speed-up's interval does. Overlapping step intervals, speed-up interval above 1: pays.
    assert regime.pays(_entry(2.0, (5.0, 10.0), 10)["table"])
    # Disjoint step intervals, but the paired speed-up's interval holds 1: does not pay.
    wide = _entry(1.6, (5.0, 7.0), 10)
    wide["table"]["methods"]["oracle"]["speedup_ci"] = (0.9, 2.4)
    assert not regime.pays(wide["table"])


def test_oracle_regimes_reads_each_oracle_once_and_superseded_finds_the_larger_run():
    regimes = {"screen": _entry(2.0, (5.0, 7.0), 3), "confirm": _entry(1.1, (9.0, 13.0), 10),
               "other batch": _entry(1.2, (9.0, 11.0), 3, prompts=4), "reused": _entry(1.0, (10.0, 14.0), 10,
                                                                                       reused=["oracle"])}
    assert regime.oracle_regimes(regimes) == ["screen", "confirm", "other batch"]
    assert regime.superseded("screen", regimes) == "confirm" and regime.superseded("other batch", regimes) is None


def _batch_runs():
    runs = {2: [], 4: []}
    for s in range(3):
        up = 0.01 * s  # seeds differ; the pairing removes it
        runs[2] += _records("uniform", s, [0.5 + up, 0.6 + up, 0.7 + up, 0.7 + up, 0.8 + up])   # 0.8 at step 8
        runs[4] += _records("uniform", s, [0.5 + up, 0.7 + up, 0.8 + up, 0.8 + up, 0.8 + up])   # at step 4
        runs[4] += _records("oracle", s, [0.5, 0.5, 0.5, 0.5, 0.5])  # another method: not read
    return runs


def test_batch_size_table_reads_per_step_and_per_completion():
    t = regime.batch_size_table(_batch_runs(), target=0.8, group_size=4, max_step=8, n_boot=500)
    assert t["prompts"] == [2, 4] and t["reference"] == "2 prompts" and t["seeds"] == [0, 1, 2]
    steps = t["steps"]["methods"]
    assert steps["2 prompts"]["steps"] == [8.0] * 3 and steps["4 prompts"]["steps"] == [4.0] * 3
    assert steps["4 prompts"]["speedup"] == pytest.approx(2.0)
    area = t["area"]["methods"]
    assert area["4 prompts"]["diff"] == pytest.approx(0.775 - 0.7)  # per step: steps 2-8
    per = t["per_completion"]
    assert per["budget"] == 64  # 8 steps x 2 prompts x 4 completions
    assert per["rows"]["4 prompts"]["steps"] == [2, 4]  # 16 completions a step: the first 4 steps
    assert per["rows"]["4 prompts"]["diff"] == pytest.approx(0.75 - 0.7)
    assert per["rows"]["2 prompts"]["completions_to_target"] == per["rows"]["4 prompts"]["completions_to_target"] == 64
    with pytest.raises(ValueError, match="2 or more batch sizes"):
        regime.batch_size_table({2: _batch_runs()[2]}, target=0.8, group_size=4, max_step=8)


def test_batch_equivalent_interpolates_in_log_prompts():
    diffs = {2: 0.0, 4: 0.02, 8: 0.04}
    assert regime.batch_equivalent(diffs, 0.02) == pytest.approx(4.0)
    assert regime.batch_equivalent(diffs, 0.03) == pytest.approx(2 ** 2.5)
    assert regime.batch_equivalent(diffs, 0.01) == pytest.approx(2 ** 1.5)
    assert regime.batch_equivalent(diffs, -0.01) == 2.0 and regime.batch_equivalent(diffs, 0.05) == float("inf")
    # a dip is not credited: 4 prompts count as 2's 0 and the gain lies between 4 and 8
    assert regime.batch_equivalent({2: 0.0, 4: -0.01, 8: 0.02}, 0.01) == pytest.approx(2 ** 2.5)
    with pytest.raises(ValueError, match="0 at the smallest"):
        regime.batch_equivalent({2: 0.01, 4: 0.02}, 0.01)


def test_batch_size_benchmark_trains_seed_by_seed_and_reads_back(tmp_path):
    from benchmarks import batch_size as bench
    js = tmp_path / "batch.json"
    argv = ["--name", "tiny", "--profile", "tiny", "--steps", "2", "--prompts", "1", "2", "--group-size", "2",
            "--seeds", "0", "1", "--target", "0.95", "--out", str(tmp_path / "b"), "--json", str(js),
            "--oracle-gain", "0.0"]
    entry = bench.main(argv + ["--train"])
    assert (tmp_path / "b-P1" / "runs" / "uniform-seed1").is_dir() and (tmp_path / "b-P2" / "runs" / "uniform-seed0").is_dir()
    assert entry["table"]["prompts"] == [1, 2] and entry["table"]["seeds"] == [0, 1]
    assert entry["oracle"]["prompts"] == 1.0  # no gain: worth the smallest batch
    assert entry["table"]["per_completion"]["budget"] == 2 * 1 * 2
    again = bench.main(argv)  # read back: nothing trained, the same table
    assert again["table"]["area"] == entry["table"]["area"]
    import json
    assert "1 prompts" in bench.render(again) and set(json.loads(js.read_text())) == {"tiny"}


def test_credit_regime_passes_the_optimizer_to_the_runs(monkeypatch):
    from benchmarks import credit_regime as bench

    class Stop(BaseException):
        pass

    seen = {}

    def compare(*args, **kwargs):
        seen.update(kwargs)
        raise Stop

    monkeypatch.setattr(bench.cmp, "compare", compare)
    with pytest.raises(Stop):
        bench.main(["--name", "sgd", "--optimizer", "sgd", "--learning-rate", "0.1", "--seeds", "0", "1"])
    assert seen["overrides"] == {"optimizer": "sgd", "learning_rate": 0.1}
    seen.clear()
    with pytest.raises(Stop):
        bench.main(["--name", "adam", "--seeds", "0", "1"])
    assert "optimizer" not in seen["overrides"]  # the profile's (AdamW) unless asked
    with pytest.raises(SystemExit):
        bench.main(["--name", "x", "--optimizer", "adam"])
