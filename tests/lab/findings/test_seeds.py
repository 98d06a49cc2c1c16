"""oar_lite.lab.findings.seeds: readings paired by seed, pooled over seed sets, with the intervals
`stats.bootstrap_interval` gives on the same draws."""
import numpy as np
import pytest

from oar_lite.lab.findings import seeds
from oar_lite.lab.stats import bootstrap_interval, paired_interval


def test_paired_reading_is_the_bootstrap_of_the_per_seed_differences():
    rng = np.random.default_rng(1)
    ref, mine = rng.random(9), rng.random(9)
    ref_steps, steps = rng.integers(4, 32, 9).astype(float), rng.integers(4, 32, 9).astype(float)
    r = seeds.paired(ref, mine, ref_steps, steps, n_boot=2000)
    assert r["diffs"] == pytest.approx(list(mine - ref)) and r["diff"] == pytest.approx((mine - ref).mean())
    assert r["diff_ci"] == pytest.approx(list(paired_interval(mine - ref, n=2000)))
    ratio = lambda p: p[:, 0].mean() / max(p[:, 1].mean(), 1e-9)
    assert r["speedup"] == pytest.approx(ref_steps.mean() / steps.mean())
    assert r["speedup_ci"] == pytest.approx(list(bootstrap_interval(ratio, np.stack([ref_steps, steps], 1), n=2000)))
    assert "speedup" not in seeds.paired(ref, mine)  # no steps: the accuracy reading only
    with pytest.raises(ValueError, match="one length"):
        seeds.paired(ref, mine[:3])
    with pytest.raises(ValueError, match="at least 2 seeds"):
        seeds.resamples(1)


def test_seed_sets_must_not_share_a_seed():
    assert seeds.disjoint([{"name": "a", "seeds": [3, 1]}, {"name": "b", "seeds": [7]}]) == [1, 3, 7]
    with pytest.raises(ValueError, match="seed 3 is in both 'a' and 'b'"):
        seeds.disjoint([{"name": "a", "seeds": [3]}, {"name": "b", "seeds": [3, 4]}])


def test_without_extreme_drops_the_seed_farthest_from_zero():
    r = seeds.paired([0.0] * 5, [0.01, 0.02, -0.13, 0.0, 0.01], n_boot=500)
    x = seeds.without_extreme(r, [300, 301, 302, 303, 304], n_boot=500)
    assert (x["seed"], x["diff_of_seed"]) == (302, pytest.approx(-0.13)) and x["diff"] == pytest.approx(0.01)
    with pytest.raises(ValueError, match="3 or more seeds"):
        seeds.without_extreme(seeds.paired([0, 0], [1, 1]), [1, 2])
