"""GRPO against OAR-G and OAR-P on the toy task: the main job (``python -m oar_lite compare``).

From the shipped toy model, every method trains with the same seeds, the same prompts at
every step and the same budget (`oar_lite.train`); the held-out set is evaluated greedily
along the way. Everything lands in one folder::

    results/compare.png    held-out accuracy vs steps and vs wall time (band over seeds),
                           and time per step by phase
    results/compare.md     final accuracy, steps and time to the target, time per step
    results/compare.jsonl  every metric record of every run (raw)
    results/runs/<method>-seed<s>/{metrics.jsonl, checkpoint.pt, run.json}

Runs resume from their checkpoints, so an interrupted comparison picks up where it
stopped; a finished run is read back, not trained again. ``run.json`` holds each run's
full settings (its `TrainConfig`, a hash of the model files, the digits): a run is reused
only when they match, apart from bookkeeping (progress bars, checkpoint interval, eval
batch size), more steps (the run continues), and, for a run that is not finished or gets
more steps, how often and on how many problems it is evaluated. Anything else is refused
with the differences named.
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
import statistics
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Sequence

from .checks import check_number
from .train import CHECKPOINT, METRICS, PHASES, Task, TrainConfig, flat_settings, read_jsonl, train, write_jsonl

COMPARED_TRAINING_METHODS = ("uniform", "oar-g", "oar-p")  # the training methods `compare` runs by default

# Training settings shared by every profile (flags and ``overrides`` change them).
# learning_rate: 1e-4 reaches the default target within the default budget (benchmarks/RESULTS.md,
# "Learning"); 3e-4 learned less and 2e-3 collapsed an earlier toy model.
TRAINING = TrainConfig(learning_rate=1e-4, max_new_tokens=66, temperature=1.0, num_iterations=1, beta=0.0,
                       quantile=0.25, boost=1.0, floor=0.1, noise_std=1e-3, checkpoint_every=5)


@dataclass(frozen=True)
class Profile:
    """A budget of the comparison: every run's training settings (a `TrainConfig` preset;
    each run sets its method and seed) and compare's own settings, the seeds and the
    target accuracy."""

    config: TrainConfig
    seeds: tuple[int, ...]
    target: float


# Budgets. "default" is the comparison the README reports (its run time: benchmarks/RESULTS.md,
# "Learning"); "quick" is for trying it (a fraction of that); "tiny" is for tests.
# Each has its target accuracy: "quick" stops at 10 steps, before the shipped model reaches
# 0.85, and a table of "not reached" shows nothing.
PROFILES: dict[str, Profile] = {
    "default": Profile(replace(TRAINING, steps=30, prompts_per_step=8, group_size=8, eval_every=5, eval_size=None),
                       seeds=(0, 1, 2), target=0.85),
    "quick": Profile(replace(TRAINING, steps=10, prompts_per_step=8, group_size=8, eval_every=5, eval_size=100),
                     seeds=(0,), target=0.7),
    "tiny": Profile(replace(TRAINING, steps=2, prompts_per_step=2, group_size=4, eval_every=1, eval_size=8,
                            checkpoint_every=1), seeds=(0,), target=0.85),
    # "credit": the regime of benchmarks/credit_regime.py (notebook 07, RESULTS.md "When credit matters"):
    # small batches (the noise credit acts on is largest), sharp credit (boost 9: a top-scored token
    # weighs ten times a bottom one, "0.1 elsewhere" for the oracle's binary scores), 5 seeds,
    # evaluations every 2 steps so that steps to the target are resolved.
    "credit": Profile(replace(TRAINING, steps=16, prompts_per_step=2, group_size=4, eval_every=2, eval_size=100,
                              boost=9.0), seeds=(0, 1, 2, 3, 4), target=0.75),
}
DEFAULT_TARGET = 0.85
TRAIN_POOL = dict(n=4000, seed=12345, digits=(2, 4))
# Held-out problems for other digit ranges (--digits): fresh ones, since oar_lite/data/toy_eval.jsonl
# holds only 56 4-digit problems (too few to tell methods apart). Disjoint from the
# shipped held-out set and from the training pool.
OTHER_EVAL = dict(n=200, seed=54321)


# Ranges of compare's own numeric settings (`oar_lite.checks.check_number`); the training
# settings are checked by `TrainConfig`.
RUN_RANGES: dict[str, dict] = {
    "target": dict(low=0, high=1, low_open=True),
    "jobs": dict(integer=True, low=1),
    "threads": dict(integer=True, low=1, optional=True),
}


def toy_task(*, eval_size: int | None = None, digits: int | tuple[int, int] | None = None) -> Task:
    """The toy addition task: a pool of training problems that avoids the held-out set, and
    the first ``eval_size`` held-out problems.

    With ``digits`` (an int or an inclusive ``(low, high)`` range) other than the default
    2-4, both training and held-out problems have that many digits; the held-out ones are
    200 fresh problems (``OTHER_EVAL``), none of them in ``oar_lite/data/toy_eval.jsonl``.
    """
    from . import toy

    held_out = toy.load_eval_set()
    lo, hi = toy.digit_range(TRAIN_POOL["digits"] if digits is None else digits)
    if (lo, hi) != TRAIN_POOL["digits"]:
        held_out = toy.make_problems(OTHER_EVAL["n"], seed=OTHER_EVAL["seed"], digits=(lo, hi), exclude=held_out)
        exclude = held_out + toy.load_eval_set()
    else:
        exclude = held_out
    train_problems = toy.make_problems(TRAIN_POOL["n"], seed=TRAIN_POOL["seed"], digits=(lo, hi), exclude=exclude)
    evals = held_out[:eval_size] if eval_size else held_out
    return Task(train_problems=train_problems, eval_problems=evals, formats=toy.FORMATS)


def run_config(method: str, seed: int, settings: TrainConfig = TRAINING) -> TrainConfig:
    """The `TrainConfig` of one run of the comparison: ``settings`` (`TRAINING`, a
    profile's, or one made from them with `dataclasses.replace`) with the run's method and seed."""
    return replace(settings, method=method, seed=seed)


def _run_one(job: dict) -> list[dict]:
    """Train (or resume, or read back) one (method, seed) run; returns its records."""
    import torch

    from . import toy

    threads = torch.get_num_threads()
    if job.get("threads"):
        torch.set_num_threads(job["threads"])
    try:
        config = job["config"]
        model, tokenizer = toy.load_model(job.get("model_dir"))
        task = toy_task(eval_size=config.eval_size, digits=job.get("digits"))
        # The checkpoint records the task's fingerprint: a folder of 2-4-digit runs refuses --digits 4.
        _, records = train(model, tokenizer, task, config, out_dir=Path(job["out"]), resume=True)
    finally:
        torch.set_num_threads(threads)
    return records


def compare(
    methods: Sequence[str] = COMPARED_TRAINING_METHODS,
    seeds: Sequence[int] | None = None,
    *,
    steps: int | None = None,
    out: str | os.PathLike = "results",
    profile: str = "default",
    target: float | None = None,
    jobs: int = 1,
    threads: int | None = 1,
    model_dir: str | os.PathLike | None = None,
    overrides: dict | None = None,
    digits: int | Sequence[int] | None = None,
    progress: bool = True,
    command: str | None = None,
) -> dict:
    """Train every method with every seed, then write the table, the figure and the raw records.

    Args:
        methods: credit-assignment methods (`oar_lite.attribution.SCORERS` names, optionally
            with a mode: ``"oar-p:answer_joint"``).
        seeds: seeds (default: the profile's). Seed s gives every method the same prompts.
        steps: training steps per run (default: the profile's).
        out: output folder.
        profile: ``"default"``, ``"quick"``, ``"tiny"`` or ``"credit"`` (`PROFILES`).
        target: held-out accuracy whose first crossing counts as "reached" (default: the
            profile's, 0.85 for "default", 0.7 for "quick").
        jobs: runs trained at the same time (separate processes); 1 trains in this process.
        threads: torch threads per run (1 suits the toy model: its matrices are too small
            for two threads to pay off). None leaves torch's setting alone.
        model_dir: a toy model folder other than the shipped ``oar_lite/data/toy-model``.
        overrides: `TrainConfig` settings to change (``{"learning_rate": 1e-3, "boost": 2.0}``);
            an unknown name is a ValueError.
        digits: train and evaluate on problems with this many digits (an int or an inclusive
            ``[low, high]`` pair; default the toy world's 2-4; see `toy_task`).
        progress: progress bars.
        command: the command line, recorded in ``compare.md``.

    Returns:
        the summary (`summarize`) with ``"settings"`` added.
    """
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; expected one of {sorted(PROFILES)}")
    if not methods:
        raise ValueError("methods is empty; expected e.g. ('uniform', 'oar-g', 'oar-p')")
    check_number("compare", "jobs", jobs, **RUN_RANGES["jobs"])
    check_number("compare", "threads", threads, **RUN_RANGES["threads"])
    preset = PROFILES[profile]
    changes = {**(overrides or {}), "progress": progress, **({} if steps is None else {"steps": steps})}
    settings = replace(preset.config, **changes)  # TrainConfig checks them (unknown names too)
    target = preset.target if target is None else target
    check_number("compare", "target", target, **RUN_RANGES["target"])
    if digits is not None:
        from .toy import digit_range

        digits = digit_range(digits if isinstance(digits, int) else tuple(digits))  # raises ValueError
        digits = None if digits == TRAIN_POOL["digits"] else digits
    seeds = preset.seeds if seeds is None else tuple(seeds)
    if not seeds:
        raise ValueError("seeds is empty; expected at least one seed")
    _refuse_duplicates("methods", [_slug(m) for m in methods], list(methods))
    _refuse_duplicates("seeds", list(seeds), list(seeds))
    out = Path(out)

    runs = []
    for method in methods:
        for seed in seeds:
            config = run_config(method, seed, settings)  # validates method and settings up front
            runs.append({"config": config, "out": str(out / "runs" / f"{_slug(method)}-seed{seed}"),
                         "threads": threads, "model_dir": str(model_dir) if model_dir else None, "digits": digits})
    # Every run folder is checked before any training, so a mismatch costs nothing.
    model = _model_fingerprint(model_dir)
    for job in runs:
        job["settings"] = _run_settings(job["config"], model, digits)
        _check_reuse(Path(job["out"]), job["settings"])
    out.mkdir(parents=True, exist_ok=True)
    for job in runs:
        Path(job["out"]).mkdir(parents=True, exist_ok=True)
        _write_json(Path(job["out"]) / RUN_SETTINGS, job.pop("settings"))
    # Runs finished by an earlier invocation are read back, not trained: the elapsed time
    # below then says nothing about the training, and compare.md says so.
    read_back = sum(_finished(Path(job["out"]), job["config"].steps) for job in runs)

    t0 = time.perf_counter()
    if jobs == 1:
        results = []
        for job in runs:
            results.append(_run_one(job))
    else:
        import multiprocessing as mp

        # Each worker shows its own bar; they would overwrite each other, so keep them quiet
        # and report each run as it finishes.
        for job in runs:
            job["config"] = replace(job["config"], progress=False)
        # Costliest runs first (OAR-P, then OAR-G), so the workers finish at about the same time.
        cost = {"oar-p": 0, "oar-g": 1}
        order = sorted(range(len(runs)), key=lambda i: cost.get(runs[i]["config"].method.partition(":")[0], 2))
        from .progress import MethodBars

        results = [None] * len(runs)
        bars = MethodBars([(job["config"].method, job["out"], job["config"].steps) for job in runs],
                          disable=not progress)
        with mp.get_context("spawn").Pool(min(jobs, len(runs))) as pool, bars:
            finished = pool.imap(_run_one, [runs[i] for i in order])
            for i in order:
                while True:
                    try:
                        records = finished.next(timeout=1.0)
                        break
                    except mp.TimeoutError:
                        bars.poll()
                job = runs[i]
                results[i] = records
                final = [r for r in records if r["type"] == "eval"]
                acc = f"{final[-1]['eval_accuracy']:.3f}" if final else "n/a"
                bars.finish(i, f"done {job['config'].method} seed {job['config'].seed}: held-out accuracy {acc}"
                            if progress else None)
    elapsed = time.perf_counter() - t0

    records = [r for rs in results for r in rs]
    write_jsonl(out / "compare.jsonl", records)
    summary = summarize(records, target=target, methods=methods)
    shared = {k: v for k, v in flat_settings(settings).items() if k not in ("method", "seed")}
    summary["settings"] = {**shared, "seeds": list(seeds), "methods": list(methods), "target": target,
                           "jobs": jobs, "threads": threads, "profile": profile, "elapsed_s": elapsed,
                           "runs": len(runs), "read_back": read_back,
                           "digits": list(digits) if digits else list(TRAIN_POOL["digits"]),
                           "model_dir": str(model_dir) if model_dir else "oar_lite/data/toy-model",
                           "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.platform(terse=True)}"}
    summary["command"] = command
    with open(out / "compare.json", "w") as f:
        json.dump(summary, f, indent=1)
    (out / "compare.md").write_text(render_markdown(summary))
    save_figure(records, out / "compare.png", target=target, methods=methods)
    return summary


def _slug(method: str) -> str:
    return method.replace(":", "-")


def _finished(run_dir: Path, steps: int) -> bool:
    """Whether ``run_dir`` already holds a run trained for ``steps`` steps (a damaged
    metrics file, from a run killed while writing it, counts as not finished: the run
    resumes from its checkpoint and rewrites it)."""
    if not (run_dir / CHECKPOINT).exists() or not (run_dir / METRICS).exists():
        return False
    try:
        records = read_jsonl(run_dir / METRICS)
    except ValueError:
        return False
    return any(r.get("type") == "train" and r.get("step") == steps for r in records)


# ----------------------------------------------------------------------------- run settings and reuse

RUN_SETTINGS = "run.json"
# TrainConfig fields that never change what a run learns or records.
_BOOKKEEPING = ("progress", "checkpoint_every", "eval_batch_size")
# Fields that change only the evaluations from the point where they change.
_EVALUATION = ("eval_every", "eval_size")


def _refuse_duplicates(what: str, keys: list, given: list) -> None:
    seen, dups = set(), []
    for key, name in zip(keys, given):
        if key in seen:
            dups.append(name)
        seen.add(key)
    if dups:
        raise ValueError(f"{what} {given} repeat {dups}: two runs would share one folder; give each once")


def _model_fingerprint(model_dir) -> str | None:
    """A hash of the toy model's files (config, weights, tokenizer): the same model copied
    elsewhere has the same fingerprint, a retrained one another. None if the folder is
    missing (loading it then raises its own error)."""
    from . import toy

    folder = Path(model_dir) if model_dir else toy.MODEL_DIR
    files = [folder / name for name in ("config.json", "model.safetensors", "tokenizer.json")]
    if not all(f.is_file() for f in files):
        return None
    digest = hashlib.sha256()
    for f in files:
        digest.update(f.read_bytes())
    return digest.hexdigest()[:16]


def _run_settings(config: TrainConfig, model: str | None, digits) -> dict:
    """What decides a run's results: its full `TrainConfig` (`flat_settings`), the model, the problems' digits."""
    return {"config": json.loads(json.dumps(flat_settings(config))), "model": model,
            "digits": list(digits) if digits else list(TRAIN_POOL["digits"])}


def _write_json(path: Path, data: dict) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1))
    os.replace(tmp, path)


def _check_reuse(run_dir: Path, settings: dict) -> None:
    """Refuse to reuse ``run_dir`` if it holds a run with other settings (see the module
    docstring for what may differ); ValueError names each difference."""
    held = [name for name in (CHECKPOINT, METRICS) if (run_dir / name).exists()]
    path = run_dir / RUN_SETTINGS
    if not held:
        return
    if not path.exists():
        raise ValueError(f"{run_dir} holds a run ({', '.join(held)}) but no {RUN_SETTINGS} recording its settings "
                         "(written by an older oar-lite?), so it cannot be told apart from another run; delete the "
                         "folder to train it again, or use another --out")
    try:
        saved = json.loads(path.read_text())
        saved_config = flat_settings(saved["config"])
    except (ValueError, KeyError, TypeError) as err:
        raise ValueError(f"{path} is damaged ({err}); delete {run_dir} to train the run again, or use another --out") from None
    new_config = settings["config"]
    more_steps = new_config.get("steps", 0) > saved_config.get("steps", 0)
    open_run = more_steps or not _finished(run_dir, saved_config.get("steps"))
    diffs = [f"{key}={saved.get(key)!r} (now {settings[key]!r})" for key in ("model", "digits")
             if saved.get(key) != settings[key]]
    for key in sorted(set(saved_config) | set(new_config)):
        old, new = saved_config.get(key), new_config.get(key)
        if old == new or key in _BOOKKEEPING or (key == "steps" and more_steps) or (key in _EVALUATION and open_run):
            continue
        diffs.append(f"{key}={old!r} (now {new!r})")
    if diffs:
        raise ValueError(f"{run_dir} holds a run with other settings: {'; '.join(diffs)}. Its results would be "
                         f"labelled with the new ones; use another --out, or delete {run_dir} to train it again")


# ----------------------------------------------------------------------------- summary

def _median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def summarize(records: Sequence[dict], *, target: float = DEFAULT_TARGET, methods: Sequence[str] | None = None) -> dict:
    """Per method, over seeds: held-out accuracy at the start and at the end (mean, std,
    min, max), the best, steps and training wall time to first reach ``target``, and the
    median seconds per step in each phase.

    Returns:
        ``{"target": target, "methods": {method: {...}}}`` (plain floats, JSON-ready).
    """
    from .plots import by_method_and_seed

    evals = by_method_and_seed(records, "eval")
    trains = by_method_and_seed(records, "train")
    order = list(methods) if methods else sorted(evals, key=lambda m: (m != "uniform", m))
    result = {}
    for method in order:
        if method not in evals:
            continue
        seeds = sorted(evals[method])
        finals = [evals[method][s][-1]["eval_accuracy"] for s in seeds]
        starts = [evals[method][s][0]["eval_accuracy"] for s in seeds]
        bests = [max(r["eval_accuracy"] for r in evals[method][s]) for s in seeds]
        # Mean held-out accuracy over the evaluations after step 0: the area under the curve,
        # less sensitive to one noisy evaluation than a first crossing of the target.
        curves = [statistics.mean([r["eval_accuracy"] for r in evals[method][s][1:]] or [evals[method][s][0]["eval_accuracy"]])
                  for s in seeds]
        reached = [next((r for r in evals[method][s] if r["eval_accuracy"] >= target), None) for s in seeds]
        steps = [trains[method][s] for s in seeds if s in trains.get(method, {})]
        phase = {p: _median([r[f"time_{p}"] for rs in steps for r in rs]) or 0.0 for p in PHASES}
        result[method] = {
            "seeds": seeds,
            "start_accuracy": statistics.mean(starts),
            "final_accuracy": statistics.mean(finals),
            "final_accuracy_std": statistics.pstdev(finals) if len(finals) > 1 else 0.0,
            "final_accuracy_min": min(finals),
            "final_accuracy_max": max(finals),
            "final_accuracies": finals,
            "best_accuracy": statistics.mean(bests),
            "curve_accuracy": statistics.mean(curves),
            "curve_accuracies": curves,
            "reached": sum(r is not None for r in reached),
            "steps_to_target": [r["step"] if r else None for r in reached],
            "time_to_target": [r["wall_time"] if r else None for r in reached],
            "final_step": max(evals[method][s][-1]["step"] for s in seeds),
            "train_reward_last5": statistics.mean(r["reward_mean"] for rs in steps for r in rs[-5:]) if steps else None,
            "weight_std": _median([r["weight_std"] for rs in steps for r in rs]),
            "time_per_step": sum(phase.values()),
            "time_per_phase": phase,
            # Within one run the phases share the machine's load, so this ratio survives a busy
            # machine better than comparing runs trained at different times.
            "attribution_overhead": sum(phase.values()) / max(sum(phase.values()) - phase["attribute"], 1e-9),
            "cpu_per_step": _median([sum(r[f"cpu_{p}"] for p in PHASES) for rs in steps for r in rs if "cpu_update" in r]),
        }
    base = result.get("uniform", {}).get("time_per_step")
    for m in result.values():
        m["step_cost_vs_grpo"] = m["time_per_step"] / base if base else None
        cpu_base = result.get("uniform", {}).get("cpu_per_step")
        m["cpu_cost_vs_grpo"] = m["cpu_per_step"] / cpu_base if cpu_base and m["cpu_per_step"] else None
    # Paired by seed: the same seed gives every method the same prompts and sampling seeds,
    # so per-seed differences are less noisy than differences of means.
    if "uniform" in result:
        grpo = dict(zip(result["uniform"]["seeds"], result["uniform"]["final_accuracies"]))
        for m in result.values():
            m["paired_diff_vs_grpo"] = [acc - grpo[s] for s, acc in zip(m["seeds"], m["final_accuracies"]) if s in grpo]
        grpo = dict(zip(result["uniform"]["seeds"], result["uniform"]["curve_accuracies"]))
        for m in result.values():
            m["paired_curve_diff_vs_grpo"] = [a - grpo[s] for s, a in zip(m["seeds"], m["curve_accuracies"]) if s in grpo]
    return {"target": target, "methods": result}


def _fmt_target(values: list, n: int, fmt: str) -> str:
    got = [v for v in values if v is not None]
    if not got:
        return f"not reached (0/{n})"
    return f"{fmt.format(statistics.mean(got))} ({len(got)}/{n})"


def render_markdown(summary: dict) -> str:
    """``compare.md``: the settings, one table row per method, and what happened in words."""
    from .plots import method_label

    s = summary.get("settings", {})
    target = summary["target"]
    methods = summary["methods"]
    lines = ["# GRPO vs OAR on the toy task", ""]
    if summary.get("command"):
        lines += [f"Command: `{summary['command']}`", ""]
    if s:
        digits = s.get("digits") or TRAIN_POOL["digits"]
        digits = f"{digits[0]}" if digits[0] == digits[1] else f"{digits[0]}-{digits[1]}"
        noise = f", OAR-G noise std {s['noise_std']}" if "noise_std" in s else ""
        elapsed = f"total {s.get('elapsed_s', 0) / 60:.1f} min"
        if s.get("read_back"):
            elapsed += (f" ({s['read_back']} of {s.get('runs')} runs read back from an earlier invocation, "
                        "so this is not the training time)")
        lines += [
            f"Settings: {s.get('steps')} steps x {s.get('prompts_per_step')} prompts x {s.get('group_size')} completions, "
            f"{digits}-digit problems, learning rate {s.get('learning_rate')}, quantile {s.get('quantile')}, "
            f"boost {s.get('boost')}, floor {s.get('floor')}{noise}, seeds {s.get('seeds')}, held-out problems "
            f"{s.get('eval_size') or 'all'} (greedy, every {s.get('eval_every')} steps), model {s.get('model_dir')}.",
            f"Machine: {s.get('machine')}; {s.get('jobs')} run(s) at a time, {s.get('threads')} torch thread(s) each; "
            f"{elapsed}.",
            "",
        ]
    lines += [
        f"Target: held-out accuracy >= {target:g} (greedy). Steps and time to target: mean over the seeds "
        "that reached it (how many did, of all); one noisy evaluation can cross it. \"mean acc. over run\": "
        "held-out accuracy averaged over the evaluations after step 0. \"- GRPO\": minus GRPO's on the same "
        "seed (same prompts), averaged over seeds.",
        "",
        "| method | start acc. | final acc. (mean ± std) | min-max | final - GRPO | mean acc. over run (- GRPO) "
        "| best | steps to target | time to target (s) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for method, m in methods.items():
        n = len(m["seeds"])
        diffs = m.get("paired_diff_vs_grpo") or []
        paired = "-" if method == "uniform" or not diffs else (
            f"{statistics.mean(diffs):+.3f} ± {statistics.pstdev(diffs):.3f}" if len(diffs) > 1 else f"{diffs[0]:+.3f}")
        cdiffs = m.get("paired_curve_diff_vs_grpo") or []
        curve = f"{m['curve_accuracy']:.3f}" + ("" if method == "uniform" or not cdiffs else f" ({statistics.mean(cdiffs):+.3f})")
        lines.append(
            f"| {method_label(method)} | {m['start_accuracy']:.3f} | {m['final_accuracy']:.3f} ± {m['final_accuracy_std']:.3f} "
            f"| {m['final_accuracy_min']:.3f}-{m['final_accuracy_max']:.3f} | {paired} | {curve} | {m['best_accuracy']:.3f} "
            f"| {_fmt_target(m['steps_to_target'], n, '{:.1f}')} | {_fmt_target(m['time_to_target'], n, '{:.0f}')} |")
    lines += [
        "",
        "Time per step (training only, evaluation excluded; medians over all steps and seeds). Wall seconds "
        "compare badly across runs on a shared machine (each run meets different neighbours); CPU seconds "
        "(one torch thread per run) measure the work. \"step / (step - attribute)\" is the attribution "
        "overhead inside each method's own runs.",
        "",
        "| method | wall s/step | generate | reward | attribute | update | wall vs GRPO | CPU s/step | CPU vs GRPO "
        "| step / (step - attribute) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for method, m in methods.items():
        ph = m["time_per_phase"]
        cost = f"{m['step_cost_vs_grpo']:.2f}x" if m.get("step_cost_vs_grpo") else "-"
        cpu = f"{m['cpu_per_step']:.2f}" if m.get("cpu_per_step") else "-"
        cpu_cost = f"{m['cpu_cost_vs_grpo']:.2f}x" if m.get("cpu_cost_vs_grpo") else "-"
        lines.append(
            f"| {method_label(method)} | {m['time_per_step']:.2f} | {ph['generate']:.2f} | {ph['reward']:.2f} "
            f"| {ph['attribute']:.2f} | {ph['update']:.2f} | {cost} | {cpu} | {cpu_cost} | {m['attribution_overhead']:.2f}x |")
    lines += ["", *verdict(summary), ""]
    return "\n".join(lines)


def verdict(summary: dict) -> list[str]:
    """What happened, in sentences, from the numbers (whichever method wins)."""
    from .plots import method_label

    methods = summary["methods"]
    out = []
    base = methods.get("uniform")
    for method, m in methods.items():
        if method == "uniform" or base is None:
            continue
        diff = m["final_accuracy"] - base["final_accuracy"]
        diffs = m.get("paired_diff_vs_grpo") or [diff]
        # "Higher" only when every paired seed agrees and the mean gap exceeds the seed spread;
        # one seed has no spread to compare with, so it never decides.
        spread = max(m["final_accuracy_std"], base["final_accuracy_std"])
        if len(diffs) < 2:
            word = "one seed, too few to tell it from"
        elif all(d > 0 for d in diffs) and diff > spread:
            word = "higher than"
        elif all(d < 0 for d in diffs) and diff < -spread:
            word = "lower than"
        else:
            word = "not distinguishable from"
        n = len(m["seeds"])
        mine = [v for v in m["steps_to_target"] if v is not None]
        theirs = [v for v in base["steps_to_target"] if v is not None]
        if mine and theirs:
            pace = (f"reached the target in {statistics.mean(mine):.1f} steps on average ({len(mine)}/{n} seeds) "
                    f"against {statistics.mean(theirs):.1f} for GRPO ({len(theirs)}/{len(base['seeds'])})")
        else:
            pace = (f"reached the target in {len(mine)}/{n} seeds, GRPO in {len(theirs)}/{len(base['seeds'])}")
        cost = (f", at {m['cpu_cost_vs_grpo']:.2f}x GRPO's CPU time per step" if m.get("cpu_cost_vs_grpo") else
                f", at {m['step_cost_vs_grpo']:.2f}x GRPO's wall time per step" if m.get("step_cost_vs_grpo") else "")
        out.append(f"- {method_label(method)}: final accuracy {m['final_accuracy']:.3f} vs GRPO {base['final_accuracy']:.3f} "
                   f"({diff:+.3f}, {word} GRPO); {pace}{cost}.")
    return out


def save_figure(records: Sequence[dict], path, *, target: float | None = None, methods: Sequence[str] | None = None):
    """``compare.png``: held-out accuracy against steps and against training wall time, and
    time per step by phase. When the records carry CPU time (one torch thread per run), a
    third curve panel shows accuracy against CPU time, which a busy machine does not skew."""
    # A bare Figure draws to a file without pyplot: no backend switch, nothing left open in
    # a notebook that calls this (matplotlib.use("Agg") there would stop inline plots).
    from matplotlib.figure import Figure

    from .plots import plot_curves, plot_phase_times

    summary = summarize(records, target=target or DEFAULT_TARGET, methods=methods)
    has_cpu = all("cpu_time" in r for r in records if r.get("type") in ("train", "eval"))
    fig = Figure(figsize=(12, 8.5))
    axes = fig.subplots(2, 2).ravel()
    plot_curves(axes[0], records, x="step", methods=methods, target=target)
    plot_curves(axes[1], records, x="wall_time", methods=methods, target=target)
    axes[0].set_title("held-out accuracy by step")
    axes[1].set_title("held-out accuracy by training wall time")
    if has_cpu:
        plot_curves(axes[2], records, x="cpu_time", methods=methods, target=target)
        axes[2].set_xlabel("training CPU time (s)")
        axes[2].set_title("held-out accuracy by training CPU time")
    else:
        axes[2].axis("off")
    plot_phase_times(axes[3], {m: s["time_per_phase"] for m, s in summary["methods"].items()}, methods=methods)
    axes[3].set_title("wall time per step, by phase")
    axes[0].legend(loc="lower right", fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return path


def load_records(out: str | os.PathLike) -> list[dict]:
    """The raw records of a comparison folder (``compare.jsonl``, else the runs' metrics)."""
    out = Path(out)
    if (out / "compare.jsonl").exists():
        return read_jsonl(out / "compare.jsonl")
    return [r for p in sorted((out / "runs").glob(f"*/{METRICS}")) for r in read_jsonl(p)]
