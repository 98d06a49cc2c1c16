"""Does credit pay? Steps to a target accuracy over seeds, with bootstrap intervals, and the
share of the oracle's gain that a method recovers (notebook 06).

Both tables read `oar_lite.lab.compare` records in which every method trained from the same model
with the same seeds, so seed s gives every method the same prompts and the seeds pair the
methods: `learning_table` with a target, `accuracy_area_table` without one (the mean
held-out accuracy over a run). ``benchmarks/credit_regime.py`` writes them to `RESULTS_DIR`.
"""
from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Sequence

import numpy as np

from .report import by_method_and_seed, steps_to_target
from . import stats
from .stats import bootstrap_interval

RESULTS_DIR = Path(str(resources.files(__package__) / "data" / "when_credit_matters"))
"""The measured results notebook 06 reads (written by ``benchmarks/credit_regime.py`` and
``benchmarks/gradient_quality.py``); package data, so a pip or Colab install has them too."""


def _paired_runs(records: Sequence[dict], methods: Sequence[str] | None, reference: str):
    """``(evals, methods, seeds)``: eval records by method and seed, the methods asked for
    (default: all) that have runs, and the seeds every one of them ran."""
    evals = by_method_and_seed(records, "eval")
    if reference not in evals:
        raise ValueError(f"the records hold no {reference!r} runs to compare with; got {sorted(evals)}")
    methods = [m for m in (list(methods) if methods else list(evals)) if m in evals]
    seeds = sorted(set.intersection(*(set(evals[m]) for m in methods)))
    if len(seeds) < 2:
        raise ValueError(f"need at least 2 seeds shared by every method, got {seeds}")
    return evals, methods, seeds


def learning_table(records: Sequence[dict], *, target: float, methods: Sequence[str] | None = None,
                   reference: str = "uniform", oracle: str = "oracle", max_step: int | None = None,
                   n_boot: int = 10_000) -> dict:
    """Steps to ``target`` per method over seeds, with intervals, speed-up and recovered fraction.

    Steps to target: `oar_lite.lab.report.steps_to_target` (a run that never reaches it is censored
    at its last step + ``eval_every``). Intervals: 95% bootstrap over seeds,
    resampled jointly across methods for the speed-up (GRPO's mean / the method's) and the
    recovered fraction ``(S_grpo - S_method) / (S_grpo - S_oracle)`` (1: as good as the
    oracle, 0: no better than GRPO; None when the oracle saves nothing).

    Args:
        records: `oar_lite.lab.compare` records (``type`` "eval" with ``method``, ``seed``,
            ``step``, ``eval_accuracy``; "train" with ``step``).
        target: the held-out accuracy to reach.
        methods: which methods, in order (default: all in the records).
        reference, oracle: GRPO's and the oracle's method names; n_boot: bootstrap resamples.
        max_step: the step budget: a run trained longer is read as if it had stopped
            there (default: each run's own last step).

    Returns:
        ``{"target", "seeds", "methods": {method: {"steps": [per seed], "reached", "censored",
        "mean", "ci", "final_accuracy", "final_ci", "speedup", "speedup_ci",
        "recovered", "recovered_ci"}}}``.
    """
    if max_step is not None:
        records = [r for r in records if r.get("type") != "eval" or r["step"] <= max_step]
    evals, methods, seeds = _paired_runs(records, methods, reference)
    steps, finals, reached = {}, {}, {}
    for m in methods:
        rows = [steps_to_target(evals[m][s], target) for s in seeds]
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
            "recovered": None, "recovered_ci": None,
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


