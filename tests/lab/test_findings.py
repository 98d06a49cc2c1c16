"""oar_lite.lab.findings: the series' conclusions are written from the shipped data, the README's
"What we measured" block is that text, and the prose follows the numbers when they change."""
import copy
from pathlib import Path

import pytest

from oar_lite.lab import findings, lora_learning

ROOT = Path(__file__).resolve().parents[2]


def test_readme_block_is_what_the_shipped_data_says():
    assert findings.check_readme(ROOT / "README.md") is None, findings.check_readme(ROOT / "README.md")


def test_credit_conclusion_states_the_shipped_numbers():
    f = findings.credit_findings()
    text = findings.credit_conclusion(f)
    c = f["confirm"]
    assert f"{c['speedup']:.2f}x" in text and f"{c['accuracy_diff']:+.3f}" in text
    assert f"{f['auc']['entropy']['mean']:.2f}" in text and f"{f['auc']['oar-p:last']['mean']:.2f}" in text
    assert ("none met the project's bar" in text) == (not f["regimes_paid"])
    assert 0 <= f["noise_share_toy"][0] <= f["noise_share_toy"][1] <= 1


def test_credit_conclusion_follows_the_numbers():
    f = copy.deepcopy(findings.credit_findings())
    f["regimes_paid"] = ["a regime"]
    f["controls"]["inverted:oracle"]["diff_ci"] = [-0.05, 0.01]
    f["auc"]["oar-p:last"] = {"mean": 0.62, "ci95": 0.05, "n": 15}
    text = findings.credit_conclusion(f)
    assert "1 met the project's bar (a regime)" in text
    assert "an interval that includes 0" in text  # a control that did not hurt is not reported as hurting
    assert "ranks the pivotal tokens near chance (AUC 0.62" in text


def _run(method, seed, before, after, cpu):
    heldout = [{"step": s, "decoding": d, "correct": [[c] for c in cs]}
               for s, cs in ((0, before), (4, after)) for d in ("greedy", "t1")]
    log = [{"step": k, "reward": 0.1, "cpu_time": cpu * k, "oar/effective_share": 0.9, "oar/frac_at_floor": 0.02,
            "oar/tau_mean": 0.1} for k in range(1, 5)]
    return {"name": f"{method}-{seed}", "method": method, "seed": seed, "heldout": heldout, "log": log,
            "settings": {"steps": 4}}


def test_learning_conclusion_on_a_log_with_known_answers():
    base = [0] * 8
    log = {"name": "t", "screened_seeds": [0], "runs": [
        _run("uniform", 0, base, [1, 1, 1, 1, 0, 0, 0, 0], 100.0), _run("uniform", 1, base, [1, 1, 1, 0, 0, 0, 0, 0], 100.0),
        _run("uniform", 2, base, [1, 1, 1, 1, 0, 0, 0, 0], 100.0),
        _run("oar-g", 0, base, [1, 1, 1, 1, 0, 0, 0, 0], 120.0), _run("oar-g", 1, base, [1, 1, 1, 0, 0, 0, 0, 0], 120.0),
        _run("oar-g", 2, base, [1, 1, 1, 1, 0, 0, 0, 0], 120.0)]}
    f = findings.learning_findings(log)
    assert f["grpo"]["greedy"]["mean"] == pytest.approx(11 / 24) and f["grpo"]["greedy"]["low"] > 0
    assert f["grpo_unscreened"]["greedy"]["seeds"] == [1, 2] and f["grpo_unscreened"]["t1"]["seeds"] == [1, 2]
    assert f["methods"]["oar-g"]["paired"]["greedy"]["mean"] == pytest.approx(0.0)
    assert f["methods"]["oar-g"]["cost"] == pytest.approx(1.2)
    text = findings.learning_conclusion(f)
    assert "measurably learned" in text and "cannot be told apart" in text and "1.20x" in text

    # A method whose runs never ran beside GRPO's: no ratio is read from their step times, and the text says so.
    untimed = {**log, "untimed": ["oar-p"], "runs": log["runs"] + [_run("oar-p", s, base, [1, 1, 0, 0, 0, 0, 0, 0], 500.0)
                                                                     for s in (1, 2)]}
    f = findings.learning_findings(untimed)
    assert f["methods"]["oar-p"]["cost"] is None and f["methods"]["oar-g"]["cost"] == pytest.approx(1.2)
    assert f["methods"]["oar-p"]["paired"]["greedy"]["seeds"] == [1, 2]
    text = findings.learning_conclusion(f)
    assert "5.00x" not in text and "not read from these runs" in text and "1.20x" in text
    assert lora_learning.cost_ratio(untimed, "oar-p") is None and lora_learning.cost_ratio(untimed, "oar-g") is not None
    assert "its step cost: benchmarks/RESULTS.md" in findings.readme_summary(learning=f)


