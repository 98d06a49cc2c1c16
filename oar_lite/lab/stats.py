"""Statistics the project reports: means with a 95% interval over seeds or completions,
percentile bootstrap intervals (over seeds, or seeds and problems crossed), the one verdict
rule every sentence comparing a method with GRPO follows (`versus`), binomial proportions
(Monte-Carlo estimates) and how well scores rank tokens (ROC-AUC, precision@k, Spearman).
Plain numbers in, plain numbers out.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import torch


# ----------------------------------------------------------------------------- means and intervals

def mean(xs: Sequence[float]) -> float:
    """The mean, NaN for no values."""
    return float(sum(xs) / len(xs)) if xs else float("nan")


def std(xs: Sequence[float]) -> float:
    """The sample standard deviation (n - 1), NaN for fewer than 2 values."""
    m = mean(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1)) if len(xs) >= 2 else float("nan")


def ci95(xs: Sequence[float]) -> float:
    """Half-width of the normal 95% interval of the mean, 1.96 std / sqrt(n) (NaN for n < 2)."""
    return 1.96 * std(xs) / math.sqrt(len(xs)) if len(xs) >= 2 else float("nan")


def percentile_interval(values: np.ndarray, level: float = 0.95) -> tuple[float, float]:
    """``(low, high)``: the central ``level`` of ``values`` (e.g. a bootstrap's resampled
    statistics), between their ``(1 - level) / 2`` and ``1 - (1 - level) / 2`` quantiles."""
    alpha = (1 - level) / 2
    return float(np.quantile(values, alpha)), float(np.quantile(values, 1 - alpha))


def bootstrap_interval(stat, samples: np.ndarray, *, n: int = 10_000, seed: int = 0, level: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap interval of ``stat(samples[idx])`` over rows resampled with
    replacement (``samples: [S, ...]``, one row per seed; columns stay together)."""
    samples = np.asarray(samples, dtype=float)
    if len(samples) < 2:
        raise ValueError(f"a bootstrap interval needs at least 2 seeds, got {len(samples)}")
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(samples), size=(n, len(samples)))
    values = np.array([stat(samples[i]) for i in idx], dtype=float)
    return percentile_interval(values[np.isfinite(values)], level)


def crossed_bootstrap(values: np.ndarray, *, n: int = 4000, seed: int = 0, level: float = 0.95) -> tuple[float, float]:
    """Percentile interval of the mean of ``values [S, N]`` (seeds x problems) when both the
    seeds and the problems are resampled with replacement (the same problems for every
    seed, as they are in the runs): it counts both sources of chance."""
    values = np.asarray(values, dtype=float)
    if values.ndim != 2 or values.shape[0] < 1 or values.shape[1] < 2:
        raise ValueError(f"values must be [seeds, problems] with >= 2 problems, got shape {values.shape}")
    rng = np.random.default_rng(seed)
    S, N = values.shape
    rows = rng.integers(0, S, size=(n, S))
    cols = rng.integers(0, N, size=(n, N))
    means = np.array([values[r][:, c].mean() for r, c in zip(rows, cols)])
    return percentile_interval(means, level)


def crossed_bootstrap_of(stat, *arrays: np.ndarray, n: int = 4000, seed: int = 0,
                         level: float = 0.95) -> list[tuple[float, float]]:
    """Percentile intervals of ``stat(*arrays)`` (one float or a 1-D array of k statistics)
    when seeds and problems are resampled as `crossed_bootstrap` does (the same draws for the
    same ``seed``: with ``stat`` a mean it gives `crossed_bootstrap`'s interval). For a ratio
    (accuracy among the answers stated): ``arrays`` are ``[S, N]`` each, resampled together.
    Returns one ``(low, high)`` per statistic; resamples where a statistic is not finite (a
    ratio over nothing) are left out of its interval, which is NaN when none is left."""
    arrays = [np.asarray(a, dtype=float) for a in arrays]
    if not arrays or arrays[0].ndim != 2 or arrays[0].shape[0] < 1 or arrays[0].shape[1] < 2:
        raise ValueError(f"expected [seeds, problems] arrays with >= 2 problems, got shapes {[a.shape for a in arrays]}")
    if any(a.shape != arrays[0].shape for a in arrays):
        raise ValueError(f"the arrays must share one [seeds, problems] shape, got {[a.shape for a in arrays]}")
    rng = np.random.default_rng(seed)
    S, N = arrays[0].shape
    rows = rng.integers(0, S, size=(n, S))
    cols = rng.integers(0, N, size=(n, N))
    values = np.array([np.atleast_1d(stat(*(a[r][:, c] for a in arrays))) for r, c in zip(rows, cols)], dtype=float)
    return [percentile_interval(v[np.isfinite(v)], level) if np.isfinite(v).any() else (math.nan, math.nan)
            for v in values.T]