def accuracy_area_table(records: Sequence[dict], *, methods: Sequence[str] | None = None,
                        reference: str = "uniform", oracle: str = "oracle", max_step: int | None = None,
                        n_boot: int = 10_000) -> dict:
    """The mean held-out accuracy over each run's evaluations, paired against GRPO.

    A threshold-free reading of the same runs as `learning_table`: per run, the mean of
    ``eval_accuracy`` at steps 1..``max_step`` (step 0, the same model for every method, left
    out), the area under the learning curve divided by its length. Every run must have been
    evaluated at the same steps (else ValueError), so the means compare.

    Args:
        records, methods, reference, oracle, n_boot: as `learning_table`.
        max_step: evaluations after this step are ignored (default: all).

    Returns:
        ``{"seeds", "steps" (the evaluated steps used), "methods": {method: {"area": [per
        seed], "mean", "ci", "diff" (mean of method - reference, paired by seed),
        "diff_ci", "recovered", "recovered_ci"}}}``; ``recovered`` = diff / the oracle's
        diff (None for the reference and the oracle, or when the oracle gains nothing).
    """
    evals, methods, seeds = _paired_runs(records, methods, reference)
    keep = lambda r: r["step"] > 0 and (max_step is None or r["step"] <= max_step)
    steps = [r["step"] for r in evals[reference][seeds[0]] if keep(r)]
    if not steps:
        raise ValueError(f"no evaluation after step 0{'' if max_step is None else f' and up to step {max_step}'}")
    area = {}
    for m in methods:
        rows = []
        for s in seeds:
            ev = [r for r in evals[m][s] if keep(r)]
            if [r["step"] for r in ev] != steps:
                raise ValueError(f"{m!r} seed {s} was evaluated at steps {[r['step'] for r in ev]}, expected {steps} "
                                 f"like {reference!r} seed {seeds[0]}: areas over different steps do not compare")
            rows.append(float(np.mean([r["eval_accuracy"] for r in ev])))
        area[m] = np.array(rows)
    out = {}
    for m in methods:
        diff = area[m] - area[reference]  # [S], paired by seed
        entry = {"area": area[m].tolist(), "mean": float(area[m].mean()),
                 "ci": bootstrap_interval(np.mean, area[m][:, None], n=n_boot),
                 "diff": float(diff.mean()), "diff_ci": stats.paired_interval(diff, n=n_boot),
                 "recovered": None, "recovered_ci": None}
        if oracle in area and m not in (reference, oracle):
            gain = area[oracle] - area[reference]
            if gain.mean() > 0:
                entry["recovered"] = float(diff.mean() / gain.mean())
                pair = np.stack([diff, gain], axis=1)  # [S, 2]: seeds resampled jointly
                entry["recovered_ci"] = bootstrap_interval(
                    lambda p: p[:, 0].mean() / p[:, 1].mean() if p[:, 1].mean() > 0 else np.nan, pair, n=n_boot)
        out[m] = entry
    return {"seeds": seeds, "steps": steps, "methods": out}



# ----------------------------------------------------------------------------- does credit pay?

PAYS_SPEEDUP = 1.5
"""The project's bar: a method pays when it reaches the target at least this much faster than
GRPO, the 95% interval of its speed-up over the same seeds above 1 (`oar_lite.lab.stats.versus`,
the one verdict rule), on at least `stats.SCREEN_SEEDS` seeds (fewer: a screen)."""


def pays(table: dict, method: str = "oracle") -> bool:
    """Whether ``method`` meets the bar in a `learning_table`: a speed-up of at least
    `PAYS_SPEEDUP` whose paired interval lies above 1 (`stats.versus`)."""
    m = table["methods"][method]
    return (m["speedup"] is not None and m["speedup"] >= PAYS_SPEEDUP
            and stats.versus(m["speedup_ci"], seeds=len(table["seeds"]), no_effect=1.0) == stats.ABOVE)


def same_settings(a: dict, b: dict) -> bool:
    """Whether two regime entries (``regimes.json``) trained with the same batch, boost,
    learning rate, digits and model."""
    keys = ("prompts_per_step", "group_size", "boost", "learning_rate", "digits")
    model = lambda e: Path(e["settings"].get("model_dir") or "toy-model").name  # the shipped model moved folders
    return all(a["settings"].get(k) == b["settings"].get(k) for k in keys) and model(a) == model(b)


def superseded(name: str, regimes: dict) -> str | None:
    """A later entry with the same settings and more seeds, if any (its verdict is the one to read)."""
    e = regimes[name]
    return next((n for n, f in regimes.items() if n != name and same_settings(e, f) and "oracle" in f["table"]["methods"]
                 and len(f["table"]["seeds"]) > len(e["table"]["seeds"])), None)


def oracle_regimes(regimes: dict) -> list[str]:
    """The entries that trained the oracle themselves (reused oracle runs listed once)."""
    return [n for n, e in regimes.items() if "oracle" in e["table"]["methods"]
            and "oracle" not in e.get("reused", {}).get("methods", [])]


# ----------------------------------------------------------------------------- is the learner noise-limited?

