"""oar_lite.lab.findings.conclusion: notebook 06's read-aloud conclusion states only numbers its own
tables render, and its counts and verdicts are the tables' (issue 49)."""
import copy

import pytest

from oar_lite.lab.findings import batch, conclusion, noise, positive, regimes


@pytest.fixture(scope="module")
def shipped():
    n = conclusion.numbers()
    return n, conclusion.text("conclusion", n)


def _rows(markdown: str) -> list[list[str]]:
    """The body rows of the first markdown table in ``markdown``, as cells."""
    lines = [l for l in markdown.splitlines() if l.startswith("|")]
    return [[c.strip() for c in l.strip("|").split("|")] for l in lines[2:]]


def test_the_counts_and_verdicts_the_conclusion_states_are_the_regimes_tables(shipped):
    n, text = shipped
    rows = _rows(regimes.text("table", regimes.rows()))
    verdicts = [r[-1] for r in rows]
    screens = sum(v.startswith("screen") for v in verdicts)
    paid = [r[0] for r, v in zip(rows, verdicts) if v.startswith("**pays**")]
    assert f"Of the {len(rows)} sets of runs in the regimes table ({screens} of them screens" in text
    if paid:
        assert f"{len(paid)} met the project's bar on its own seeds" in text and all(f"'{p}'" in text for p in paid)
        unconfirmed = [r[0] for r, v in zip(rows, verdicts) if v.startswith("**pays**") and "not confirmed by" in v]
        assert ("none stands" in text) == (len(unconfirmed) == len(paid))
    else:
        assert "none met the project's bar" in text


def test_the_numbers_of_the_other_sections_are_their_tables_cells(shipped):
    n, text = shipped
    p = positive.findings()
    pooled = _rows(positive.pooled_table(p["pooled"]))[0]
    assert pooled[0] == "pooled" and pooled[2] in text and pooled[5].replace("x (", "x as fast (") in text
    toy = [r[3].split("**")[1] for r in _rows(noise.text("toy_table", noise.shares()))]
    shares = sorted(float(x.rstrip("%")) for x in toy)
    assert f"only {shares[0]:.0f}%-{shares[-1]:.0f}% of a batch gradient's variance at the shipped model" in text
    k0 = next(r for r in _rows(positive.table(p["sweep"])) if r[0] == "0")
    assert f"has {k0[1].split(' ')[0]}: its model spreads more of the noise" in text
    plain = next(r for r in _rows(batch.table(batch.worlds()))
                 if r[:2] == ["plain toy", "adamw"] and r[3] == "4" and r[2].startswith("pooled" if len(
                     next(b for b in n["batch"] if b["world"] == "plain toy")["sets"]) > 1 else "pre-registered"))
    assert f"mean accuracy {plain[8].split(' (')[0]}, {plain[8].split(' (')[1].rstrip(')')}" in text


def test_the_conclusion_follows_the_numbers():
    n = copy.deepcopy(conclusion.numbers())
    for r in n["regimes"]["paid"]:
        r["superseded_by"] = None
    n["regimes"]["confirmed"] = n["regimes"]["paid"] = n["regimes"]["paid"][:1] or [
        {"name": "a regime", "seeds": 10, "speedup": 1.7, "speedup_ci": [1.2, 2.2], "superseded_by": None}]
    n["confirm"]["controls"]["methods"]["inverted:oracle"]["area"]["diff_ci"] = [-0.05, 0.01]
    n["auc"]["oar-p:last"] = {"mean": 0.62, "ci95": 0.05, "n": 15}
    text = conclusion.text("conclusion", n)
    assert "1 met the project's bar on its own seeds" in text and "; 1 stands unconfirmed by a larger run" in text
    assert "an interval that includes 0;" in text  # a control that did not hurt is not reported as hurting
    assert "ranks the pivotal tokens near chance (AUC 0.62" in text
    n["regime_gradient"]["gains"][conclusion.gradient.ORACLE]["ci"] = [0.05, 0.3]
    assert "a measurable gain, if a small one" in conclusion.text("conclusion", n)


def test_the_uniformity_table_and_its_reading(shipped):
    n, text = shipped
    u = n["uniformity"]
    table = conclusion.text("uniformity", n)
    assert len(_rows(table)) == len(u["rows"]) and f"`{u['command']}`" in table
    m = u["most_zero"]
    assert f"`{m['method']}` ({m['setting']}) gets tau = 0 on {m['tau_zero_share']:.0%}" in text
    assert conclusion.uniformity({"command": "c", "results": {"s": {"m": {"completions": 0}}}})["rows"] == []
