"""oar_lite.lab.findings.positive: the positive control's sweep, the follow-up rule, the confirmatory
run and every seed set of the picked world pooled, read in words by ``positive.md.j2``."""
import pytest

from oar_lite.lab.findings import positive, prose


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


R = positive.RELEVANT
CONTROLS = {"inverted:" + R: -0.03, "shuffled:" + R: 0.0}


def _sweep_data(oracle_steps: dict, diffs: dict, shares: dict):
    control = {positive.screen_name(k): _entry({"uniform": (28.0, 1.0), R: (s, 1.0), "inverted:" + R: (30.0, 1.0),
                                                "shuffled:" + R: (28.0, 1.0)}, {"uniform": 0.0, R: diffs[k], **CONTROLS})
               for k, s in oracle_steps.items()}
    return control, {positive.share_name(k): _share(v) for k, v in shares.items()}


def test_follow_up_rule_picks_the_largest_qualifying_speedup():
    control, shares = _sweep_data({0: 27.0, 16: 14.0, 32: 17.0, 64: 12.0}, {0: 0.01, 16: 0.05, 32: 0.04, 64: -0.01},
                                  {0: 0.1, 16: 0.3, 32: 0.5, 64: 0.7})
    f = positive.findings(control, shares)
    assert [r["k"] for r in f["sweep"]] == [0, 16, 32, 64]
    # k=64 is fastest but its mean accuracy fell: it does not qualify; k=16 beats k=32.
    assert [r["qualifies"] for r in f["sweep"]] == [False, True, True, False]
    assert f["pick"]["k"] == 16 and f["pick"]["qualified"]
    assert f["spearman"] == pytest.approx(0.8)  # speed-ups 1.04, 2.0, 1.65, 2.33 against increasing shares
    text = positive.conclusion(f)
    assert "The screen met the bar at k = 16, 32" in text and "+0.80" in text and "(the pre-registered claim needs >= 0.8: met)" in text


def test_follow_up_rule_falls_back_to_the_largest_share():
    control, shares = _sweep_data({0: 28.0, 64: 27.5}, {0: 0.0, 64: 0.004}, {0: 0.19, 64: 0.62})
    f = positive.findings(control, shares)
    assert f["pick"] == {"k": 64, "qualified": False, "speedup": pytest.approx(28 / 27.5), "share": 0.62}
    assert "The follow-up rule picked k = 64: no screen met the bar; it has the largest share (62%)." in positive.conclusion(f)
    assert f["confirm"] is None
    assert "No world's screen met the bar" in positive.conclusion(f)
    # The confirmatory entry of the picked world is read; an oracle without a gain leaves nothing to recover.
    control[positive.confirm_name(64)] = _entry(
        {"uniform": (28.0, 1.0), R: (27.0, 1.0), "inverted:" + R: (30.0, 1.0), "oar-p:last": (28.0, 1.0)},
        {"uniform": 0.0, R: 0.002, "inverted:" + R: -0.03, "oar-p:last": 0.001}, seeds=range(5, 15))
    f = positive.findings(control, shares)
    text = positive.conclusion(f)
    assert f["confirm"]["seeds"] == list(range(5, 15)) and not f["confirm"]["pays"]
    assert "seeds 5-14" in text and "Claim 1" in text and "not met" in text
    assert "claim 2 (an interval below 0): met" in text
    assert "no gain for OAR to recover" in text


def test_positive_findings_without_runs():
    assert positive.findings({}, {}) is None
    with pytest.raises(ValueError, match="no screened world"):
        positive.confirmatory_world([])


def test_positive_table_and_plot_read_the_sweep():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from oar_lite.lab import plots

    control, shares = _sweep_data({0: 28.0, 64: 14.0}, {0: 0.0, 64: 0.05}, {0: 0.19, 64: 0.62})
    sweep = positive.sweep(control, shares)
    table = positive.table(sweep)
    assert table.count("\n") == 3  # header, rule, two worlds
    assert "| 64 | 62% (57% to 67%) | +163% | 5 | 28.0 (27.0 to 29.0) | 14.0 (13.0 to 15.0) | 2.00x" in table
    fig, axes = plt.subplots(1, 2)
    plots.plot_positive_control(axes, sweep)
    assert len(axes[0].lines) >= 2 and axes[1].get_ylabel().startswith("mean held-out accuracy")
    plt.close(fig)


