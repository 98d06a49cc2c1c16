"""oar_lite.lab.findings.gradient: the gradient-quality files read and worded."""
from oar_lite.lab.findings import gradient


def test_the_measured_gradient_is_read_and_worded_from_the_shipped_file():
    m = gradient.measured()
    assert m["stats"]["uniform"]["snr_gain"] == 0.0 and m["best"] != "uniform"
    table = gradient.text("table", m)
    assert table.count("\n| ") == len(m["stats"]) + 1 and f"`{m['command']}`" in table
    reading = gradient.text("reading", m)
    assert f"**{m['stats'][gradient.ORACLE]['snr_gain']:+.0%}**" in reading and f"**{m['best']}**'s" in reading
    controls_down = max(m["stats"]["shuffled " + gradient.ORACLE]["snr_gain"],
                        m["stats"]["inverted " + gradient.ORACLE]["snr_gain"]) < 0
    assert ("Misplaced credit is worse than none" in reading) == controls_down
    blame = gradient.text("blame", m)
    assert f"**{m['wrong_tokens']:.1%}**" in blame and f"{m['blame']['uniform']['n']} wrong completions" in blame


def test_the_regime_gradient_and_a_live_run_are_worded():
    r = gradient.in_regime()
    text = gradient.text("regime", r)
    g = r["gains"][gradient.ORACLE]
    assert f"SNR of the oracle {g['gain']:+.0%} (95% CI {g['ci'][0]:+.0%} to {g['ci'][1]:+.0%})" in text
    live = gradient.text("live", {"uniform": {"cosine": 0.5, "bias_cosine": 1.0, "snr": 0.25}})
    assert live.splitlines()[2] == "| uniform | 0.500 | 1.000 | 0.250 |"
