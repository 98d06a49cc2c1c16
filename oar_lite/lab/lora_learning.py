"""The shipped logs of the SmolLM2 + LoRA runs (`benchmarks/smollm2_learning.py`, notebook 07):
loading them, held-out accuracy along training, and its change with intervals over seeds
*and* problems.

A log (``oar_lite/lab/data/smollm2_learning/<name>.json``) holds runs; each run has its
``method``, ``seed``, per-step ``log`` (TRL's metrics) and ``heldout`` records: at a step,
for a decoding (``greedy``, ``t1``), ``correct`` and ``answered`` per problem ``[N][samples]``. Every run
of a log answers the same N held-out problems, so runs compare problem by problem.

A run's ``settings["split"]`` rebuilds its training pool and held-out problems (`run_split`),
and its seed the prompts TRL drew from that pool at each step (`trained_indices`), so the
held-out problems whose numbers no run trained on can be told apart (`clean_heldout`). The
``answered`` records (an answer stated in the asked-for format) split a gain into stating
an answer and getting it right (`format_decomposition`).
"""
from __future__ import annotations

import functools
import json
import math
from importlib import resources
from pathlib import Path
from typing import Sequence

import numpy as np

from ..attribution import PLAIN_GRPO, display_name
from ..course.problems import heldout_split, numbers_key
from .stats import crossed_bootstrap, crossed_bootstrap_of

LOG_DIR = resources.files(__package__) / "data" / "smollm2_learning"



def load_log(name: str = "main", path: str | Path | None = None) -> dict:
    """The shipped log ``name`` (or the JSON at ``path``); FileNotFoundError lists the shipped ones.
    A log written before issue 47 names plain GRPO ``"none"``: ``python scripts/migrate_logs.py PATH``
    rewrites it with today's names (the shipped ones are)."""
    source = Path(path) if path is not None else LOG_DIR / f"{name}.json"
    if not source.is_file():
        shipped = sorted(p.name[:-5] for p in LOG_DIR.iterdir() if p.name.endswith(".json")) if LOG_DIR.is_dir() else []
        raise FileNotFoundError(f"no SmolLM2 learning log {source}; shipped logs: {shipped}")
    return json.loads(source.read_text())


def runs_of(log: dict, method: str) -> list[dict]:
    """The runs of ``method`` (``"uniform"`` is GRPO), by seed; ValueError when there is none."""
    runs = sorted((r for r in log["runs"] if r["method"] == method), key=lambda r: r["seed"])
    if not runs:
        raise ValueError(f"no run of method {method!r} in log {log.get('name')!r}; it has "
                         f"{sorted({r['method'] for r in log['runs']})}")
    return runs


def heldout_steps(run: dict, decoding: str = "greedy") -> list[int]:
    """The steps at which ``run`` was measured with ``decoding``."""
    return sorted(r["step"] for r in run["heldout"] if r["decoding"] == decoding)


def per_problem(run: dict, step: int, decoding: str = "greedy", field: str = "correct") -> np.ndarray:
    """``[N]`` each held-out problem's share of correct samples at ``step`` (``field="answered"``:
    of samples that state an answer in the asked-for format)."""
    for r in run["heldout"]:
        if r["step"] == step and r["decoding"] == decoding:
            if field not in r:
                raise ValueError(f"run {run['name']}'s {decoding!r} record at step {step} has no {field!r}; "
                                 f"it has {sorted(r)}")
            return np.array([np.mean(c) for c in r[field]], dtype=float)
    raise ValueError(f"run {run['name']} has no {decoding!r} measurement at step {step}; it has "
                     f"{heldout_steps(run, decoding)}")


def _columns(problems: Sequence[int] | None, n: int):
    """The held-out problems to keep, as an index (all ``n`` when None); checked."""
    if problems is None:
        return slice(None)
    index = [int(i) for i in problems]
    if len(index) < 2 or any(not 0 <= i < n for i in index) or len(set(index)) != len(index):
        raise ValueError(f"problems must be >= 2 distinct indices in [0, {n}) of the held-out problems, got {list(problems)}")
    return index


