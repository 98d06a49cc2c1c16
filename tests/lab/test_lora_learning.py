"""oar_lite.lab.lora_learning: held-out gains with intervals over seeds and problems, curves and
step costs, on small synthetic logs with known answers."""
import pytest

from oar_lite.lab import lora_learning as ll


def _run(method, seed, correct_by_step, cpu=None):
    heldout = [{"step": s, "decoding": "greedy", "correct": [[c] for c in cs], "cpu_seconds": 10.0}
               for s, cs in correct_by_step.items()]
    steps = max(correct_by_step)
    cpu = cpu or [100.0 * k + (10.0 if k in correct_by_step else 0) for k in range(1, steps + 1)]
    log = [{"step": k, "reward": 0.1 * k, "cpu_time": c} for k, c in zip(range(1, steps + 1), cpu)]
    return {"name": f"{method}-{seed}", "method": method, "seed": seed, "heldout": heldout, "log": log}


def _log():
    base = [0, 0, 1, 0]
    return {"name": "t", "runs": [
        _run("uniform", 1, {0: base, 4: [1, 0, 1, 0]}),
        _run("uniform", 2, {0: base, 4: [0, 1, 1, 0]}),
        _run("oar-g", 1, {0: base, 4: [1, 1, 1, 0]}),
        _run("oar-g", 2, {0: base, 4: [1, 0, 1, 0]})]}


def test_heldout_change_and_its_paired_difference():
    log = _log()
    grpo = ll.heldout_change(log, "uniform")
    assert grpo["mean"] == pytest.approx(0.25) and grpo["end"] == 4 and grpo["seeds"] == [1, 2]
    assert grpo["start_accuracy"] == 0.25 and grpo["end_accuracy"] == 0.5
    assert grpo["low"] <= 0.25 <= grpo["high"] and grpo["low"] >= 0
    paired = ll.heldout_change(log, "oar-g", against="uniform")
    assert paired["mean"] == pytest.approx(0.125)  # (2 + 1) / 8 gained against (1 + 1) / 8
    assert "+0.125" in ll.describe(paired)


def test_curves_and_missing_things_say_what_is_there():
    log = _log()
    curve = ll.heldout_curve(log, "uniform")
    assert curve["steps"] == [0, 4] and curve["mean"] == pytest.approx([0.25, 0.5])
    reward = ll.metric_curve(log, "oar-g", "reward")
    assert reward["steps"] == [1, 2, 3, 4] and reward["mean"] == pytest.approx([0.1, 0.2, 0.3, 0.4])
    with pytest.raises(ValueError, match="no run of method 'oar-p'"):
        ll.heldout_curve(log, "oar-p")
    with pytest.raises(ValueError, match=r"at step 7; it has \[0, 4\]"):
        ll.per_problem(log["runs"][0], 7)


def test_step_cost_leaves_out_measured_steps_and_resumes():
    run = _run("uniform", 1, {0: [0, 1], 4: [1, 1]}, cpu=[110.0, 210.0, 20.0, 140.0])  # resumed before step 3
    assert ll.step_cpu_seconds(run) == [100.0]  # step 2 only: step 3 restarted, step 4 held a measurement
    slow = _run("oar-g", 1, {0: [0, 1], 4: [1, 1]}, cpu=[130.0, 280.0, 430.0, 590.0])
    log = {"runs": [run, slow]}
    assert ll.cost_ratio(log, "oar-g")["per_seed"] == {1: pytest.approx(150.0 / 100.0)}
    assert ll.cost_ratio(log, "oar-g")["clock"] == "cpu"


def test_step_cost_falls_back_to_trls_wall_clock_and_refuses_mixed_clocks():
    wall = {"name": "w", "method": "uniform", "seed": 1, "heldout": [{"step": 2}],
            "log": [{"step": 1, "step_time": 10.0}, {"step": 2, "step_time": 99.0}, {"step": 3, "step_time": 12.0}]}
    assert ll.step_seconds(wall) == ([10.0, 12.0], "wall")  # step 2 held a measurement
    slow = {**wall, "method": "oar-g", "log": [{"step": 1, "step_time": 13.0}, {"step": 3, "step_time": 15.0}]}
    assert ll.cost_ratio({"runs": [wall, slow]}, "oar-g") == {"mean": pytest.approx(14 / 11), "per_seed": {1: pytest.approx(14 / 11)}, "clock": "wall"}
    cpu = _run("oar-g", 1, {0: [0, 1], 4: [1, 1]}, cpu=[130.0, 280.0, 430.0, 590.0])
    with pytest.raises(ValueError, match="different clocks"):
        ll.cost_ratio({"runs": [wall, cpu]}, "oar-g")
    with pytest.raises(ValueError, match="neither cpu_time nor step_time"):
        ll.step_seconds({**wall, "log": [{"step": 1}]})


def test_step_cost_reads_only_the_pairs_that_ran_side_by_side():
    def wall(method, seed, seconds):
        return {"name": f"{method}{seed}", "method": method, "seed": seed, "heldout": [],
                "log": [{"step": 1, "step_time": seconds}]}

    runs = [wall("uniform", 0, 10.0), wall("oar-g", 0, 30.0), wall("uniform", 1, 10.0), wall("oar-g", 1, 11.0)]
    assert ll.cost_ratio({"runs": runs}, "oar-g")["per_seed"] == {0: 3.0, 1: pytest.approx(1.1)}
    assert ll.cost_ratio({"runs": runs, "cost_seeds": [1]}, "oar-g")["per_seed"] == {1: pytest.approx(1.1)}
    assert ll.cost_ratio({"runs": runs, "cost_seeds": [1]}, "oar-g", seeds=[0])["per_seed"] == {0: 3.0}
    with pytest.raises(ValueError, match=r"no seed has both a oar-g and a uniform run to time among \[5\]"):
        ll.cost_ratio({"runs": runs}, "oar-g", seeds=[5])
    with pytest.raises(ValueError, match=r"seeds \[5\] were asked for but have no oar-g and uniform pair"):
        ll.cost_ratio({"runs": runs, "cost_seeds": [1, 5]}, "oar-g")


def test_the_shipped_logs_old_name_of_plain_grpo_is_read_as_uniform():
    import json

    raw = json.loads((ll.LOG_DIR / "main.json").read_text())
    assert "none" in {r["method"] for r in raw["runs"]}  # the file stays as it was written
    log = ll.load_log("main")
    assert {r["method"] for r in log["runs"]} == ({r["method"] for r in raw["runs"]} - {"none"}) | {"uniform"}
    assert [r["seed"] for r in ll.runs_of(log, "uniform")] == sorted(r["seed"] for r in raw["runs"] if r["method"] == "none")