def test_the_shipped_learning_log_reads_through():
    f = findings.learning_findings(lora_learning.load_log())
    text = findings.learning_conclusion(f)
    assert f"{f['grpo']['greedy']['mean']:+.3f}" in text and f["methods"], text
    # Issue 36: the pre-registered primary outcome (greedy) first, then T = 1 and its decomposition.
    assert text.index("primary outcome, held-out greedy accuracy") < text.index("secondary outcome") < text.index(
        "from stating an answer more often")
    x = f["decomposition"]["uniform"]
    assert x["from_format"]["mean"] + x["from_accuracy"]["mean"] == pytest.approx(f["grpo"]["t1"]["mean"])
    # Issue 38: the shipped runs' held-out problems, read apart by their numbers.
    c = f["clean"]
    assert (c["heldout"], c["twins_in_pool"], len(c["strict"]["problems"])) == (96, 66, 30)
    assert len(c["problems"]) == 96 - c["twins_trained"] and c["grpo"]["t1"]["problems"] == len(c["problems"])
    assert f"On the {len(c['problems'])} held-out problems whose numbers no run trained on" in text
    assert f"{c['grpo']['t1']['mean']:+.3f}" in text and "by=\"numbers\"" in text


def test_learning_conclusion_says_when_the_clean_gains_change():
    f = copy.deepcopy(findings.learning_findings(lora_learning.load_log()))
    full, clean = f["grpo"]["t1"], f["clean"]["grpo"]["t1"]
    assert full["low"] > 0 and clean["low"] > 0  # the shipped runs: same side of 0, a smaller gain
    assert "**The gains change in size, not in sign:**" in findings.learning_conclusion(f)
    clean.update(low=-0.01)
    assert ("**The gains change:** GRPO's gain at T = 1 is above 0 on all problems but an interval that includes 0 "
            "on these") in findings.learning_conclusion(f)
    clean.update(low=full["low"], mean=full["mean"])
    f["clean"]["grpo"]["greedy"]["mean"] = f["grpo"]["greedy"]["mean"]
    assert "The gains do not change" in findings.learning_conclusion(f)


def _stated_run(method, seed, start, end):
    """A run measured at steps 0 and 4, greedy and T = 1 alike: ``(correct, answered)`` per problem."""
    heldout = [{"step": s, "decoding": d, "correct": [[c] for c in cs], "answered": [[a] for a in ans]}
               for s, (cs, ans) in ((0, start), (4, end)) for d in ("greedy", "t1")]
    return {"name": f"{method}-{seed}", "method": method, "seed": seed, "heldout": heldout, "settings": {"steps": 4},
            "log": [{"step": k, "reward": 0.1, "cpu_time": 100.0 * k} for k in range(1, 5)]}