def variance_components(values: np.ndarray) -> dict[str, float]:
    """Two-way random-effects variance components of ``values [S, N]`` (seeds x problems, at
    least 2 of each): ``seed`` (between seeds' means), ``problem`` (between problems' means)
    and ``residual`` (seed x problem), method-of-moments estimates, negatives set to 0."""
    values = np.asarray(values, dtype=float)
    if values.ndim != 2 or min(values.shape) < 2:
        raise ValueError(f"values must be [seeds, problems] with >= 2 of each, got shape {values.shape}")
    S, N = values.shape
    seed_means, problem_means, grand = values.mean(1), values.mean(0), values.mean()
    residual = values - seed_means[:, None] - problem_means[None, :] + grand
    e2 = float((residual ** 2).sum() / ((S - 1) * (N - 1)))
    return {"seed": max(float(seed_means.var(ddof=1)) - e2 / N, 0.0),
            "problem": max(float(problem_means.var(ddof=1)) - e2 / S, 0.0), "residual": e2}


def crossed_half_width(components: dict[str, float], seeds: int, problems: int) -> float:
    """Projected half-width of `crossed_bootstrap`'s 95% interval of the mean over ``seeds``
    seeds x ``problems`` problems, for variance components as `variance_components` gives:
    ``1.96 sqrt(seed / S + problem / N + 2 residual / (S N))`` (the crossed bootstrap counts the
    residual once through the seeds and once through the problems). The problem term does not
    shrink with more seeds: it sets the floor a study on a fixed problem set can reach."""
    if seeds < 1 or problems < 2:
        raise ValueError(f"expected seeds >= 1 and problems >= 2, got {seeds} and {problems}")
    c = components
    return 1.96 * math.sqrt(c["seed"] / seeds + c["problem"] / problems + 2 * c["residual"] / (seeds * problems))

# ----------------------------------------------------------------------------- the verdict rule

SCREEN_SEEDS = 5
"""Below this many seeds a comparison is a screen: it points the way, it decides nothing."""

ABOVE, BELOW, INCLUDES, ONE_SEED = "above", "below", "includes", "one seed"
"""The outcomes of `versus`."""


def versus(interval: Sequence[float] | None, *, no_effect: float = 0.0, seeds: int | None = None) -> str:
    """The project's one verdict rule. A method reads better or worse than GRPO only when the
    95% interval of its reading paired by seed against GRPO's (the same seed: the same prompts)
    excludes the no-effect value: 0 for a difference (`paired_interval`), 1 for a ratio such
    as a speed-up. One seed has no interval and decides nothing; below `SCREEN_SEEDS` seeds the
    comparison is a screen (`is_screen`), whatever it reads.

    Args:
        interval: ``(low, high)``, the 95% interval of the paired reading.
        no_effect: the reading of no difference.
        seeds: how many seeds were paired, when the caller has it (fewer than 2: no interval).

    Returns `ABOVE` (the interval lies above ``no_effect``), `BELOW`, `INCLUDES` (it holds
    ``no_effect``: not distinguishable) or `ONE_SEED` (``seeds < 2``; ``interval`` unread).
    """
    if seeds is not None:
        if isinstance(seeds, bool) or not isinstance(seeds, int) or seeds < 1:
            raise ValueError(f"seeds must be an int >= 1 (the seeds paired), got {seeds!r}")
        if seeds < 2:
            return ONE_SEED
    if interval is None or len(interval) != 2:
        raise ValueError(f"expected an interval (low, high), got {interval!r}")
    low, high = (float(x) for x in interval)
    if not (math.isfinite(low) and math.isfinite(high)) or low > high:
        raise ValueError(f"expected a finite interval (low, high) with low <= high, got {tuple(interval)}")
    return ABOVE if low > no_effect else BELOW if high < no_effect else INCLUDES


def is_screen(seeds: int) -> bool:
    """Whether a comparison on ``seeds`` seeds is only a screen (fewer than `SCREEN_SEEDS`)."""
    return seeds < SCREEN_SEEDS


def paired_interval(diffs: Sequence[float], *, n: int = 10_000, seed: int = 0) -> tuple[float, float]:
    """95% percentile bootstrap interval over seeds of the mean of per-seed differences
    (a method's reading minus GRPO's on the same seed); at least 2 seeds."""
    return bootstrap_interval(np.mean, np.asarray(diffs, dtype=float)[:, None], n=n, seed=seed)


# ----------------------------------------------------------------------------- binomial proportions

