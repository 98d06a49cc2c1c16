"""`python -m oar_lite.lab compare` and `demo`: the files they write, and the summary they compute."""
import dataclasses
import json

import pytest
from conftest import load_script, old_flat_form

from oar_lite.attribution import CreditConfig
from oar_lite.lab import compare
from oar_lite.lab.__main__ import main
from oar_lite.checkpoint import read_jsonl
from oar_lite.lab.compare import load_records, render_markdown, summarize, toy_task, verdict
from oar_lite.train import TrainConfig


@pytest.mark.slow
def test_demo_at_tiny_size_writes_the_comparison(tmp_path, capsys):
    out = tmp_path / "results"
    assert main(["demo", "--tiny", "--jobs", "1", "--out", str(out), "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "| GRPO |" in printed and "| OAR-G |" in printed and "| OAR-P |" in printed
    results = printed.split("\nwrote ")[0]  # the last line names the output folder, as long as its path
    assert max(map(len, results.splitlines())) <= 80, results  # a terminal's width; compare.md has the full tables
    for name in ("compare.png", "compare.md", "compare.jsonl", "compare.json"):
        assert (out / name).stat().st_size > 0, name
    records = read_jsonl(out / "compare.jsonl")
    assert {r["method"] for r in records} == {"uniform", "oar-g", "oar-p"}
    for method in ("uniform", "oar-g", "oar-p"):
        evals = [r for r in records if r["method"] == method and r["type"] == "eval"]
        steps = [r for r in records if r["method"] == method and r["type"] == "train"]
        assert [r["step"] for r in evals] == [0, 1, 2] and [r["step"] for r in steps] == [1, 2]
        assert (out / "runs" / f"{method}-seed0" / "checkpoint.pt").exists()
    uniform = [r for r in records if r["method"] == "uniform" and r["type"] == "train"]
    assert all(r["weight_std"] in (0.0, None) for r in uniform)  # plain GRPO never reshapes
    assert (out / "compare.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = (out / "compare.md").read_text()
    assert "python -m oar_lite.lab demo --tiny" in md

    # Run again: finished runs are read back from their checkpoints, not trained again.
    before = {p: p.read_bytes() for p in (out / "runs").glob("*/checkpoint.pt")}
    assert main(["compare", "--tiny", "--jobs", "1", "--out", str(out), "--quiet"]) == 0
    assert {p: p.read_bytes() for p in before} == before
    assert load_records(out) == records
    assert "3 of 3 runs read back" in (out / "compare.md").read_text()


def test_compare_rejects_an_unknown_method(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:  # a usage error, listing the methods
        main(["compare", "--tiny", "--jobs", "1", "--out", str(tmp_path), "--quiet", "--methods", "uniform", "oar-z"])
    assert exit_info.value.code == 2
    assert "unknown method 'oar-z'; registered: [" in capsys.readouterr().err
    with pytest.raises(ValueError, match="unknown method"):
        compare.compare(["uniform", "oar-z"], out=tmp_path, profile="tiny", progress=False)


def _runs(method, seed, accuracies, step_time):
    evals = [{"type": "eval", "method": method, "seed": seed, "step": 5 * i, "eval_accuracy": a,
              "wall_time": 5 * i * step_time} for i, a in enumerate(accuracies)]
    trains = [{"type": "train", "method": method, "seed": seed, "step": s, "reward_mean": 0.5, "weight_std": 0.0,
               "time_generate": step_time / 2, "time_reward": 0.0, "time_attribute": 0.0,
               "time_update": step_time / 2, "wall_time": s * step_time} for s in range(1, 5 * len(accuracies) - 4)]
    return evals + trains


def test_summary_counts_steps_to_target_and_cost():
    records = (_runs("uniform", 0, [0.2, 0.4, 0.6, 0.7], 1.0) + _runs("uniform", 1, [0.2, 0.3, 0.5, 0.5], 1.0)
               + _runs("oar-g", 0, [0.2, 0.6, 0.7, 0.8], 1.5) + _runs("oar-g", 1, [0.2, 0.5, 0.65, 0.8], 1.5))
    summary = summarize(records, target=0.6)
    u, g = summary["methods"]["uniform"], summary["methods"]["oar-g"]
    # seed 1 of GRPO never reaches 0.6: censored at its last evaluation (step 15) + one interval
    assert u["steps_to_target"] == [10, 20] and u["target_reached"] == [True, False] and u["reached"] == 1
    assert u["time_to_target"] == [10.0, 15.0]  # censored at its last evaluation's wall time
    assert g["steps_to_target"] == [5, 10] and g["time_to_target"] == [7.5, 15.0] and g["target_reached"] == [True, True]
    assert u["final_accuracy"] == pytest.approx(0.6) and u["final_accuracy_std"] == pytest.approx(0.1)
    assert g["final_accuracy"] == pytest.approx(0.8) and g["final_accuracy_std"] == 0
    assert g["step_cost_vs_grpo"] == pytest.approx(1.5)
    md = render_markdown(summary)
    assert "| OAR-G | 0.200 | 0.800 ± 0.000 | 0.800-0.800 | +0.200 ± 0.100 | 0.675 (+0.175) |" in md
    assert "| >= 15.0 (1/2 reached) |" in md and "| 7.5 (2/2 reached) |" in md   # GRPO's mean counts the censored seed
    assert "steps to the target 7.5 (2/2 reached) against >= 15.0 (1/2 reached) for GRPO" in md
    assert "higher than GRPO" in md
    json.dumps(summary)  # plain values only


def test_verdict_needs_more_than_one_seed():
    records = _runs("uniform", 0, [0.2, 0.4], 1.0) + _runs("oar-g", 0, [0.2, 0.6], 1.0)
    (line,) = verdict(summarize(records, target=0.5))
    assert "one seed, too few to tell it from GRPO" in line and "higher" not in line


def test_verdict_reads_the_paired_interval_and_marks_a_screen():
    # Six seeds, one a little below GRPO: the paired interval over seeds lies above 0 (the old
    # rule, every seed agreeing and the gap above the spread, read "not distinguishable").
    grpo = [0.5, 0.4, 0.6, 0.5, 0.45, 0.55]
    gaps = [0.06, 0.05, 0.07, 0.05, 0.06, -0.01]
    records = []
    for s, (g, d) in enumerate(zip(grpo, gaps)):
        records += _runs("uniform", s, [0.2, g], 1.0) + _runs("oar-g", s, [0.2, g + d], 1.0)
    (line,) = verdict(summarize(records, target=0.9))
    assert "over 6 paired seeds: higher than GRPO)" in line and "screen" not in line
    (line,) = verdict(summarize([r for r in records if r["seed"] < 3], target=0.9))
    assert "over 3 paired seeds: higher than GRPO; a screen" in line
    noisy = []
    for s, (g, d) in enumerate(zip(grpo, [0.2, -0.15, 0.1, -0.2, 0.15, -0.1])):
        noisy += _runs("uniform", s, [0.2, g], 1.0) + _runs("oar-g", s, [0.2, g + d], 1.0)
    (line,) = verdict(summarize(noisy, target=0.9))
    assert "over 6 paired seeds: not distinguishable from GRPO)" in line
    lower = [{**r, "method": {"uniform": "oar-g", "oar-g": "uniform"}[r["method"]]} for r in records if r["seed"] < 5]
    (line,) = verdict(summarize(lower, target=0.9))
    assert "over 5 paired seeds: lower than GRPO)" in line


def test_toy_task_with_other_digits_keeps_held_out_problems_apart():
    from oar_lite.course import toy

    default = toy_task()
    shipped = {p["prompt"] for p in toy.load_eval_set()}
    assert {p["prompt"] for p in default.eval_problems} == shipped
    assert not shipped & {p["prompt"] for p in default.train_problems}

    task = toy_task(digits=4, eval_size=50)
    assert len(task.eval_problems) == 50
    assert {p["digits"] for p in task.train_problems} == {p["digits"] for p in task.eval_problems} == {4}
    evals = {p["prompt"] for p in toy_task(digits=4).eval_problems}
    assert len(evals) == 200 and not evals & shipped
    assert not evals & {p["prompt"] for p in task.train_problems}


def test_a_run_folder_refuses_other_digits(tmp_path):
    args = ["compare", "--tiny", "--jobs", "1", "--quiet", "--methods", "uniform", "--out", str(tmp_path)]
    assert main(args) == 0  # 2-4-digit problems
    with pytest.raises(ValueError, match=r"digits=\[2, 4\] \(now \[4, 4\]\)"):  # run.json knows the problems
        main(args + ["--digits", "4"])
    with pytest.raises(SystemExit) as exit_info:
        main(args + ["--digits", "2", "3", "4"])
    assert exit_info.value.code == 2


def test_save_figure_leaves_the_backend_and_pyplot_alone(tmp_path):
    """A notebook that saves compare.png must keep its inline backend and its open figures."""
    import matplotlib
    import matplotlib.pyplot as plt

    from oar_lite.lab.compare import save_figure

    records = _runs("uniform", 0, [0.2, 0.4], 1.0) + _runs("oar-g", 0, [0.2, 0.6], 1.0)
    before = matplotlib.get_backend()
    plt.switch_backend("svg")  # a backend other than Agg, as a notebook's inline one is
    try:
        figures = plt.get_fignums()
        save_figure(records, tmp_path / "c.png", target=0.5)
        assert (tmp_path / "c.png").read_bytes()[:4] == b"\x89PNG"
        assert matplotlib.get_backend() == "svg" and plt.get_fignums() == figures
    finally:
        plt.switch_backend(before)


# ----------------------------------------------------------------------------- reuse only what matches (issue 15)

TINY = ["compare", "--tiny", "--jobs", "1", "--quiet", "--methods", "uniform"]


@pytest.mark.parametrize("flags, repeated", [(["--methods", "uniform", "oar-g", "uniform"], "uniform"),
                                             (["--seeds", "0", "1", "0"], "0")])
def test_duplicate_methods_or_seeds_are_refused(tmp_path, flags, repeated):
    with pytest.raises(ValueError, match=rf"repeat \['?{repeated}'?\]"):
        main(["compare", "--tiny", "--jobs", "1", "--quiet", "--out", str(tmp_path), *flags])
    assert not (tmp_path / "runs").exists()  # refused before anything was written


def test_a_run_is_reused_only_when_all_settings_match(tmp_path):
    import shutil

    from oar_lite.course import toy

    out = tmp_path / "results"
    run = out / "runs" / "uniform-seed0"
    assert main(TINY + ["--out", str(out)]) == 0
    saved = json.loads((run / "run.json").read_text())
    assert saved["config"]["steps"] == 2 and saved["config"]["learning_rate"] == 1e-4 and saved["model"]
    checkpoint = (run / "checkpoint.pt").read_bytes()

    with pytest.raises(ValueError, match=r"steps=2 \(now 1\)"):  # a finished run is never cut short
        main(TINY + ["--out", str(out), "--steps", "1"])
    with pytest.raises(ValueError, match=r"learning_rate=0.0001 \(now 0.001\)"):
        main(TINY + ["--out", str(out), "--lr", "1e-3"])
    with pytest.raises(ValueError, match=r"eval_size=8 \(now 4\)"):  # a finished run keeps its evaluations
        main(TINY + ["--out", str(out), "--eval-size", "4"])
    other_model = tmp_path / "other-model"
    shutil.copytree(toy.MODEL_DIR, other_model)
    config = json.loads((other_model / "config.json").read_text())
    config["rms_norm_eps"] = config.get("rms_norm_eps", 1e-6) * 2  # another model
    (other_model / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match=r"model="):
        main(TINY + ["--out", str(out), "--model", str(other_model)])
    assert (run / "checkpoint.pt").read_bytes() == checkpoint  # nothing was touched

    same_model = tmp_path / "same-model"
    shutil.copytree(toy.MODEL_DIR, same_model)  # the same files elsewhere: the same model
    assert main(TINY + ["--out", str(out), "--model", str(same_model)]) == 0
    assert (run / "checkpoint.pt").read_bytes() == checkpoint  # read back, not trained again
    assert main(TINY + ["--out", str(out), "--steps", "3", "--eval-size", "4"]) == 0  # more steps: continues
    records = read_jsonl(run / "metrics.jsonl")
    assert [r["step"] for r in records if r["type"] == "train"] == [1, 2, 3]
    assert [r["eval_n"] for r in records if r["type"] == "eval"] == [8, 8, 8, 4]


def test_a_run_folder_without_its_settings_is_refused(tmp_path):
    run = tmp_path / "runs" / "uniform-seed0"
    run.mkdir(parents=True)
    (run / "metrics.jsonl").write_text('{"type": "train", "step": 1}\n')
    with pytest.raises(ValueError, match="run.json"):
        main(TINY + ["--out", str(tmp_path)])


def test_profiles_are_train_config_presets():
    for name, profile in compare.PROFILES.items():
        assert isinstance(profile.config, TrainConfig) and profile.seeds and 0 < profile.target <= 1, name
    credit = compare.PROFILES["credit"]
    run = compare.run_config("oar-p:answer_mean", 3, compare.PROFILES["tiny"].config)
    assert (run.credit.method, run.seed, run.steps) == ("oar-p:answer_mean", 3, compare.PROFILES["tiny"].config.steps)
    # The credit regime's boost goes to the methods that reshape, not to plain GRPO, which takes none.
    assert compare.run_config("oracle", 0, credit.config, credit.credit).credit.boost == 9.0
    assert compare.run_config("uniform", 0, credit.config, credit.credit).credit == CreditConfig("uniform")
    assert run.credit.batch_size == 64  # OAR-P's batch size (CreditConfig's, the one default)


def test_compare_refuses_an_unknown_override_before_writing(tmp_path):
    with pytest.raises(ValueError, match=r"unknown TrainConfig setting\(s\) \['prompts'\]"):
        compare.compare(["uniform"], profile="tiny", out=tmp_path / "out", overrides={"prompts": 4}, progress=False)
    with pytest.raises(ValueError, match=r"CreditConfig\.boost=-1"):
        compare.compare(["oar-g"], profile="tiny", out=tmp_path / "out", overrides={"boost": -1}, progress=False)
    with pytest.raises(ValueError, match=r"\['boost'\] are taken by none of the methods \['uniform'\]"):
        compare.compare(["uniform"], profile="tiny", out=tmp_path / "out", overrides={"boost": 2}, progress=False)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("form", ["old flat", "nested"])
def test_a_run_recorded_in_either_form_is_reused(tmp_path, form):
    from oar_lite.lab.__main__ import main

    tiny = ["compare", "--tiny", "--jobs", "1", "--quiet", "--methods", "uniform", "--out", str(tmp_path)]
    assert main(tiny) == 0
    run = tmp_path / "runs" / "uniform-seed0"
    saved = json.loads((run / "run.json").read_text())
    assert saved["config"]["credit"]["method"] == "uniform" and saved["config"]["credit"]["boost"] == 1.0  # nested
    config = TrainConfig(**saved["config"])
    if form == "old flat":
        saved["config"] = old_flat_form(config)
        del saved["config"]["attribution_token_budget"]
        saved["config"]["attribution_batch_size"] = 64  # older files give every method OAR-P's batch size
    else:
        saved["config"] = dataclasses.asdict(config)
        saved["config"]["credit"]["batch_size"] = 64
    (run / "run.json").write_text(json.dumps(saved))
    if form == "old flat":  # refused, naming the script that migrates it (issue 47 item 6)
        with pytest.raises(ValueError, match="scripts/migrate_logs.py"):
            main(tiny)
        assert load_script("migrate_logs").main([str(tmp_path)]) == 0
        saved = json.loads((run / "run.json").read_text())
    checkpoint = (run / "checkpoint.pt").read_bytes()
    assert main(tiny) == 0
    assert (run / "checkpoint.pt").read_bytes() == checkpoint  # read back, not trained again
    (run / "run.json").write_text(json.dumps(saved))
    with pytest.raises(ValueError, match=r"learning_rate=0.0001 \(now 0.001\)"):
        main(tiny + ["--learning-rate", "0.001"])


def test_for_methods_passes_shared_settings_to_the_methods_that_take_them():
    """A command line's credit settings, shared by several methods (`compare.for_methods`)."""
    from oar_lite.attribution import CreditConfig

    credit = compare.for_methods(["uniform", "oar-g", "oar-p"], {"boost": 2.0, "batch_size": 8})
    assert credit["uniform"] == CreditConfig(method="uniform")
    assert (credit["oar-g"].boost, credit["oar-g"].batch_size) == (2.0, CreditConfig().batch_size)  # not OAR-G's
    assert (credit["oar-p"].boost, credit["oar-p"].batch_size) == (2.0, 8)
    with pytest.raises(ValueError, match=r"\['noise_std'\] are taken by none of the methods \['uniform', 'oar-p'\]; "
                                         r"they take uniform: no settings \(plain GRPO\); oar-p: \['batch_size'"):
        compare.for_methods(["uniform", "oar-p"], {"noise_std": 0.5})
    with pytest.raises(ValueError, match=r"unknown credit setting\(s\) \['boots'\]"):
        compare.for_method("oar-p", {"boots": 2.0})
