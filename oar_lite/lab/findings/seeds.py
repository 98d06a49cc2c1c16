"""Readings pooled over every seed set: a study run on several sets of seeds (a pre-registered
set, a confirmatory run, an external replication) with the same settings is one study, and its
answer is the reading over all of their seeds, paired by seed; each set on its own is one draw
of it (issues 39 and 48). Used by the positive control (`positive`) and the batch-size study
(`batch`)."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ..stats import percentile_interval


def resamples(n_seeds: int, n_boot: int = 10_000, seed: int = 0) -> np.ndarray:
    """``[n_boot, n_seeds]`` seed indices drawn with replacement: the draws `stats.bootstrap_interval`
    makes with the same ``seed``, so the intervals below equal its intervals (vectorised here: a
    pooled study reads dozens of them)."""
    if n_seeds < 2:
        raise ValueError(f"a bootstrap interval needs at least 2 seeds, got {n_seeds}")
    return np.random.default_rng(seed).integers(0, n_seeds, size=(n_boot, n_seeds))


def disjoint(sets: Sequence[dict]) -> list[int]:
    """The seeds of ``sets`` (``[{"name", "seeds"}]``), sorted; ValueError when two sets share a
    seed (it would count twice)."""
    seen: dict[int, str] = {}
    for st in sets:
        for seed in st["seeds"]:
            if seed in seen:
                raise ValueError(f"seed {seed} is in both {seen[seed]!r} and {st['name']!r}: pooled seeds must differ")
            seen[seed] = st["name"]
    return sorted(seen)


def paired(reference_area: Sequence[float], area: Sequence[float], reference_steps: Sequence[float] | None = None,
           steps: Sequence[float] | None = None, *, n_boot: int = 10_000) -> dict:
    """A method against the reference on the same seeds: the mean held-out accuracy over the run,
    method - reference per seed (``diffs``), its mean and 95% bootstrap interval over seeds
    (`stats.paired_interval`); with steps to the target, both means and the speed-up (the
    reference's mean steps / the method's) with its interval, seeds resampled jointly.

    Args:
        reference_area, area: ``[S]`` per seed, in the same seed order.
        reference_steps, steps: ``[S]`` steps to the target per seed (or None).

    Returns:
        ``{"seeds_n", "diffs", "diff", "diff_ci"}``, and with steps ``"grpo_steps", "steps",
        "speedup", "speedup_ci"``.
    """
    ref, mine = np.asarray(reference_area, dtype=float), np.asarray(area, dtype=float)
    if ref.shape != mine.shape or ref.ndim != 1:
        raise ValueError(f"per-seed readings must be two [S] lists of one length, got {ref.shape} and {mine.shape}")
    diffs = mine - ref
    idx = resamples(len(diffs), n_boot)
    out = {"seeds_n": len(diffs), "diffs": diffs.tolist(), "diff": float(diffs.mean()),
           "diff_ci": list(percentile_interval(diffs[idx].mean(axis=1)))}
    if reference_steps is not None and steps is not None:
        grpo, method = np.asarray(reference_steps, dtype=float), np.asarray(steps, dtype=float)
        if grpo.shape != diffs.shape or method.shape != diffs.shape:
            raise ValueError(f"steps for {grpo.shape} and {method.shape} seeds against accuracies for {diffs.shape}")
        ratios = grpo[idx].mean(axis=1) / np.maximum(method[idx].mean(axis=1), 1e-9)
        out.update(grpo_steps=float(grpo.mean()), steps=float(method.mean()),
                   speedup=float(grpo.mean() / max(method.mean(), 1e-9)),
                   speedup_ci=list(percentile_interval(ratios[np.isfinite(ratios)])))
    return out


def without_extreme(reading: dict, seeds: Sequence[int], *, n_boot: int = 10_000) -> dict:
    """The seed whose difference lies farthest from 0 and the reading without it: how much one
    seed carries a pooled verdict (a sensitivity reading, reported as such, never a verdict).
    ``{"seed", "diff_of_seed", "diff", "diff_ci"}``."""
    diffs = np.asarray(reading["diffs"], dtype=float)
    if len(diffs) != len(seeds) or len(diffs) < 3:
        raise ValueError(f"need the per-seed differences of 3 or more seeds with their seeds, got {len(diffs)} and "
                         f"{len(seeds)}")
    i = int(np.argmax(np.abs(diffs)))
    rest = np.delete(diffs, i)
    return {"seed": int(seeds[i]), "diff_of_seed": float(diffs[i]), "diff": float(rest.mean()),
            "diff_ci": list(percentile_interval(rest[resamples(len(rest), n_boot)].mean(axis=1)))}
