"""`oar_lite.attribution.planning`: how OAR-P groups its perturbed copies into passes."""
import pytest

import oar_lite as ol


def test_plan_chunks_bounds():
    end, first, stop = 60, 10, 55
    ideal = sum(end - t for t in range(first, stop))
    passes = {}
    for budget, waste, rows in [(4096, 0.1, None), (200, 0.1, None), (4096, 0.5, 4), (4096, 0.0, None),
                                (30, 1.0, None), (4096, 0.3, None), (10**6, 10.0, None)]:
        chunks = ol.plan_chunks(first, stop, end, token_budget=budget, max_waste=waste, max_rows=rows)
        assert chunks[0][0] == first and chunks[-1][1] == stop
        assert all(a[1] == b[0] and a[0] < a[1] for a, b in zip(chunks, chunks[1:] + [(stop, stop + 1)]))
        work = 0
        for a, b in chunks:
            n = b - a
            assert n == 1 or n * (end - a) <= budget
            assert rows is None or n <= rows
            work += n * (end - a)
        assert ideal <= work <= (1 + waste) * ideal
        passes[budget, waste, rows] = len(chunks)
        if waste == 0.0:
            assert all(b - a == 1 for a, b in chunks)
    # More allowed waste, fewer passes; with no limits, one pass.
    assert passes[4096, 0.0, None] > passes[4096, 0.1, None] > passes[4096, 0.3, None] > passes[10**6, 10.0, None] == 1
    # Without prefix reuse every copy is the whole sequence; only the budget splits them.
    assert ol.plan_chunks(0, 10, 20, token_budget=60, reuse_prefix=False) == [(0, 3), (3, 6), (6, 9), (9, 10)]
    with pytest.raises(ValueError, match="token_budget >= 1"):
        ol.plan_chunks(0, 10, 20, token_budget=0)


def test_default_token_budget_per_device():
    assert ol.default_token_budget("cpu") < ol.default_token_budget("cuda")
    assert ol.default_token_budget("meta") == ol.default_token_budget("cpu")