def test_positive_conclusion_reads_oars_weights_on_the_picked_world():
    control, shares = _sweep_data({0: 28.0, 64: 27.5}, {0: 0.0, 64: 0.004}, {0: 0.19, 64: 0.62})
    shares[positive.oar_weights_name(64)] = {
        "snr_vs_uniform": {R: 2.0, "oar-p:last": 1.5, "relevant": 1.8},
        "weight_mass": {R: {"irrelevant_mass": 0.1, "effective_share": 0.5},
                        "oar-p:last": {"irrelevant_mass": 0.3, "effective_share": 0.7},
                        "uniform": {"irrelevant_mass": 0.6, "effective_share": 1.0}}}
    control[positive.confirm_name(64)] = _entry({"uniform": (28.0, 1.0), R: (27.0, 1.0)}, {"uniform": 0.0, R: 0.002},
                                                seeds=range(5, 15))
    f = positive.findings(control, shares)
    assert f["oar_weights"]["oar-p:last"]["snr_recovered"] == pytest.approx(0.75)
    text = positive.conclusion(f)
    assert "oar-p:last by +150% (75% of the oracle's gain), 30% of its weight mass on the irrelevant tokens, effective share 0.70" in text
    assert "uniform credit: 60%" in text and "none for OAR to recover" in text


def test_positive_sentence_tells_a_gain_below_the_bar_from_none():
    control, shares = _sweep_data({0: 28.0, 64: 27.5}, {0: 0.0, 64: 0.004}, {0: 0.19, 64: 0.62})
    for diff, words in ((0.002, "here it was not sufficient"), (0.02, "A real gain, seen on 10 seeds the screen never saw")):
        control[positive.confirm_name(64)] = _entry({"uniform": (28.0, 1.0), R: (27.0, 3.0)}, {"uniform": 0.0, R: diff},
                                                    seeds=range(5, 15))
        f = positive.findings(control, shares)
        text = positive.sentence(f)
        assert words in text and "1.04x" in text
        assert "There, credit paid" not in text


def test_positive_plot_marks_the_confirmatory_run():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from oar_lite.lab import plots

    control, shares = _sweep_data({0: 28.0, 64: 27.5}, {0: 0.0, 64: 0.004}, {0: 0.19, 64: 0.62})
    control[positive.confirm_name(64)] = _entry({"uniform": (28.0, 1.0), R: (21.0, 3.0)}, {"uniform": 0.0, R: 0.02},
                                                seeds=range(5, 15))
    f = positive.findings(control, shares)
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
        positive.screen_name(64): _seeded([0, 1], {"uniform": [0.60, 0.62], R: [0.61, 0.60], I: [0.55, 0.57]},
                                          {"uniform": [32, 30], R: [32, 28], I: [32, 32]}),
        positive.confirm_name(64): _seeded([5, 6, 7], {"uniform": [0.6] * 3, R: [0.63, 0.64, 0.65], I: [0.55] * 3},
                                           {"uniform": [30] * 3, R: [20] * 3, I: [32] * 3}),
        positive.REPLICATION: _seeded([201, 202, 203], {"uniform": [0.7] * 3, R: [0.69, 0.72, 0.68], I: [0.7, 0.69, 0.71]},
                                      {"uniform": [32] * 3, R: [32, 30, 32], I: [32] * 3}),
    }


def test_pooled_positive_control_reads_every_seed_set_paired_by_seed():
    p = positive.pooled(_pooled_control(), 64, n_boot=2000)
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
    table = positive.pooled_table(p)
    assert table.splitlines()[2].startswith("| pooled | 0, 1, 5-7, 201-203 (8) | +0.013")
    assert "| confirmatory | 5-7 (3) | +0.040" in table
    text = positive.pooled_sentence(p)
    assert text.startswith("Pooled over all 8 seeds run in the k = 64 world, the oracle's mean held-out accuracy over "
                           "the run, the primary reading, differed from GRPO's by +0.013")
    assert "did not replicate on the external replication's seeds (-0.003" in text
    assert "claims 1 and 2 of the confirmatory run (an oracle gain, an inverted-oracle harm) are not replicated" in text


def test_pooled_positive_control_refuses_shared_seeds_and_needs_two_sets():
    control = _pooled_control()
    assert positive.pooled({positive.screen_name(64): control[positive.screen_name(64)]}) is None
    control[positive.REPLICATION] = _seeded([7, 8], {"uniform": [0.6, 0.6], R: [0.6, 0.6]},
                                            {"uniform": [32, 32], R: [32, 32]})
    with pytest.raises(ValueError, match="seed 7 is in both 'confirm, k=64' and 'external replication"):
        positive.pooled(control)