def test_learning_conclusion_decomposes_the_sampled_gain():
    """Two seeds of GRPO that learn only to state an answer: 8 problems, 4 answers stated and 2 of
    them right at step 0; every answer stated and 4 right at the end. The format rate doubles, the
    accuracy given format stays 1/2: the whole gain is the format's."""
    start = ([1, 1, 0, 0, 0, 0, 0, 0], [1, 1, 1, 1, 0, 0, 0, 0])
    end = ([1, 1, 0, 0, 1, 1, 0, 0], [1] * 8)
    log = {"name": "t", "runs": [_stated_run("uniform", s, start, end) for s in (1, 2)]}
    f = findings.learning_findings(log)
    x = f["decomposition"]["uniform"]
    assert (x["format"]["start"], x["format"]["end"], x["given_format"]["change"]) == (0.5, 1.0, 0.0)
    assert x["from_format"]["mean"] == pytest.approx(0.25) and x["from_accuracy"]["mean"] == pytest.approx(0.0)
    assert "clean" not in f  # a log without the split settings: no problems to rebuild
    text = findings.learning_conclusion(f)
    assert "from 0.500 to 1.000" in text and "+0.250 (95% interval" in text
    assert "Only the format part lies above 0 here" in text
    tables = findings.learning_tables(f)
    assert "| GRPO | all | 8 | +0.250" in tables and "held-out problems" not in tables  # no clean table


def test_results_md_holds_the_current_learning_tables():
    results = (ROOT / "benchmarks" / "RESULTS.md").read_text()
    assert findings.learning_tables() in results, "rerun: python -m oar_lite.lab.findings --learning-tables"


# ----------------------------------------------------------------------------- the positive control

def _entry(steps: dict, area: dict, seeds=(0, 1, 2, 3, 4)):
    """A credit_regime entry with given mean steps / CIs and mean-accuracy differences per method."""
    g = steps["uniform"]
    table = {"target": 0.75, "seeds": list(seeds), "methods": {
        m: {"mean": s, "ci": [s - w, s + w], "speedup": g[0] / s, "speedup_ci": [g[0] / s - 0.2, g[0] / s + 0.2],
            "recovered": None, "recovered_ci": None} for m, (s, w) in steps.items()}}
    return {"table": table, "area": {"methods": {
        m: {"diff": d, "diff_ci": [d - 0.01, d + 0.01], "recovered": None, "recovered_ci": None} for m, d in area.items()}}}


def _share(share):
    return {"components": {"shares": {"irrelevant": share}, "shares_ci": {"irrelevant": [share - 0.05, share + 0.05]}}}


R = findings.RELEVANT
CONTROLS = {"inverted:" + R: -0.03, "shuffled:" + R: 0.0}


def _sweep_data(oracle_steps: dict, diffs: dict, shares: dict):
    control = {findings.screen_name(k): _entry({"uniform": (28.0, 1.0), R: (s, 1.0), "inverted:" + R: (30.0, 1.0),
                                                "shuffled:" + R: (28.0, 1.0)}, {"uniform": 0.0, R: diffs[k], **CONTROLS})
               for k, s in oracle_steps.items()}
    return control, {findings.share_name(k): _share(v) for k, v in shares.items()}


def test_follow_up_rule_picks_the_largest_qualifying_speedup():
    control, shares = _sweep_data({0: 27.0, 16: 14.0, 32: 17.0, 64: 12.0}, {0: 0.01, 16: 0.05, 32: 0.04, 64: -0.01},
                                  {0: 0.1, 16: 0.3, 32: 0.5, 64: 0.7})
    f = findings.positive_findings(control, shares)
    assert [r["k"] for r in f["sweep"]] == [0, 16, 32, 64]
    # k=64 is fastest but its mean accuracy fell: it does not qualify; k=16 beats k=32.
    assert [r["qualifies"] for r in f["sweep"]] == [False, True, True, False]
    assert f["pick"]["k"] == 16 and "met the bar" in f["pick"]["reason"]
    assert f["spearman"] == pytest.approx(0.8)  # speed-ups 1.04, 2.0, 1.65, 2.33 against increasing shares
    text = findings.positive_conclusion(f)
    assert "The screen met the bar at k = 16, 32" in text and "+0.80" in text and "(the pre-registered claim needs >= 0.8: met)" in text


