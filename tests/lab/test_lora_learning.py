"""oar_lite.lab.lora_learning: held-out gains with intervals over seeds and problems, curves and
step costs, on small synthetic logs with known answers."""
import math

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


def test_the_curves_legend_gives_each_methods_number_of_seeds():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    log = _log()
    log["runs"].append(_run("uniform", 3, {0: [0, 0, 1, 0], 4: [1, 1, 1, 0]}))  # GRPO on 3 seeds, OAR-G on 2
    fig, axes = plt.subplots(1, 2)
    ll.plot_curves(axes, log, panels=(("heldout:greedy", "greedy"), ("reward", "reward")))
    assert [t.get_text() for t in axes[0].get_legend().get_texts()] == ["GRPO (3 seeds)", "OAR-G (2 seeds)"]
    plt.close(fig)


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


# ----------------------------------------------------------------------------- problems no run trained on (issue 38)

def test_heldout_change_on_some_problems_only():
    log = _log()
    assert ll.heldout_change(log, "uniform", problems=[0, 1])["mean"] == pytest.approx(0.5)
    kept = ll.heldout_change(log, "uniform", problems=[2, 3])
    assert kept["mean"] == 0 and kept["problems"] == 2 and kept["start_accuracy"] == 0.5
    assert ll.heldout_change(log, "oar-g", against="uniform", problems=[0, 1])["mean"] == pytest.approx(0.25)
    for bad in ([0], [0, 4], [1, 1]):
        with pytest.raises(ValueError, match=r"problems must be >= 2 distinct indices in \[0, 4\)"):
            ll.heldout_change(log, "uniform", problems=bad)


def test_crossed_bootstrap_of_a_mean_is_crossed_bootstrap():
    import numpy as np

    from oar_lite.lab.stats import crossed_bootstrap, crossed_bootstrap_of

    values = np.random.default_rng(3).random((3, 20))
    assert crossed_bootstrap_of(lambda v: v.mean(), values) == [crossed_bootstrap(values)]
    (low, high), (low2, high2) = crossed_bootstrap_of(lambda a, b: [a.mean(), a.sum() / b.sum()], values, values + 1)
    assert low < high and low2 < high2 < 1
    with pytest.raises(ValueError, match="share one"):
        crossed_bootstrap_of(lambda a, b: 0.0, values, values[:, :5])


def _answered_run(method, seed, by_step):
    """A run measured at T = 1 only: ``{step: (correct, answered)}`` per problem."""
    heldout = [{"step": s, "decoding": "t1", "correct": [[c] for c in cs], "answered": [[a] for a in ans]}
               for s, (cs, ans) in by_step.items()]
    return {"name": f"{method}-{seed}", "method": method, "seed": seed, "heldout": heldout, "log": []}


def test_format_decomposition_splits_the_gain_into_format_and_accuracy_given_format():
    start = ([1, 0, 0, 0], [1, 1, 0, 0])  # format 1/2, right on 1 of the 2 answers stated
    log = {"name": "t", "runs": [
        _answered_run("uniform", 1, {0: start, 4: ([1, 1, 0, 0], [1, 1, 1, 1])}),
        _answered_run("uniform", 2, {0: start, 4: ([1, 0, 1, 0], [1, 1, 1, 0])})]}
    d = ll.format_decomposition(log, "uniform")
    f0, f1, a0, a1 = 1 / 2, 7 / 8, 1 / 2, 4 / 7  # end: 7 answers stated of 8, 4 of them right
    assert d["accuracy"]["start"] == 0.25 and d["accuracy"]["change"] == pytest.approx(0.25)
    assert (d["format"]["start"], d["format"]["end"]) == (f0, f1) and d["format"]["change"] == pytest.approx(f1 - f0)
    assert (d["given_format"]["start"], d["given_format"]["end"]) == pytest.approx((a0, a1))
    assert d["from_format"]["mean"] == pytest.approx((f1 - f0) * (a0 + a1) / 2)
    assert d["from_accuracy"]["mean"] == pytest.approx((a1 - a0) * (f0 + f1) / 2)
    assert d["from_format"]["mean"] + d["from_accuracy"]["mean"] == pytest.approx(d["accuracy"]["change"])
    assert d["seeds"] == [1, 2] and d["problems"] == 4 and d["end"] == 4
    for k in ("accuracy", "format", "given_format", "from_format", "from_accuracy"):
        assert d[k]["low"] <= d[k]["high"]
    some = ll.format_decomposition(log, "uniform", problems=[1, 2])  # format 1/2 -> 1, accuracy given format 0 -> 1/2
    assert (some["from_format"]["mean"], some["from_accuracy"]["mean"]) == pytest.approx((0.5 * 0.25, 0.5 * 0.75))
    none_stated = ll.format_decomposition(log, "uniform", problems=[2, 3])  # no answer stated at step 0
    assert math.isnan(none_stated["given_format"]["start"]) and math.isnan(none_stated["from_format"]["low"])
    assert none_stated["format"]["change"] == pytest.approx(0.75)

    wrong = {"name": "w", "runs": [_answered_run("uniform", 1, {0: start, 4: ([1, 1, 0, 0], [1, 0, 0, 0])})]}
    with pytest.raises(ValueError, match="counted correct but not stated"):
        ll.format_decomposition(wrong, "uniform")
    with pytest.raises(ValueError, match="has no 'answered'"):
        ll.format_decomposition({"runs": [_run("uniform", 1, {0: [0, 1], 4: [1, 1]})]}, "uniform", decoding="greedy")