def heldout_change(log: dict, method: str, *, decoding: str = "greedy", start: int = 0, end: int | None = None,
                   against: str | None = None, seeds: Sequence[int] | None = None,
                   problems: Sequence[int] | None = None) -> dict:
    """Held-out accuracy gained from step ``start`` to ``end`` (default: the last measured
    step), per problem and seed, for ``method``; with ``against``, the gain of ``method`` minus
    that of ``against`` on the same seed (paired); ``seeds`` keeps only those seeds, ``problems``
    only those held-out problems (indices, e.g. `clean_heldout`'s). Returns ``{"mean", "low", "high", "seeds",
    "problems", "start_accuracy", "end_accuracy"}`` (95% crossed bootstrap, `crossed_bootstrap`)."""
    keep = (lambda rs: rs) if seeds is None else (lambda rs: [r for r in rs if r["seed"] in set(seeds)])
    runs = keep(runs_of(log, method))
    if not runs:
        raise ValueError(f"no run of {method!r} with seeds {list(seeds)}; it has {[r['seed'] for r in runs_of(log, method)]}")
    end = heldout_steps(runs[0], decoding)[-1] if end is None else end
    cols = _columns(problems, len(per_problem(runs[0], start, decoding)))

    def at(r, step):
        return per_problem(r, step, decoding)[cols]

    def gains(rs):
        return {r["seed"]: at(r, end) - at(r, start) for r in keep(rs)}

    mine = gains(runs)
    if against is not None:
        theirs = gains(runs_of(log, against))
        seeds = sorted(set(mine) & set(theirs))
        if not seeds:
            raise ValueError(f"{method} and {against} share no seed; a paired difference needs the same seeds")
        values = np.stack([mine[s] - theirs[s] for s in seeds])
    else:
        seeds = sorted(mine)
        values = np.stack([mine[s] for s in seeds])
    low, high = crossed_bootstrap(values)
    return {"mean": float(values.mean()), "low": low, "high": high, "seeds": seeds, "problems": values.shape[1],
            "start_accuracy": float(np.mean([at(r, start).mean() for r in runs])),
            "end_accuracy": float(np.mean([at(r, end).mean() for r in runs])),
            "start": start, "end": end, "decoding": decoding}


def format_decomposition(log: dict, method: str, *, decoding: str = "t1", start: int = 0, end: int | None = None,
                         seeds: Sequence[int] | None = None, problems: Sequence[int] | None = None) -> dict:
    """How ``method``'s held-out accuracy change from ``start`` to ``end`` splits into stating
    an answer at all and getting it right when one is stated.

    Accuracy is the format rate f (the share of answers stated in the asked-for format, the
    records' ``answered``) times the accuracy given format a (correct among stated: every
    correct answer is a stated one). Its change splits exactly into a format part and an
    accuracy part, each weighted by the other factor's mean over the two steps:
    ``f1 a1 - f0 a0 = (f1 - f0) (a0 + a1) / 2 + (a1 - a0) (f0 + f1) / 2``. f and a pool every
    seed and problem; intervals are 95% crossed bootstraps over seeds and problems
    (`oar_lite.lab.stats.crossed_bootstrap_of`). Returns ``{"accuracy", "format", "given_format"}``,
    each ``{"start", "end", "change", "low", "high"}`` (the interval of the change), and
    ``{"from_format", "from_accuracy"}``, each ``{"mean", "low", "high"}``, with ``"seeds"``,
    ``"problems"``, ``"decoding"``, ``"start"`` and ``"end"``."""
    runs = runs_of(log, method)
    if seeds is not None:
        runs = [r for r in runs if r["seed"] in set(seeds)]
        if not runs:
            raise ValueError(f"no run of {method!r} with seeds {list(seeds)}")
    end = heldout_steps(runs[0], decoding)[-1] if end is None else end
    cols = _columns(problems, len(per_problem(runs[0], start, decoding)))
    arrays = [np.stack([per_problem(r, step, decoding, field)[cols] for r in runs])
              for step in (start, end) for field in ("correct", "answered")]
    for c, a in (arrays[:2], arrays[2:]):
        if (c > a).any():
            raise ValueError(f"{method}: a {decoding!r} answer counted correct but not stated; the records' "
                             "'correct' must imply 'answered'")

    def stat(c0, a0, c1, a1):
        f0, f1 = a0.mean(), a1.mean()
        with np.errstate(invalid="ignore", divide="ignore"):
            g0, g1 = c0.sum() / a0.sum(), c1.sum() / a1.sum()
        return np.array([c1.mean() - c0.mean(), f1 - f0, g1 - g0, (f1 - f0) * (g0 + g1) / 2, (g1 - g0) * (f0 + f1) / 2])

    point = stat(*arrays)
    intervals = crossed_bootstrap_of(stat, *arrays)
    c0, a0, c1, a1 = arrays
    point[0] = float((c1 - c0).mean())  # as `heldout_change` computes it, so the two print alike
    with np.errstate(invalid="ignore", divide="ignore"):  # NaN when no answer was stated
        levels = {"accuracy": (c0.mean(), c1.mean()), "format": (a0.mean(), a1.mean()),
                  "given_format": (c0.sum() / a0.sum(), c1.sum() / a1.sum())}
    out = {k: {"start": float(lo), "end": float(hi), "change": float(point[i]), "low": intervals[i][0],
               "high": intervals[i][1]} for i, (k, (lo, hi)) in enumerate(levels.items())}
    for i, k in ((3, "from_format"), (4, "from_accuracy")):
        out[k] = {"mean": float(point[i]), "low": intervals[i][0], "high": intervals[i][1]}
    return {**out, "seeds": [r["seed"] for r in runs], "problems": c0.shape[1], "decoding": decoding,
            "start": start, "end": end}