def test_follow_up_rule_falls_back_to_the_largest_share():
    control, shares = _sweep_data({0: 28.0, 64: 27.5}, {0: 0.0, 64: 0.004}, {0: 0.19, 64: 0.62})
    f = findings.positive_findings(control, shares)
    assert f["pick"] == {"k": 64, "reason": "no screen met the bar; it has the largest share (62%)"}
    assert f["confirm"] is None
    assert "No world's screen met the bar" in findings.positive_conclusion(f)
    # The confirmatory entry of the picked world is read; an oracle without a gain leaves nothing to recover.
    control[findings.confirm_name(64)] = _entry(
        {"uniform": (28.0, 1.0), R: (27.0, 1.0), "inverted:" + R: (30.0, 1.0), "oar-p:last": (28.0, 1.0)},
        {"uniform": 0.0, R: 0.002, "inverted:" + R: -0.03, "oar-p:last": 0.001}, seeds=range(5, 15))
    f = findings.positive_findings(control, shares)
    text = findings.positive_conclusion(f)
    assert f["confirm"]["seeds"] == list(range(5, 15)) and not f["confirm"]["pays"]
    assert "seeds 5-14" in text and "Claim 1" in text and "not met" in text
    assert "claim 2 (an interval below 0): met" in text
    assert "no gain for OAR to recover" in text


def test_positive_findings_without_runs():
    assert findings.positive_findings({}, {}) is None
    with pytest.raises(ValueError, match="no screened world"):
        findings.confirmatory_world([])


def test_positive_table_and_plot_read_the_sweep():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from oar_lite.lab import plots

    control, shares = _sweep_data({0: 28.0, 64: 14.0}, {0: 0.0, 64: 0.05}, {0: 0.19, 64: 0.62})
    sweep = findings.positive_sweep(control, shares)
    table = findings.positive_table(sweep)
    assert table.count("\n") == 3  # header, rule, two worlds
    assert "| 64 | 62% (57% to 67%) | +163% | 5 | 28.0 (27.0 to 29.0) | 14.0 (13.0 to 15.0) | 2.00x" in table
    fig, axes = plt.subplots(1, 2)
    plots.plot_positive_control(axes, sweep)
    assert len(axes[0].lines) >= 2 and axes[1].get_ylabel().startswith("mean held-out accuracy")
    plt.close(fig)


def test_positive_conclusion_reads_oars_weights_on_the_picked_world():
    control, shares = _sweep_data({0: 28.0, 64: 27.5}, {0: 0.0, 64: 0.004}, {0: 0.19, 64: 0.62})
    shares[findings.oar_weights_name(64)] = {
        "snr_vs_uniform": {R: 2.0, "oar-p:last": 1.5, "relevant": 1.8},
        "weight_mass": {R: {"irrelevant_mass": 0.1, "effective_share": 0.5},
                        "oar-p:last": {"irrelevant_mass": 0.3, "effective_share": 0.7},
                        "uniform": {"irrelevant_mass": 0.6, "effective_share": 1.0}}}
    control[findings.confirm_name(64)] = _entry({"uniform": (28.0, 1.0), R: (27.0, 1.0)}, {"uniform": 0.0, R: 0.002},
                                                seeds=range(5, 15))
    f = findings.positive_findings(control, shares)
    assert f["oar_weights"]["oar-p:last"]["snr_recovered"] == pytest.approx(0.75)
    text = findings.positive_conclusion(f)
    assert "oar-p:last by +150% (75% of the oracle's gain), 30% of its weight mass on the irrelevant tokens, effective share 0.70" in text
    assert "uniform credit: 60%" in text and "none for OAR to recover" in text


def test_positive_sentence_tells_a_gain_below_the_bar_from_none():
    control, shares = _sweep_data({0: 28.0, 64: 27.5}, {0: 0.0, 64: 0.004}, {0: 0.19, 64: 0.62})
    for diff, words in ((0.002, "here it was not sufficient"), (0.02, "A real gain, seen on 10 seeds the screen never saw")):
        control[findings.confirm_name(64)] = _entry({"uniform": (28.0, 1.0), R: (27.0, 3.0)}, {"uniform": 0.0, R: diff},
                                                    seeds=range(5, 15))
        f = findings.positive_findings(control, shares)
        text = findings.positive_sentence(f)
        assert words in text and "1.04x" in text
        assert "There, credit paid" not in text