def batch_size_table(runs: dict[int, Sequence[dict]], *, target: float, group_size: int, max_step: int,
                     method: str = "uniform", n_boot: int = 10_000) -> dict:
    """One method (GRPO) at several prompts per step, read per step and per completion sampled.

    A bigger batch removes gradient noise, which is all that credit assignment can remove
    (at most its reward-irrelevant share): if doubling the batch does not speed learning per
    step, no credit method can. The runs of the smallest batch are the reference; seed s
    pairs the batch sizes (the same initial model, other prompts).

    Args:
        runs: ``{prompts per step: compare records}`` (those of ``method`` are read).
        target, max_step, n_boot: as `learning_table` (``max_step``: the runs' step budget).
        group_size: completions per prompt, for the per-completion reading.

    Returns:
        ``{"prompts", "reference", "seeds", "steps" (`learning_table`, one row per batch size,
        named "P prompts"), "area" (`accuracy_area_table` over steps 1..max_step),
        "per_completion": {"budget" (completions of the reference's whole run),
        "rows": {name: {"completions_to_target" (mean over seeds, censored runs at their
        censored step), "area" (per seed, mean accuracy over the evaluations within the
        budget), "mean", "diff", "diff_ci", "steps" (the evaluated steps within it)}}}}``.
    """
    if len(runs) < 2:
        raise ValueError(f"need runs at 2 or more batch sizes, got {sorted(runs)}")
    names = {p: f"{p} prompts" for p in sorted(runs)}
    records = [{**r, "method": names[p]} for p, recs in runs.items() for r in recs if r.get("method") == method]
    ref = names[min(runs)]
    steps = learning_table(records, target=target, reference=ref, oracle="", max_step=max_step, n_boot=n_boot)
    area = accuracy_area_table(records, reference=ref, oracle="", max_step=max_step, n_boot=n_boot)
    seeds = steps["seeds"]
    evals = by_method_and_seed(records, "eval")
    budget = max_step * min(runs) * group_size
    rows, ref_area = {}, None
    for p in sorted(runs):
        within = lambda r: 0 < r["step"] and r["step"] * p * group_size <= budget
        per_seed = []
        for s in seeds:
            ev = [r for r in evals[names[p]][s] if within(r)]
            if not ev:
                raise ValueError(f"{names[p]} seed {s} has no evaluation within {budget} completions")
            per_seed.append(float(np.mean([r["eval_accuracy"] for r in ev])))
        per_seed = np.array(per_seed)
        ref_area = per_seed if ref_area is None else ref_area
        diff = per_seed - ref_area
        rows[names[p]] = {"completions_to_target": float(np.mean(steps["methods"][names[p]]["steps"])) * p * group_size,
                          "area": per_seed.tolist(), "mean": float(per_seed.mean()), "diff": float(diff.mean()),
                          "diff_ci": stats.paired_interval(diff, n=n_boot),
                          "steps": [r["step"] for r in evals[names[p]][seeds[0]] if within(r)]}
    return {"prompts": sorted(runs), "reference": ref, "seeds": seeds, "steps": steps, "area": area,
            "per_completion": {"budget": budget, "rows": rows}}


def batch_equivalent(diffs: dict[int, float], gain: float) -> float:
    """The prompts per step at which GRPO would gain ``gain`` over its smallest batch.

    ``diffs``: ``{prompts per step: mean-accuracy difference over the smallest batch}`` (the
    smallest's is 0), from `batch_size_table`; ``gain``: a method's difference over GRPO at
    the smallest batch (e.g. the oracle's). Linear in log2(prompts) between the measured
    batch sizes, the curve made monotone first (a running maximum: a bigger batch is credited
    no less than a smaller one gave). Returns the smallest batch when ``gain`` <= 0 and
    ``inf`` when it exceeds every measured batch's difference.
    """
    sizes = sorted(diffs)
    if len(sizes) < 2 or diffs[sizes[0]] != 0:
        raise ValueError(f"need differences at 2 or more batch sizes, 0 at the smallest; got {diffs}")
    curve = np.maximum.accumulate([diffs[p] for p in sizes])
    if gain <= 0:
        return float(sizes[0])
    if gain > curve[-1]:
        return float("inf")
    i = int(np.argmax(curve >= gain))  # the first batch size whose difference reaches the gain (i >= 1)
    lo, hi = np.log2(sizes[i - 1]), np.log2(sizes[i])
    f = (gain - curve[i - 1]) / (curve[i] - curve[i - 1])
    return float(2 ** (lo + f * (hi - lo)))