def test_positive_sentence_leads_with_the_pooled_reading():
    control, shares = _sweep_data({0: 28.0, 64: 27.5}, {0: 0.0, 64: 0.004}, {0: 0.19, 64: 0.62})
    pooled = _pooled_control()
    control[positive.confirm_name(64)] = {**_entry({"uniform": (28.0, 1.0), R: (27.0, 3.0)}, {"uniform": 0.0, R: 0.04},
                                                   seeds=[5, 6, 7]), }
    control[positive.confirm_name(64)]["area"]["seeds"] = [5, 6, 7]  # no per-seed lists: no pooled reading yet
    f = positive.findings(control, shares)
    assert f["pooled"] is None and "A real gain" in positive.sentence(f)
    control.update({k: pooled[k] for k in (positive.confirm_name(64), positive.REPLICATION)})
    control[positive.confirm_name(64)]["table"]["methods"]["uniform"].update(
        {"mean": 30.0, "ci": [30, 30], "speedup": 1.0, "speedup_ci": [1, 1], "recovered": None, "recovered_ci": None})
    for m in (R, "inverted:" + R):
        control[positive.confirm_name(64)]["table"]["methods"][m].update(
            {"mean": 20.0, "ci": [20, 20], "speedup": 1.5, "speedup_ci": [1.5, 1.5], "recovered": None, "recovered_ci": None})
        control[positive.confirm_name(64)]["area"]["methods"][m].update({"diff": 0.04, "diff_ci": [0.03, 0.05],
                                                                         "recovered": None, "recovered_ci": None})
    control[positive.confirm_name(64)]["area"]["methods"]["uniform"].update({"diff": 0.0, "diff_ci": [0, 0],
                                                                             "recovered": None, "recovered_ci": None})
    f = positive.findings(control, shares)
    sentence = positive.sentence(f)
    assert f["pooled"]["pooled"]["seeds"] == [5, 6, 7, 201, 202, 203]  # the screen's entry here has no per-seed lists
    assert "k = 64 scratch words the answer never reads). Pooled over all 6 seeds" in sentence
    assert "A real gain" not in sentence and "not replicated" in sentence
    assert positive.conclusion(f).startswith("**Every seed set, pooled first.** Pooled over all 6 seeds")


def test_positive_control_benchmark_prints_the_pooled_reading(capsys):
    from benchmarks import positive_control
    f = positive_control.main(["--pooled"])  # the shipped data: at least the screen and the confirmatory run
    out = capsys.readouterr().out
    p = f["pooled"]
    assert p["pooled"]["seeds"][:15] == list(range(15)) and [st["label"] for st in p["sets"]][:2] == ["screen", "confirmatory"]
    assert out.splitlines()[2].startswith("| pooled |") and f"{p['pooled']['methods'][positive.RELEVANT]['diff']:+.3f}" in out
    assert f"Pooled over all {len(p['pooled']['seeds'])} seeds run in the k = 64 world" in out




def test_the_pooled_sentence_states_both_readings_of_a_gain_too_small_to_measure_in_accuracy():
    """Issue 49: a pooled accuracy gain whose interval includes 0 and a speed-up whose interval lies
    above 1 are both stated, each by its own reading, and the speed-up is set against the bar."""
    p = positive.pooled(_pooled_control(), 64, n_boot=2000)
    o = p["pooled"]["oracle"]
    o.update(diff_ci=[-0.005, 0.018], speedup=1.18, speedup_ci=[1.01, 1.42])
    text = positive.pooled_sentence(p)
    assert "an interval that includes 0: a gain too small to measure with 8 seeds" in text
    assert ("it got there 1.18x as fast (1.01 to 1.42), an interval above 1: faster than GRPO, below the project's bar "
            "of 1.5x") in text
    o.update(speedup=1.6, speedup_ci=[1.2, 2.0], diff_ci=[0.01, 0.03])
    text = positive.pooled_sentence(p)
    assert "a gain;" in text and "below the project's bar" not in text


def test_the_stable_rule_world_is_read_beside_the_pooled_reading_by_the_one_rule():
    def entry(o, inv):
        area = {"uniform": {"mean": 0.74, "diff": 0.0, "diff_ci": [0, 0]},
                positive.RELEVANT: {"diff": o[0], "diff_ci": list(o[1:])},
                positive.INVERTED: {"diff": inv[0], "diff_ci": list(inv[1:])}}
        return {positive.STABLE: {"table": {"seeds": list(range(500, 510))}, "area": {"methods": area}}}
    text = prose.render(positive.TEMPLATE, "stable_sentence", s=positive.stable(entry((0.01, -0.01, 0.03), (-0.04, -0.06, -0.02))))
    assert "seeds 500-509" in text and "GRPO's mean held-out accuracy over the run was 0.740" in text
    assert "the oracle +0.010 (-0.010 to +0.030), an interval that includes 0" in text
    assert "the inverted oracle -0.040 (-0.060 to -0.020), a loss" in text
    assert positive.stable({}) is None