def test_positive_plot_marks_the_confirmatory_run():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from oar_lite.lab import plots

    control, shares = _sweep_data({0: 28.0, 64: 27.5}, {0: 0.0, 64: 0.004}, {0: 0.19, 64: 0.62})
    control[findings.confirm_name(64)] = _entry({"uniform": (28.0, 1.0), R: (21.0, 3.0)}, {"uniform": 0.0, R: 0.02},
                                                seeds=range(5, 15))
    f = findings.positive_findings(control, shares)
    fig, axes = plt.subplots(1, 2)
    plots.plot_positive_control(axes, f["sweep"], confirm=f["confirm"])
    labels = [t.get_text() for t in axes[0].get_legend().get_texts()]
    assert "oracle, confirmatory (10 new seeds)" in labels
    plt.close(fig)


def _seeded(seeds, areas: dict, steps: dict):
    """A credit_regime entry with per-seed readings: ``areas`` / ``steps`` ``{method: [per seed]}``."""
    return {"table": {"target": 0.75, "seeds": list(seeds), "methods": {m: {"steps": v} for m, v in steps.items()}},
            "area": {"seeds": list(seeds), "methods": {m: {"area": v} for m, v in areas.items()}}}


def _pooled_control():
    I = "inverted:" + R
    return {
        findings.screen_name(64): _seeded([0, 1], {"uniform": [0.60, 0.62], R: [0.61, 0.60], I: [0.55, 0.57]},
                                          {"uniform": [32, 30], R: [32, 28], I: [32, 32]}),
        findings.confirm_name(64): _seeded([5, 6, 7], {"uniform": [0.6] * 3, R: [0.63, 0.64, 0.65], I: [0.55] * 3},
                                           {"uniform": [30] * 3, R: [20] * 3, I: [32] * 3}),
        findings.REPLICATION: _seeded([201, 202, 203], {"uniform": [0.7] * 3, R: [0.69, 0.72, 0.68], I: [0.7, 0.69, 0.71]},
                                      {"uniform": [32] * 3, R: [32, 30, 32], I: [32] * 3}),
    }


def test_pooled_positive_control_reads_every_seed_set_paired_by_seed():
    p = findings.positive_pooled(_pooled_control(), 64, n_boot=2000)
    assert [st["label"] for st in p["sets"]] == ["screen", "confirmatory", "external replication"]
    o = p["pooled"]["methods"][R]
    assert p["pooled"]["seeds"] == [0, 1, 5, 6, 7, 201, 202, 203]
    assert o["diffs"] == pytest.approx([0.01, -0.02, 0.03, 0.04, 0.05, -0.01, 0.02, -0.02])
    assert o["diff"] == pytest.approx(0.0125) and o["diff_ci"][0] < 0.0125 < o["diff_ci"][1]
    assert o["speedup"] == pytest.approx(31 / 26.75) and o["grpo_steps"] == pytest.approx(31.0)
    confirm, rep = p["sets"][1]["methods"], p["sets"][2]["methods"]
    assert confirm[R]["diff"] == pytest.approx(0.04) and confirm[R]["diff_ci"][0] > 0  # every seed gained
    assert rep[R]["diff"] == pytest.approx(-0.01 / 3) and rep[R]["diff_ci"][0] < 0 < rep[R]["diff_ci"][1]
    assert p["pooled"]["methods"]["inverted:" + R]["diff"] == pytest.approx((-0.1 - 0.15 + 0.0) / 8)
    table = findings.pooled_table(p)
    assert table.splitlines()[2].startswith("| pooled | 0, 1, 5-7, 201-203 (8) | +0.013")
    assert "| confirmatory | 5-7 (3) | +0.040" in table
    text = findings.pooled_sentence(p)
    assert text.startswith("Pooled over all 8 seeds run in the k = 64 world, the oracle's mean held-out accuracy "
                           "differed from GRPO's by +0.013")
    assert "did not replicate on the external replication's seeds (-0.003" in text
    assert "claims 1 and 2 of the confirmatory run (an oracle gain, an inverted-oracle harm) are not replicated" in text


