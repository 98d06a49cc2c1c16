"""oar_lite.lab.findings.noise: the removable share of the gradient's noise, read and worded."""
import pytest

from oar_lite.lab.findings import noise


def test_shares_and_their_snr_bound_are_read_from_the_shipped_file():
    n = noise.shares()
    lo, hi = n["toy_range"]
    assert 0 <= lo <= hi <= 1 and n["toy"][n["toy_low"]]["irrelevant"] == lo
    e = next(iter(n["toy"].values()))
    assert e["bound"] == pytest.approx(1 / (1 - e["irrelevant"]) - 1)
    table = noise.text("toy_table", n)
    assert table.count("\n| ") == len(n["toy"])  # the rows below the header
    assert f"**{lo:.1%}** ({n['toy_low']})" in noise.text("toy_reading", n)
    assert f"**{n['smollm2_share']:.0%}**" in noise.text("smollm2", n)
