"""`oar_lite.lab.stats`: means and intervals, the bootstrap, binomial proportions and ranking metrics."""
import math

import numpy as np
import pytest
import torch

from oar_lite.lab import stats


def test_roc_auc_handles_ties_exactly():
    pos = torch.tensor([1, 1, 0, 0, 0], dtype=torch.bool)
    assert stats.roc_auc(torch.ones(5), pos) == 0.5
    assert stats.roc_auc(torch.tensor([5.0, 4, 3, 2, 1]), pos) == 1.0
    assert stats.roc_auc(torch.tensor([1.0, 2, 3, 4, 5]), pos) == 0.0
    # pairs (pos, neg): 3 vs {3,1,0}: 0.5+1+1; 2 vs {3,1,0}: 0+1+1 -> 4.5 / 6
    assert stats.roc_auc(torch.tensor([3.0, 2, 3, 1, 0]), pos) == pytest.approx(0.75)
    neg = torch.tensor([0, 0, 0, 1, 1], dtype=torch.bool)  # leave token 2 out
    assert stats.roc_auc(torch.tensor([3.0, 2, 9, 1, 0]), pos, neg) == 1.0
    assert math.isnan(stats.roc_auc(torch.ones(3), torch.zeros(3, dtype=torch.bool)))
    with pytest.raises(ValueError, match="NaN"):
        stats.roc_auc(torch.tensor([float("nan"), 1.0]), torch.tensor([True, False]))


def test_precision_at_k_breaks_ties_in_expectation():
    pos = torch.tensor([1, 0, 1, 0, 0, 0], dtype=torch.bool)
    assert stats.precision_at_k(torch.ones(6), pos) == pytest.approx(2 / 6)
    assert stats.precision_at_k(torch.tensor([9.0, 0, 8, 1, 2, 3]), pos) == 1.0
    assert stats.precision_at_k(torch.tensor([9.0, 5, 1, 5, 0, 0]), pos) == pytest.approx(0.5)
    # top-2 = {9, one of three 5s}; the tied slot is a positive with probability 1/3
    assert stats.precision_at_k(torch.tensor([9.0, 5, 5, 5, 0, 0]), pos) == pytest.approx((1 + 1 / 3) / 2)


def test_rank_agreement():
    a = torch.tensor([1.0, 2, 3, 4])
    assert stats.rank_agreement(a, a * 10) == pytest.approx(1.0)
    assert stats.rank_agreement(a, -a) == pytest.approx(-1.0)


def test_standard_error_and_wilson_interval():
    se = stats.mc_standard_error([8, 0, 16, 4], 16)
    assert se.tolist() == pytest.approx([0.125, 0.0, 0.0, math.sqrt(0.25 * 0.75 / 16)])
    low, high = stats.wilson_interval([0, 16, 16], [16, 16, 32])
    assert low[0] == 0.0 and high[0] == pytest.approx(0.1936, abs=1e-4)  # non-zero width at p = 0
    assert high[1] == 1.0 and low[1] == pytest.approx(1 - 0.1936, abs=1e-4)
    assert 0.5 - 1.96 * 0.0884 < low[2] < 0.5 < high[2] < 0.5 + 1.96 * 0.0884  # at p = 1/2 inside p +- 1.96 SE
    assert high[2] - 0.5 == pytest.approx(0.5 - low[2])  # symmetric at p = 1/2
    with pytest.raises(ValueError, match="counts"):
        stats.mc_standard_error([17], 16)


def test_bootstrap_interval_brackets_the_mean_and_needs_two_seeds():
    x = np.array([1.0, 2.0, 3.0, 4.0])
    lo, hi = stats.bootstrap_interval(np.mean, x[:, None], n=2000)
    assert 1.0 <= lo < 2.5 < hi <= 4.0
    assert stats.bootstrap_interval(np.mean, np.array([[2.0], [2.0]]), n=100) == (2.0, 2.0)
    with pytest.raises(ValueError, match="at least 2 seeds"):
        stats.bootstrap_interval(np.mean, x[:1, None])