def test_pooled_positive_control_refuses_shared_seeds_and_needs_two_sets():
    control = _pooled_control()
    assert findings.positive_pooled({findings.screen_name(64): control[findings.screen_name(64)]}) is None
    control[findings.REPLICATION] = _seeded([7, 8], {"uniform": [0.6, 0.6], R: [0.6, 0.6]},
                                            {"uniform": [32, 32], R: [32, 32]})
    with pytest.raises(ValueError, match="seed 7 is in both 'confirm, k=64' and 'external replication"):
        findings.positive_pooled(control)


def test_positive_sentence_leads_with_the_pooled_reading():
    control, shares = _sweep_data({0: 28.0, 64: 27.5}, {0: 0.0, 64: 0.004}, {0: 0.19, 64: 0.62})
    pooled = _pooled_control()
    control[findings.confirm_name(64)] = {**_entry({"uniform": (28.0, 1.0), R: (27.0, 3.0)}, {"uniform": 0.0, R: 0.04},
                                                   seeds=[5, 6, 7]), }
    control[findings.confirm_name(64)]["area"]["seeds"] = [5, 6, 7]  # no per-seed lists: no pooled reading yet
    f = findings.positive_findings(control, shares)
    assert f["pooled"] is None and "A real gain" in findings.positive_sentence(f)
    control.update({k: pooled[k] for k in (findings.confirm_name(64), findings.REPLICATION)})
    control[findings.confirm_name(64)]["table"]["methods"]["uniform"].update(
        {"mean": 30.0, "ci": [30, 30], "speedup": 1.0, "speedup_ci": [1, 1], "recovered": None, "recovered_ci": None})
    for m in (R, "inverted:" + R):
        control[findings.confirm_name(64)]["table"]["methods"][m].update(
            {"mean": 20.0, "ci": [20, 20], "speedup": 1.5, "speedup_ci": [1.5, 1.5], "recovered": None, "recovered_ci": None})
        control[findings.confirm_name(64)]["area"]["methods"][m].update({"diff": 0.04, "diff_ci": [0.03, 0.05],
                                                                         "recovered": None, "recovered_ci": None})
    control[findings.confirm_name(64)]["area"]["methods"]["uniform"].update({"diff": 0.0, "diff_ci": [0, 0],
                                                                             "recovered": None, "recovered_ci": None})
    f = findings.positive_findings(control, shares)
    sentence = findings.positive_sentence(f)
    assert f["pooled"]["pooled"]["seeds"] == [5, 6, 7, 201, 202, 203]  # the screen's entry here has no per-seed lists
    assert "k = 64 scratch words the answer never reads). Pooled over all 6 seeds" in sentence
    assert "A real gain" not in sentence and "not replicated" in sentence
    assert findings.positive_conclusion(f).startswith("**Every seed set, pooled first.** Pooled over all 6 seeds")


def test_learning_conclusion_recalls_the_pooled_positive_control():
    base = [0] * 8
    log = {"name": "t", "screened_seeds": [0], "runs": [_run("uniform", s, base, [1, 1, 1, 1, 0, 0, 0, 0], 100.0)
                                                        for s in range(3)]}
    f = findings.learning_findings(log)
    positive = {"pooled": findings.positive_pooled(_pooled_control(), 64, n_boot=2000)}
    text = findings.learning_conclusion(f, positive)
    assert ("perfect credit's gain over GRPO, pooled over all 8 seeds run, was +0.013 in mean held-out accuracy"
            in text)
    assert "did not replicate on fresh seeds" in text
    assert "pooled over all" not in findings.learning_conclusion(f, {"pooled": None})  # no seed sets to pool
    unreplicated = findings.positive_pooled({k: v for k, v in _pooled_control().items() if k != findings.REPLICATION})
    text = findings.learning_conclusion(f, {"pooled": unreplicated})
    assert "pooled over all 5 seeds run, was +0.022" in text and "did not replicate" not in text


