"""Does credit pay? Steps to a target accuracy over seeds, with bootstrap intervals, and the
share of the oracle's gain that a method recovers.

The question is asked of `oar_lite.compare` records (every method trained from the same
model with the same seeds, so seed s gives every method the same prompts at every step):

- steps to target (`oar_lite.report.steps_to_target`): per run, the first evaluated step
  whose held-out accuracy is at least the target. A run that never gets there is censored
  at ``budget + eval_every`` (a lower bound on its true value, so the comparison is
  conservative for whoever reaches it) and counted in ``censored``.
- a 95% bootstrap interval of each method's mean over seeds (seeds resampled with
  replacement), and of GRPO's mean divided by the method's mean (the speed-up), with
  seeds resampled *jointly* across methods (the pairing by prompts is kept);
- the recovered fraction: ``(S_grpo - S_method) / (S_grpo - S_oracle)``, the share of the
  oracle's steps saved that the method also saves (1: as good as the oracle; 0: no better
  than GRPO; negative: worse), with its paired bootstrap interval. Meaningless when the
  oracle saves nothing; then it is ``None``.

`learning_table` returns all of it as plain numbers; the benchmark
``benchmarks/credit_regime.py`` writes them next to the settings.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

# Re-exported from `oar_lite.report`, which holds them: notebook 07 calls regime.intervals_overlap.
from .report import bootstrap_interval, intervals_overlap, steps_to_target  # noqa: F401


def learning_table(records: Sequence[dict], *, target: float, methods: Sequence[str] | None = None,
                   reference: str = "uniform", oracle: str = "oracle", max_step: int | None = None,
                   n_boot: int = 10_000) -> dict:
    """Steps to ``target`` per method over seeds, with intervals, speed-up and recovered fraction.

    Args:
        records: `oar_lite.compare` records (``type`` "eval" with ``method``, ``seed``,
            ``step``, ``eval_accuracy``; "train" with ``step``).
        target: the held-out accuracy to reach.
        methods: which methods, in order (default: all in the records).
        reference: GRPO's method name; oracle: the oracle's.
        max_step: the step budget: evaluations after it are ignored (a run trained longer
            is read as if it had stopped there), and runs that miss the target are
            censored at ``max_step + eval_every``. Default: each run's own last step.

    Returns:
        ``{"target", "seeds", "methods": {method: {"steps": [per seed], "reached", "censored",
        "mean", "ci", "final_accuracy", "final_ci", "speedup", "speedup_ci",
        "recovered", "recovered_ci"}}}``.
    """
    from .plots import by_method_and_seed

    if max_step is not None:
        records = [r for r in records if r.get("type") != "eval" or r["step"] <= max_step]
    evals = by_method_and_seed(records, "eval")
    if reference not in evals:
        raise ValueError(f"the records hold no {reference!r} runs to compare with; got {sorted(evals)}")
    methods = list(methods) if methods else list(evals)
    seeds = sorted(set.intersection(*(set(evals[m]) for m in methods if m in evals)))
    if len(seeds) < 2:
        raise ValueError(f"need at least 2 seeds shared by every method, got {seeds}")
    steps, finals, reached = {}, {}, {}
    for m in methods:
        if m not in evals:
            continue
        rows = []
        for s in seeds:
            ev = evals[m][s]
            last = ev[-1]["step"]
            every = ev[-1]["step"] - ev[-2]["step"] if len(ev) > 1 else 1
            rows.append(steps_to_target(ev, target, censor=last + every))
        steps[m] = np.array([r[0] for r in rows])
        reached[m] = [r[1] for r in rows]
        finals[m] = np.array([evals[m][s][-1]["eval_accuracy"] for s in seeds])
    mean = lambda x: float(np.mean(x))
    out = {}
    for m in steps:
        pair = np.stack([steps[reference], steps[m]], axis=1)  # [S, 2]: GRPO, method
        entry = {
            "steps": steps[m].tolist(),
            "reached": int(sum(reached[m])),
            "censored": int(len(seeds) - sum(reached[m])),
            "mean": mean(steps[m]),
            "ci": bootstrap_interval(np.mean, steps[m][:, None], n=n_boot),
            "final_accuracy": mean(finals[m]),
            "final_ci": bootstrap_interval(np.mean, finals[m][:, None], n=n_boot),
            "speedup": mean(steps[reference]) / mean(steps[m]) if mean(steps[m]) > 0 else None,
            "speedup_ci": bootstrap_interval(lambda p: p[:, 0].mean() / max(p[:, 1].mean(), 1e-9), pair, n=n_boot),
            "recovered": None,
            "recovered_ci": None,
        }
        if oracle in steps and m not in (reference, oracle):
            trio = np.stack([steps[reference], steps[oracle], steps[m]], axis=1)
            saved = mean(steps[reference]) - mean(steps[oracle])
            if saved > 0:
                entry["recovered"] = (mean(steps[reference]) - mean(steps[m])) / saved

                def fraction(t):
                    gain = t[:, 0].mean() - t[:, 1].mean()
                    return (t[:, 0].mean() - t[:, 2].mean()) / gain if gain > 0 else np.nan

                entry["recovered_ci"] = bootstrap_interval(fraction, trio, n=n_boot)
        out[m] = entry
    return {"target": target, "seeds": seeds, "methods": out}
