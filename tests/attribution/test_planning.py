"""`oar_lite.attribution.planning`: how OAR-P groups its perturbed copies into passes."""
import pytest

import oar_lite as ol


def test_plan_passes_bounds():
    """The copies of one row (one per column) grouped into passes: in order, at most ``per_pass``
    a pass, the work (each pass from its first column) within ``1 + max_waste`` of the ideal."""
    end, columns = 60, list(range(10, 55))
    ideal = sum(end - c for c in columns)
    passes = {}
    for per_pass, waste in [(64, 0.1), (3, 0.1), (4, 0.5), (64, 0.0), (64, 0.3), (64, 10.0)]:
        plan = ol.attribution.plan_passes(columns, end, per_pass=per_pass, max_waste=waste, reuse_prefix=True)
        assert plan[0][0] == 0 and plan[-1][1] == len(columns)
        assert all(a[1] == b[0] and a[0] < a[1] for a, b in zip(plan, plan[1:]))
        assert all(hi - lo <= per_pass for lo, hi in plan)
        work = sum((hi - lo) * (end - columns[lo]) for lo, hi in plan)
        assert ideal <= work <= (1 + waste) * ideal
        passes[per_pass, waste] = len(plan)
        if waste == 0.0:
            assert all(hi - lo == 1 for lo, hi in plan)
    # More allowed waste, fewer passes; with no limits, one pass.
    assert passes[64, 0.0] > passes[64, 0.1] > passes[64, 0.3] > passes[64, 10.0] == 1
    # Without prefix reuse every copy is the whole sequence; only per_pass splits them.
    assert ol.attribution.plan_passes(list(range(10)), 20, per_pass=3, max_waste=0.0, reuse_prefix=False) == [
        (0, 3), (3, 6), (6, 9), (9, 10)]


def test_default_token_budget_per_device():
    assert ol.default_token_budget("cpu") < ol.default_token_budget("cuda")
    assert ol.default_token_budget("meta") == ol.default_token_budget("cpu")