def test_positive_control_benchmark_prints_the_pooled_reading(capsys):
    from benchmarks import positive_control
    f = positive_control.main(["--pooled"])  # the shipped data: at least the screen and the confirmatory run
    out = capsys.readouterr().out
    p = f["pooled"]
    assert p["pooled"]["seeds"][:15] == list(range(15)) and [st["label"] for st in p["sets"]][:2] == ["screen", "confirmatory"]
    assert out.splitlines()[2].startswith("| pooled |") and f"{p['pooled']['methods'][findings.RELEVANT]['diff']:+.3f}" in out
    assert f"Pooled over all {len(p['pooled']['seeds'])} seeds run in the k = 64 world" in out


def _batch_entry(diffs: dict, model="oar_lite/course/data/toy-model", optimizer="adamw") -> dict:
    """A `benchmarks/batch_size.py` entry whose per-step differences are ``{prompts: (diff, low, high)}``."""
    names = {p: f"{p} prompts" for p in diffs}
    area = {names[p]: {"mean": 0.7 + d, "diff": d, "diff_ci": [lo, hi]} for p, (d, lo, hi) in diffs.items()}
    steps = {names[p]: {"mean": 20 / (1 + 10 * d), "reached": 5, "speedup": 1 + 10 * d,
                        "speedup_ci": [1 + 10 * lo, 1 + 10 * hi]} for p, (d, lo, hi) in diffs.items()}
    per = {names[p]: {"diff": d / 2, "diff_ci": [lo / 2, hi / 2]} for p, (d, lo, hi) in diffs.items()}
    return {"settings": {"model": model, "optimizer": optimizer},
            "table": {"prompts": sorted(diffs), "seeds": [0, 1, 2, 3, 4], "steps": {"target": 0.75, "methods": steps},
                      "area": {"methods": area}, "per_completion": {"budget": 240, "rows": per}}}


def test_batch_findings_reads_the_pre_registered_rule_and_places_credit_on_the_curve():
    helps = _batch_entry({2: (0, 0, 0), 4: (0.04, 0.02, 0.06), 8: (0.06, 0.03, 0.09)})
    flat = _batch_entry({2: (0, 0, 0), 4: (0.01, -0.01, 0.03), 8: (0.02, -0.005, 0.04)}, optimizer="sgd")
    regimes = {findings.BATCH_STUDY: {"settings": {"optimizer": "adamw"}, "area": {"seeds": [0, 1], "methods": {
        "uniform": {"diff": 0.0, "diff_ci": [0, 0]}, "oracle": {"diff": 0.02, "diff_ci": [-0.01, 0.05]},
        "oar-p:answer_mean": {"diff": -0.01, "diff_ci": [-0.03, 0.01]}}}}}
    f = findings.batch_findings({"a": helps, "b": flat}, regimes=regimes, control={})
    a, b = f
    assert a["noise_limited"] and not b["noise_limited"]  # an interval above 0 decides, not the mean
    assert a["marks"]["oracle"]["worth"] == pytest.approx(2 ** 1.5)  # half way to 4 prompts' +0.04, in log2
    assert a["marks"]["oar-p:answer_mean"]["worth"] == 2.0 and "uniform" not in a["marks"]
    assert b["marks"] == {}  # the credit runs used AdamW: they are not placed on SGD's curve
    text = findings.batch_conclusion(f)
    assert "this learner **is noise-limited**" in text and "this learner **is not noise-limited**" in text
    assert "worth GRPO at 2.8 prompts per step (interval 2.0 to 5.7 prompts per step)" in text
    assert "OAR-P -0.010 (-0.030 to +0.010, 2 seeds), worth GRPO at 2.0 prompts per step (interval 2.0 to 2.4" in text
    assert "Credit buys part of what a bigger batch buys here" in text  # the oracle's interval reaches past 4 prompts
    regimes[findings.BATCH_STUDY]["area"]["methods"]["oracle"]["diff_ci"] = [-0.01, 0.03]
    regimes[findings.BATCH_STUDY]["area"]["methods"]["oar-g:answer_mean"] = {"diff": -0.03, "diff_ci": [-0.05, -0.01]}
    text = findings.batch_conclusion(findings.batch_findings({"a": helps}, regimes=regimes, control={}))
    assert "OAR-G -0.030 (-0.050 to -0.010, 2 seeds), worse than GRPO at the same batch" in text
    assert "So the nulls of this notebook are not because the learner cannot use a cleaner gradient" in text
    assert "| plain toy | sgd | 5 | 4 |" in findings.batch_table(f)


