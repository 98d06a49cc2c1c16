"""`oar_lite.lab.report`: the statistics of a comparison against values computed by hand."""
import pytest

from oar_lite.lab import regime, report


def _evals(accs, every=5):
    return [{"type": "eval", "step": every * i, "eval_accuracy": a, "wall_time": 2.0 * every * i}
            for i, a in enumerate(accs)]


def test_steps_to_target_is_the_first_crossing_or_censored_one_interval_late():
    evals = _evals([0.4, 0.7, 0.6, 0.9])[::-1]  # out of order: the first by step counts
    assert report.steps_to_target(evals, 0.7) == (5.0, True)
    assert report.steps_to_target(evals, 0.4) == (0.0, True)  # step 0 counts
    assert report.steps_to_target(evals, 0.85) == (15.0, True)
    assert report.steps_to_target(evals, 0.95) == (20.0, False)  # the last step + the evaluation interval
    assert report.steps_to_target(_evals([0.1]), 0.5) == (1.0, False)  # one evaluation: an interval of 1
    assert regime.steps_to_target is report.steps_to_target  # one rule: the regime tables read the same


def _runs(method, seed, accs, phase_s):
    evals = [{**r, "method": method, "seed": seed} for r in _evals(accs)]
    trains = [{"type": "train", "method": method, "seed": seed, "step": s, "reward_mean": 0.5, "weight_std": 0.1,
               **{f"time_{p}": t for p, t in phase_s.items()}, **{f"cpu_{p}": 2 * t for p, t in phase_s.items()},
               "wall_time": s} for s in range(1, 5 * len(accs) - 4)]
    return evals + trains


def test_summarize_by_hand():
    grpo = dict(generate=1.0, reward=0.0, attribute=0.0, update=1.0)
    oar = dict(generate=1.0, reward=0.0, attribute=1.0, update=1.0)
    records = (_runs("uniform", 0, [0.2, 0.5, 0.7], grpo) + _runs("uniform", 1, [0.2, 0.4, 0.5], grpo)
               + _runs("oar-g", 0, [0.2, 0.6, 0.9], oar) + _runs("oar-g", 1, [0.3, 0.7, 0.6], oar))
    s = report.summarize(records, target=0.6)["methods"]
    u, g = s["uniform"], s["oar-g"]
    assert list(s) == ["uniform", "oar-g"]
    assert u["start_accuracy"] == pytest.approx(0.2) and g["start_accuracy"] == pytest.approx(0.25)
    assert g["final_accuracies"] == [0.9, 0.6] and g["final_accuracy"] == pytest.approx(0.75)
    assert g["final_accuracy_std"] == pytest.approx(0.15)  # population std of 0.9, 0.6
    assert g["best_accuracy"] == pytest.approx((0.9 + 0.7) / 2)
    assert g["curve_accuracies"] == pytest.approx([0.75, 0.65])  # mean after step 0
    assert u["steps_to_target"] == [10, 15] and u["target_reached"] == [True, False]  # censored: step 10 + 5
    assert g["steps_to_target"] == [5, 5] and g["reached"] == 2
    assert g["time_to_target"] == [10.0, 10.0]
    assert g["paired_diff_vs_grpo"] == pytest.approx([0.2, 0.1])
    assert g["paired_curve_diff_vs_grpo"] == pytest.approx([0.75 - 0.6, 0.65 - 0.45])
    assert g["time_per_step"] == pytest.approx(3.0) and g["step_cost_vs_grpo"] == pytest.approx(1.5)
    assert g["cpu_per_step"] == pytest.approx(6.0) and g["cpu_cost_vs_grpo"] == pytest.approx(1.5)
    assert g["attribution_overhead"] == pytest.approx(1.5)
    assert report.summarize(records, target=0.6, methods=["oar-g"])["methods"].keys() == {"oar-g"}


def test_markdown_table():
    assert report.markdown_table(["a", "b"], [[1, None], ["x", 2.5]]) == [
        "| a | b |", "|---|---|", "| 1 | - |", "| x | 2.5 |"]


def test_method_order_puts_grpo_first_unless_told():
    from oar_lite.lab.report import method_order
    assert method_order(None, {"oar-p": 1, "uniform": 2, "entropy": 3}) == ["uniform", "entropy", "oar-p"]
    assert method_order(["oar-p", "uniform"], ["uniform", "oar-p", "x"]) == ["oar-p", "uniform"]