def test_clean_heldout_of_the_shipped_runs():
    """The shipped runs were split by question text: 66 of the 96 held-out problems have a twin in
    the pool; the prompts the runs drew (rebuilt from their seeds) hold twins of some of them."""
    from oar_lite.course.problems import numbers_key

    log = ll.load_log()
    strict, drawn = ll.clean_heldout(log, "pool"), ll.clean_heldout(log)
    assert strict["heldout"] == 96 and strict["twins_in_pool"] == 66 and len(strict["problems"]) == 30
    assert set(strict["problems"]) < set(drawn["problems"]) and drawn["reading"] == "trained"
    assert len(drawn["problems"]) == 96 - drawn["twins_trained"] and 0 < drawn["twins_trained"] < 66
    pool, held = ll.run_split(log["runs"][0])
    trained = {numbers_key(pool[i]) for r in log["runs"] for i in ll.trained_indices(r)}
    assert len(ll.trained_indices(log["runs"][0])) == 4 * 12  # 4 prompts a step, 12 steps
    assert all((numbers_key(p) in trained) == (i not in drawn["problems"]) for i, p in enumerate(held))
    with pytest.raises(ValueError, match="reading must be one of"):
        ll.clean_heldout(log, "all")
    other = {**log, "runs": [log["runs"][0], {**log["runs"][1], "settings": {
        **log["runs"][1]["settings"], "split": {**log["runs"][1]["settings"]["split"], "by": "numbers"}}}]}
    with pytest.raises(ValueError, match="split 2 ways"):
        ll.clean_heldout(other)


def test_trained_indices_are_the_prompts_trl_draws(tmp_path):
    """A real `OARGRPOTrainer` with a shipped run's settings (the toy model in SmolLM2's place, a
    dataset as long as the run's pool) generates for exactly the prompts `trained_indices` rebuilds
    from the run's seed, in order, and a run resumed from a checkpoint goes on with the same ones."""
    from datasets import Dataset

    from oar_lite.course import toy
    from oar_lite.lab.recipes import recipe_config
    from oar_lite.trl import OARGRPOTrainer

    run = next(r for r in ll.load_log()["runs"] if r["method"] == "uniform" and r["seed"] == 2)
    s = run["settings"]
    pool, _ = ll.run_split(run)
    rows = [{"prompt": f"{10 + i % 90}+{10 + i // 90 % 90}:", "answer": "0", "idx": i} for i in range(len(pool))]
    drawn = []

    def reward(completions, idx, **kwargs):
        drawn.append(list(idx[:: s["group_size"]]))
        return [0.0] * len(completions)

    def train(steps, resume=False):
        args = recipe_config("laptop", str(tmp_path), steps=steps, oar_method="uniform", answer_formats=list(toy.FORMATS),
                             seed=run["seed"], device="cpu", learning_rate=s["learning_rate"], prompts_per_step=s["prompts"],
                             num_generations=s["group_size"], micro_batch=s["micro_batch"], max_completion_length=4,
                             gradient_checkpointing=False, bf16=False, save_steps=2, disable_tqdm=True,
                             dataloader_num_workers=0)
        model, tokenizer = toy.load_model()
        trainer = OARGRPOTrainer(model=model, reward_funcs=reward, args=args, train_dataset=Dataset.from_list(rows),
                                 processing_class=tokenizer)
        assert {k: args.to_dict()[k] for k in ("steps_per_generation", "generation_batch_size", "num_iterations")} == {
            k: run["trl_config"][k] for k in ("steps_per_generation", "generation_batch_size", "num_iterations")}
        trainer.train(resume_from_checkpoint=True if resume else None)

    train(2)
    assert [i for step in drawn for i in step] == ll.trained_indices(run, steps=2)
    drawn.clear()
    train(4, resume=True)  # steps 3 and 4, from the step-2 checkpoint
    assert [i for step in drawn for i in step] == ll.trained_indices(run, steps=4)[2 * s["prompts"]:]


def test_the_shipped_log_names_plain_grpo_uniform_and_is_read_as_written():
    """Issue 47 item 6: scripts/migrate_logs.py rewrote the shipped log once; no old name is read
    under a new one any more."""
    import json

    raw = json.loads((ll.LOG_DIR / "main.json").read_text())
    log = ll.load_log("main")
    assert log == raw and {r["method"] for r in log["runs"]} == {"uniform", "oar-g", "oar-p"}
    assert all(r["settings"]["method"] == r["method"] and not r["name"].startswith("none-") for r in log["runs"])
    assert len(ll.runs_of(log, "uniform")) == 3
    with pytest.raises(ValueError, match=r"no run of method 'none'"):
        ll.runs_of(log, "none")