def test_batch_findings_in_a_scratch_world_use_the_oracle_pooled_over_every_seed_set(monkeypatch):
    k64 = _batch_entry({2: (0, 0, 0), 4: (0.04, 0.02, 0.06)}, model="/runs/worlds/scratch64")
    pooled = {"pooled": {"seeds": list(range(20)), "methods": {findings.RELEVANT: {"diff": 0.1, "diff_ci": [0.05, 0.15]}}}}
    seen = []
    monkeypatch.setattr(findings, "positive_pooled", lambda control, k: seen.append(k) or pooled)
    (b,) = findings.batch_findings({"k": k64}, regimes={}, control={})
    assert seen == [64] and b["world"] == "k = 64"
    assert b["marks"]["oracle"]["worth"] == float("inf")  # beyond every measured batch
    assert "more than the largest batch measured" in findings.batch_conclusion([b])
    sgd = {**k64, "settings": {**k64["settings"], "optimizer": "sgd"}}
    assert findings.batch_findings({"k": sgd}, regimes={}, control={})[0]["marks"] == {}  # AdamW runs, not on SGD's curve


def test_batch_sentence_says_what_credit_is_worth_against_a_bigger_batch():
    helps = _batch_entry({2: (0, 0, 0), 4: (0.04, 0.02, 0.06), 8: (0.06, 0.03, 0.09)})
    area = lambda hi: {"seeds": [0, 1], "methods": {"uniform": {"diff": 0.0, "diff_ci": [0, 0]},
                                                    "oracle": {"diff": 0.0, "diff_ci": [-0.01, hi]}}}
    small = findings.batch_findings({"a": helps}, regimes={findings.BATCH_STUDY: {"settings": {}, "area": area(0.01)}}, control={})
    large = findings.batch_findings({"a": helps}, regimes={findings.BATCH_STUDY: {"settings": {}, "area": area(0.05)}}, control={})
    assert "not by the part credit can remove" in findings.batch_sentence(small)
    assert "credit buys part of what a bigger batch buys" in findings.batch_sentence(large)
    assert findings.batch_sentence([{**small[0], "noise_limited": False}]) is None


def test_stable_world_is_read_beside_the_pooled_reading_by_the_one_rule():
    def entry(o, inv):
        area = {"uniform": {"mean": 0.74, "diff": 0.0, "diff_ci": [0, 0]},
                findings.RELEVANT: {"diff": o[0], "diff_ci": list(o[1:])},
                findings.INVERTED: {"diff": inv[0], "diff_ci": list(inv[1:])}}
        return {findings.STABLE: {"table": {"seeds": list(range(500, 510))}, "area": {"methods": area}}}
    s = findings.stable_reading(entry((0.01, -0.01, 0.03), (-0.04, -0.06, -0.02)))
    text = findings.stable_sentence(s)
    assert "seeds 500-509" in text and "GRPO's mean held-out accuracy over the run was 0.740" in text
    assert "the oracle +0.010 (-0.010 to +0.030), an interval that includes 0" in text
    assert "the inverted oracle -0.040 (-0.060 to -0.020), a loss" in text
    assert findings.stable_sentence(findings.stable_reading(entry((0.02, 0.01, 0.03), (0, -0.01, 0.01)))).count("a gain") == 1
    assert findings.stable_reading({}) is None