# ----------------------------------------------------------------------------- which held-out problems were trained on

def run_split(run: dict) -> tuple[list, list]:
    """``(training pool, held-out problems)`` of a run (`oar_lite.course.problems.heldout_split` with
    its ``settings["split"]``). A split recorded without ``by`` is ``by="question"``: the runs
    shipped before issue 38 were split by question text only."""
    split = run.get("settings", {}).get("split")
    if not isinstance(split, dict):
        raise ValueError(f"run {run.get('name')!r} records no settings['split']; its problems cannot be rebuilt")
    return _split(tuple(sorted({"by": "question", **split}.items())))


@functools.lru_cache(maxsize=4)
def _split(items: tuple) -> tuple[list, list]:
    return heldout_split(**dict(items))


def trained_indices(run: dict, steps: int | None = None) -> list[int]:
    """Indices into the run's training pool (`run_split`) of the prompts its first ``steps``
    optimizer steps (default: all it ran) generated for, in order.

    TRL's GRPOTrainer (1.6-1.16) draws them with its ``RepeatSampler``: one
    ``torch.randperm(pool size)`` seeded by the run's seed, cut into chunks of
    ``generation_batch_size / num_generations`` prompts, one chunk per generation, a generation
    every ``steps_per_generation x num_iterations`` micro-steps and ``prompts x group_size /
    micro_batch`` micro-steps per optimizer step. A resumed run draws the same (the sampler is
    rebuilt with the seed and the trainer skips the batches already used). One process only;
    within the first pass over the pool. ``tests/lab/test_lora_learning.py`` checks this against
    the prompts a real `OARGRPOTrainer` draws."""
    s, t = run["settings"], run["trl_config"]
    steps = s["steps"] if steps is None else steps
    pool, _ = run_split(run)
    if t["generation_batch_size"] != s["prompts"] * s["group_size"]:
        raise ValueError(f"run {run['name']}: generation_batch_size {t['generation_batch_size']} is not prompts x "
                         f"group_size ({s['prompts']} x {s['group_size']}): not a one-process run, whose draws this "
                         "does not rebuild")
    chunk = t["generation_batch_size"] // s["group_size"]
    micro_steps = steps * (s["prompts"] * s["group_size"] // s["micro_batch"])
    generations = math.ceil(micro_steps / (t["steps_per_generation"] * t["num_iterations"]))
    if generations * chunk > len(pool) // chunk * chunk:
        raise ValueError(f"run {run['name']} drew {generations * chunk} prompts, more than one pass over its pool of "
                         f"{len(pool)}; later passes are not rebuilt")
    import torch  # here: the rest of the module reads logs without it

    order = torch.randperm(len(pool), generator=torch.Generator().manual_seed(int(run["seed"]))).tolist()
    return order[: generations * chunk]


CLEAN_READINGS = ("trained", "pool")
"""`clean_heldout`'s readings: the prompts the runs drew (rebuilt from their seeds), or the
whole pool any run could draw (stricter)."""


def clean_heldout(log: dict, reading: str = "trained") -> dict:
    """The held-out problems of ``log`` that no run can have learned under another name:
    whose (template, numbers) (`oar_lite.course.problems.numbers_key`) no prompt any run trained on
    has (``reading="trained"``, `trained_indices` of every run) or no problem of the training
    pool has (``"pool"``, stricter: counts every twin in the pool as possibly trained on).

    Returns ``{"reading", "problems": indices of the clean held-out problems, "heldout": N,
    "twins_in_pool": held-out problems with a twin in the pool, "twins_trained": those with a
    twin among the prompts drawn, "prompts_drawn": distinct prompts the runs drew}``."""
    if reading not in CLEAN_READINGS:
        raise ValueError(f"reading must be one of {CLEAN_READINGS}, got {reading!r}")
    splits = {tuple(sorted({"by": "question", **r.get("settings", {}).get("split", {})}.items())) for r in log["runs"]}
    if len(splits) != 1:
        raise ValueError(f"the runs of log {log.get('name')!r} were split {len(splits)} ways; expected one split")
    pool, heldout = run_split(log["runs"][0])
    measured = len(log["runs"][0]["heldout"][0]["correct"])
    if measured != len(heldout):
        raise ValueError(f"the split rebuilds {len(heldout)} held-out problems but the runs answered {measured}")
    drawn = sorted({i for r in log["runs"] for i in trained_indices(r)})
    in_pool, trained = {numbers_key(p) for p in pool}, {numbers_key(pool[i]) for i in drawn}
    keys = [numbers_key(p) for p in heldout]
    seen = trained if reading == "trained" else in_pool
    return {"reading": reading, "problems": [i for i, k in enumerate(keys) if k not in seen], "heldout": len(heldout),
            "twins_in_pool": sum(k in in_pool for k in keys), "twins_trained": sum(k in trained for k in keys),
            "prompts_drawn": len(drawn)}


def heldout_curve(log: dict, method: str, decoding: str = "greedy") -> dict:
    """``{"steps", "mean", "low", "high"}``: held-out accuracy of ``method`` at each measured
    step, mean over seeds, 95% crossed bootstrap interval (seeds and problems)."""
    runs = runs_of(log, method)
    steps = heldout_steps(runs[0], decoding)
    out = {"steps": steps, "mean": [], "low": [], "high": []}
    for step in steps:
        values = np.stack([per_problem(r, step, decoding) for r in runs])
        low, high = crossed_bootstrap(values)
        out["mean"].append(float(values.mean()))
        out["low"].append(low)
        out["high"].append(high)
    return out


def metric_curve(log: dict, method: str, key: str) -> dict:
    """``{"steps", "mean", "low", "high"}``: a per-step TRL metric (``"reward"``,
    ``"rewards/format/mean"``, ``"completions/mean_length"``, ``"oar/effective_share"``...)
    of ``method``, mean over seeds with the range of the seeds (min, max)."""
    runs = runs_of(log, method)
    by_step: dict[int, list[float]] = {}
    for run in runs:
        for record in run["log"]:
            if key in record:
                by_step.setdefault(record["step"], []).append(record[key])
    if not by_step:
        raise ValueError(f"no run of {method!r} logged {key!r}")
    steps = sorted(by_step)
    return {"steps": steps, "mean": [float(np.mean(by_step[s])) for s in steps],
            "low": [float(min(by_step[s])) for s in steps], "high": [float(max(by_step[s])) for s in steps]}


def step_cpu_seconds(run: dict) -> list[float]:
    """CPU seconds of each logged step (the rise of ``cpu_time`` from the step before), leaving
    out steps whose held-out measurement ran inside them and steps after a resume (``cpu_time``
    restarts with the process). Empty when the log has no ``cpu_time``."""
    measured = {r["step"] for r in run["heldout"]}
    logged = [r for r in run["log"] if "cpu_time" in r]
    return [b["cpu_time"] - a["cpu_time"] for a, b in zip(logged, logged[1:])
            if b["step"] == a["step"] + 1 and b["step"] not in measured and b["cpu_time"] > a["cpu_time"]]


def step_seconds(run: dict) -> tuple[list[float], str]:
    """``(seconds of each step, clock)``: `step_cpu_seconds` where the log has CPU time
    (``"cpu"``), else TRL's own ``step_time`` per step, wall-clock (``"wall"``; read it only
    between runs that shared the machine at the same time), leaving out measured steps."""
    cpu = step_cpu_seconds(run)
    if cpu:
        return cpu, "cpu"
    measured = {r["step"] for r in run["heldout"]}
    wall = [r["step_time"] for r in run["log"] if "step_time" in r and r["step"] not in measured]
    if not wall:
        raise ValueError(f"run {run['name']} logs neither cpu_time nor step_time: no step cost to read")
    return wall, "wall"


def cost_ratio(log: dict, method: str, against: str = PLAIN_GRPO, seeds: Sequence[int] | None = None) -> dict | None:
    """A step's seconds for ``method`` over ``against``'s, median step of each run
    (`step_seconds`), paired by seed (only ``seeds`` if given, else the log's ``cost_seeds``
    when it names the pairs that ran side by side, else every seed): ``{"mean", "per_seed",
    "clock"}`` (``"cpu"`` or ``"wall"``). None for a method the log lists as ``untimed``: its
    runs did not run beside a GRPO run of their seed, so their step times compare with nothing."""
    def median(run):
        seconds, clock = step_seconds(run)
        return float(np.median(seconds)), clock

    if method in log.get("untimed", ()):
        return None
    seeds = log.get("cost_seeds") if seeds is None else seeds
    theirs = {r["seed"]: median(r) for r in runs_of(log, against) if seeds is None or r["seed"] in seeds}
    mine = {r["seed"]: median(r) for r in runs_of(log, method) if r["seed"] in theirs}
    clocks = {c for _, c in theirs.values()} | {c for _, c in mine.values()}
    if len(clocks) > 1:
        raise ValueError(f"{method} and {against} were timed by different clocks {sorted(clocks)}; no ratio")
    if not mine:
        raise ValueError(f"no seed has both a {method} and a {against} run to time" + (f" among {list(seeds)}" if seeds else ""))
    unpaired = sorted(set(seeds or ()) - set(mine))
    if unpaired:  # a seed asked for (a typo in --cost-seed?) must not drop out of the ratio in silence
        raise ValueError(f"seeds {unpaired} were asked for but have no {method} and {against} pair; "
                         f"paired seeds: {sorted(mine)}")
    ratios = {s: mine[s][0] / theirs[s][0] for s in mine}
    return {"mean": float(np.mean(list(ratios.values()))), "per_seed": ratios, "clock": clocks.pop()}


def describe(change: dict, digits: int = 3) -> str:
    """``"+0.104 (95% interval +0.06 to +0.15; 3 seeds x 96 problems)"``."""
    f = f"{{:+.{digits}f}}"
    return (f"{f.format(change['mean'])} (95% interval {f.format(change['low'])} to {f.format(change['high'])}; "
            f"{len(change['seeds'])} seeds x {change['problems']} problems)")


def plot_curves(axes: Sequence, log: dict, methods: Sequence[str] = (PLAIN_GRPO, "oar-g"),
                panels: Sequence[tuple[str, str]] = (("heldout:greedy", "held-out accuracy, greedy"),
                                                     ("heldout:t1", "held-out accuracy, T = 1"),
                                                     ("reward", "train reward (T = 1)"),
                                                     ("rewards/format/mean", "answer stated"),
                                                     ("completions/mean_length", "completion tokens"))):
    """One panel per ``(key, title)``; ``heldout:<decoding>`` panels show held-out accuracy with
    its crossed-bootstrap interval, the others TRL's metric with the seeds' range. The legend
    gives each method's number of seeds."""
    for ax, (key, title) in zip(axes, panels):
        for method in methods:
            if not any(r["method"] == method for r in log["runs"]):
                continue
            if key.startswith("heldout:"):
                curve = heldout_curve(log, method, key.split(":", 1)[1])
                marker = "o"
            else:
                curve = metric_curve(log, method, key)
                marker = None
            seeds = len(runs_of(log, method))  # methods may have run on different numbers of seeds
            line, = ax.plot(curve["steps"], curve["mean"], marker=marker, ms=3,
                            label=f"{display_name(method)} ({seeds} seed{'s' if seeds != 1 else ''})")
            ax.fill_between(curve["steps"], curve["low"], curve["high"], color=line.get_color(), alpha=0.2, lw=0)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("optimizer step")
    axes[0].legend(fontsize=8)
    axes[0].set_ylabel("mean over seeds (band: 95% interval / seeds' range)", fontsize=8)
