"""oar_lite.lab.findings.regimes: the regimes table and the counts the prose states about it come
from one list of rows; each verdict by the project's bar."""
import pytest

from oar_lite.lab.findings import regimes


def _entry(speedup, seeds, prompts=2, reused=(), diff=None):
    table = {"target": 0.75, "seeds": list(range(seeds)),
             "methods": {"uniform": {"mean": 12.0, "ci": (10.0, 14.0), "speedup": 1.0, "speedup_ci": (1.0, 1.0)},
                         "oracle": {"mean": 12.0 / speedup, "ci": (5.0, 7.0), "speedup": speedup,
                                    "speedup_ci": (speedup - 0.2, speedup + 0.2)}}}
    e = {"note": "n", "table": table, "reused": {"methods": list(reused)},
         "settings": {"prompts_per_step": prompts, "group_size": 4, "steps": 30, "boost": 9.0, "learning_rate": 1e-4,
                      "digits": [2, 4]}}
    if diff is not None:
        e["area"] = {"methods": {"oracle": {"diff": diff, "diff_ci": [diff - 0.01, diff + 0.01]}}}
    return e


def test_rows_read_each_oracle_once_with_its_verdict_and_what_superseded_it():
    data = {"screen": _entry(2.0, 3), "small": _entry(1.6, 5), "confirm": _entry(1.1, 10, diff=-0.002),
            "other batch": _entry(1.2, 3, prompts=4), "reused": _entry(1.0, 10, reused=["oracle"])}
    rows = regimes.rows(data)
    assert [r["name"] for r in rows] == ["screen", "small", "confirm", "other batch"]
    assert [(r["screen"], r["pays"], r["superseded_by"]) for r in rows] == [
        (True, True, "small"), (False, True, "confirm"), (False, False, None), (True, False, None)]
    table = regimes.text("table", rows).splitlines()
    assert len(table) == 2 + 4 and table[2].endswith("| screen (3 seeds): promising; not confirmed by 'small' |")
    assert table[3].endswith("| **pays** (>= 1.5x, speed-up interval above 1); not confirmed by 'confirm' |")
    assert "| -0.002 (-0.012 to +0.008) | does not pay |" in table[4] and "2.00x (1.80 to 2.20)" in table[2]
    t = regimes.tally(rows)
    assert (t["sets"], t["screens"], [r["name"] for r in t["paid"]], t["confirmed"]) == (4, 2, ["small"], [])
    text = regimes.text("tally", t)
    assert text.startswith("Of the 4 sets of runs in the regimes table (2 of them screens of fewer than 5 seeds")
    assert "1 met the project's bar on its own seeds" in text and "'small' (5 seeds, 1.60x, 1.40 to 1.80)" in text
    assert "not confirmed when the same settings ran on more seeds ('confirm'); none stands." in text
    data.pop("confirm"), data.pop("reused")
    assert "; 1 stands unconfirmed by a larger run." in regimes.text("tally", regimes.tally(regimes.rows(data)))
    assert "none met the project's bar" in regimes.text("tally", regimes.tally(regimes.rows({"c": _entry(1.1, 10)})))


def test_the_confirmatory_run_is_read_at_every_target_and_per_seed():
    c = regimes.confirmatory()
    assert list(c["targets"]) == sorted(c["targets"]) and f"{c['target']:g}" in c["targets"]
    assert c["per_seed"]["n"] == c["seeds"] and c["per_seed"]["lowest"] <= c["per_seed"]["median"]
    reading = regimes.text("reading", c)
    assert reading.startswith(f"- With {c['seeds']} seeds and {c['steps']} steps, the oracle reaches")
    assert f"{c['area']['diff']:+.3f}" in reading
    controls = regimes.text("controls", c)
    assert "`inverted:oracle`" in controls and "`shuffled:oracle`" in controls
    assert "| method | steps to target (95% CI) |" in regimes.text("methods", c)
    assert regimes.text("targets", c).startswith("Command: `python -m benchmarks.credit_regime")


def test_credit_regime_render_prints_the_table_from_the_same_rows(capsys):
    from benchmarks import credit_regime
    text = credit_regime.main(["--render"])
    assert text.startswith(regimes.text("table", regimes.rows()))
    pytest.importorskip("numpy")