def test_versus_is_the_one_verdict_rule():
    # Each outcome is reachable; the interval decides, against 0 for a difference and 1 for a ratio.
    assert stats.versus((0.01, 0.05)) == stats.ABOVE
    assert stats.versus((-0.05, -0.01)) == stats.BELOW
    assert stats.versus((-0.01, 0.05)) == stats.INCLUDES
    assert stats.versus((0.0, 0.05)) == stats.INCLUDES  # touching no effect is not excluding it
    assert stats.versus((1.05, 1.8), no_effect=1.0) == stats.ABOVE
    assert stats.versus((0.8, 1.2), no_effect=1.0) == stats.INCLUDES
    assert stats.versus((0.5, 0.9), no_effect=1.0) == stats.BELOW
    assert stats.versus(None, seeds=1) == stats.ONE_SEED  # one seed decides nothing, whatever it reads
    assert stats.versus((0.1, 0.2), seeds=2) == stats.ABOVE
    assert stats.is_screen(stats.SCREEN_SEEDS - 1) and not stats.is_screen(stats.SCREEN_SEEDS)
    for bad in ((0.2, 0.1), (float("nan"), 1.0), None):
        with pytest.raises(ValueError, match="interval"):
            stats.versus(bad)
    with pytest.raises(ValueError, match="seeds"):
        stats.versus((0.1, 0.2), seeds=0)


def test_paired_interval_decides_where_a_seed_disagrees():
    # Six seeds, one slightly below GRPO: the old rule (every paired seed agreeing) said "not
    # distinguishable"; the paired interval over seeds lies above 0.
    diffs = [0.06, 0.05, 0.07, 0.05, 0.06, -0.01]
    low, high = stats.paired_interval(diffs)
    assert 0 < low < np.mean(diffs) < high
    assert stats.versus((low, high), seeds=len(diffs)) == stats.ABOVE
    # A large spread around a positive mean: the interval holds 0.
    assert stats.versus(stats.paired_interval([0.3, -0.2, 0.25, -0.15, 0.1])) == stats.INCLUDES
    # Two seeds: the interval is their range, so both must agree in sign.
    assert stats.paired_interval([0.1, 0.3]) == (0.1, 0.3)


def test_mean_std_and_normal_interval_by_hand():
    xs = [1.0, 2.0, 3.0, 6.0]
    assert stats.mean(xs) == 3.0
    assert stats.std(xs) == pytest.approx(math.sqrt((4 + 1 + 0 + 9) / 3))  # n - 1
    assert stats.ci95(xs) == pytest.approx(1.96 * stats.std(xs) / 2)
    assert all(math.isnan(v) for v in (stats.mean([]), stats.std([1.0]), stats.ci95([1.0])))


def test_crossed_bootstrap_covers_both_sources_of_chance():
    assert stats.crossed_bootstrap(np.full((3, 5), 0.2)) == pytest.approx((0.2, 0.2))
    rng = np.random.default_rng(0)
    seeds_only = np.repeat(rng.normal(size=(4, 1)), 50, axis=1)  # all variation between seeds
    low, high = stats.crossed_bootstrap(seeds_only)
    assert high - low > 0.3  # resampling problems alone would give a zero-width interval
    with pytest.raises(ValueError, match="seeds, problems"):
        stats.crossed_bootstrap(np.zeros(5))


def test_variance_components_recover_a_simulated_design_and_project_the_crossed_interval():
    rng = np.random.default_rng(0)
    S, N = 40, 400
    values = rng.normal(0, 0.3, (S, 1)) + rng.normal(0, 0.5, (1, N)) + rng.normal(0, 0.2, (S, N))
    c = stats.variance_components(values)
    assert c["seed"] == pytest.approx(0.09, rel=0.5) and c["problem"] == pytest.approx(0.25, rel=0.2)
    assert c["residual"] == pytest.approx(0.04, rel=0.1)
    # the projection matches the crossed bootstrap's own width on data of that design
    small = values[:8, :96]
    low, high = stats.crossed_bootstrap(small, n=2000)
    projected = stats.crossed_half_width(stats.variance_components(small), 8, 96)
    assert projected == pytest.approx((high - low) / 2, rel=0.35)
    # more seeds narrow it, down to the problems' floor
    widths = [stats.crossed_half_width(c, s, 96) for s in (2, 8, 10_000)]
    assert widths[0] > widths[1] > widths[2] >= 1.96 * math.sqrt(c["problem"] / 96) * 0.999
    with pytest.raises(ValueError, match="seeds, problems"):
        stats.variance_components(np.zeros((1, 5)))