def _proportion(counts, k) -> tuple[torch.Tensor, torch.Tensor]:
    """``(p = counts / k, k)`` as float64 tensors, checked."""
    counts, k = torch.as_tensor(counts, dtype=torch.float64), torch.as_tensor(k, dtype=torch.float64)
    if (k < 1).any() or (counts < 0).any() or (counts > k).any():
        raise ValueError("expected 0 <= counts <= k and k >= 1")
    return counts / k, k


def mc_standard_error(counts, k) -> torch.Tensor:
    """Monte-Carlo standard error sqrt(p (1 - p) / k) of ``p = counts / k`` (0 when p is 0
    or 1: use `wilson_interval` there). ``counts`` and ``k`` broadcast."""
    p, k = _proportion(counts, k)
    return (p * (1 - p) / k).sqrt()


def wilson_interval(counts, k, z: float = 1.96) -> tuple[torch.Tensor, torch.Tensor]:
    """Wilson score interval ``(low, high)`` of a binomial proportion ``counts / k``
    (95% for ``z = 1.96``). Unlike p +- z SE it stays inside [0, 1] and has non-zero
    width when the estimate is 0 or 1."""
    p, k = _proportion(counts, k)
    centre = (p + z * z / (2 * k)) / (1 + z * z / k)
    half = z / (1 + z * z / k) * (p * (1 - p) / k + z * z / (4 * k * k)).sqrt()
    return (centre - half).clamp(min=0.0), (centre + half).clamp(max=1.0)


# ----------------------------------------------------------------------------- ranking

def roc_auc(scores: torch.Tensor, positive: torch.Tensor, negative: torch.Tensor | None = None) -> float:
    """ROC-AUC of ``scores [R]`` for the ``positive [R]`` (bool) against the ``negative [R]``
    tokens (default: every non-positive): P(a random positive scores higher than a random
    negative) + P(equal) / 2 (Mann-Whitney); NaN when there is no positive or no negative."""
    scores, positive, negative = _check_metric_inputs(scores, positive, negative)
    pos, neg = scores[positive].double(), scores[negative].double()
    if pos.numel() == 0 or neg.numel() == 0:
        return float("nan")
    greater = (pos[:, None] > neg[None, :]).double().mean()
    equal = (pos[:, None] == neg[None, :]).double().mean()
    return float(greater + 0.5 * equal)


def precision_at_k(scores: torch.Tensor, positive: torch.Tensor, negative: torch.Tensor | None = None) -> float:
    """Share of positives among the k highest-scored candidates (the positives and the
    ``negative`` tokens, default all), k = number of positives; ties at the cut are broken
    at random in expectation, so constant scores give the base rate. NaN without a positive."""
    scores, positive, negative = _check_metric_inputs(scores, positive, negative)
    keep = positive | negative
    s, p = scores[keep].double(), positive[keep]
    k = int(p.sum())
    if k == 0:
        return float("nan")
    cut = s.topk(k).values[-1]
    above, tied = s > cut, s == cut
    hits = float(p[above].sum()) + (k - int(above.sum())) * float(p[tied].sum()) / int(tied.sum())
    return hits / k


def _check_metric_inputs(scores, positive, negative):
    scores = torch.as_tensor(scores)
    positive = torch.as_tensor(positive, dtype=torch.bool)
    negative = ~positive if negative is None else torch.as_tensor(negative, dtype=torch.bool)
    if scores.dim() != 1 or positive.shape != scores.shape or negative.shape != scores.shape:
        raise ValueError(f"scores, positive and negative must be 1-D of one length [R], got "
                         f"{tuple(scores.shape)}, {tuple(positive.shape)}, {tuple(negative.shape)}")
    if (positive & negative).any():
        raise ValueError("a token cannot be both positive and negative")
    if not torch.isfinite(scores).all():
        raise ValueError("scores contain NaN or infinite values")
    return scores, positive, negative


def rank_agreement(a: torch.Tensor, b: torch.Tensor) -> float:
    """Spearman rank correlation of two score vectors ``[R]`` (average ranks for ties)."""
    if a.shape != b.shape or a.dim() != 1:
        raise ValueError(f"expected two [R] score vectors, got {tuple(a.shape)} and {tuple(b.shape)}")
    ra, rb = _ranks(a.double()), _ranks(b.double())
    ra, rb = ra - ra.mean(), rb - rb.mean()
    denom = (ra.norm() * rb.norm()).item()
    return float((ra @ rb).item() / denom) if denom > 0 else float("nan")


def _ranks(x: torch.Tensor) -> torch.Tensor:
    """Average ranks (1-based), ties sharing the mean of their positions."""
    order = x.argsort()
    ranks = torch.empty_like(x)
    ranks[order] = torch.arange(1, x.numel() + 1, dtype=x.dtype)
    for v in x.unique():
        tie = x == v
        if tie.sum() > 1:
            ranks[tie] = ranks[tie].mean()
    return ranks
