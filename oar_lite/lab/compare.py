"""GRPO against OAR-G and OAR-P on the toy task: the main job (``python -m oar_lite.lab compare``).

Every method trains from the shipped toy model with the same seeds, prompts and budget
(`oar_lite.train`), evaluated greedily on the held-out set along the way. One folder gets::

    results/compare.png    held-out accuracy vs steps and vs wall time, time per step by phase
    results/compare.md     final accuracy, steps and time to the target, time per step
    results/compare.jsonl  every metric record of every run (raw)
    results/runs/<method>-seed<s>/{metrics.jsonl, checkpoint.pt, run.json}

Runs resume from their checkpoints and a finished run is read back, not trained again;
``run.json`` records its settings, and a run with other settings is refused (`_check_reuse`).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing as mp
import os
import platform
import time
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Sequence

import torch

from ..course import toy
from ..course.oracle import ORACLE_BOOST
from ..attribution import CREDIT_DEFAULTS, CREDIT_FIELDS, CreditConfig, credit_settings, method_of
from ..checkpoint import CHECKPOINT, METRICS, config_changes, read_jsonl, resumable, write_json, write_jsonl
from ..settings import Setting, add_setting_flags, changed_settings, check_number, flag, settings_of
from .provenance import portable
from .plots import save_figure
from .progress import MethodBars
from . import scorers  # noqa: F401  (registers the lab's methods, which it runs by name)
# Re-exported from `oar_lite.lab.report`, which holds them: notebook 05 and scripts call compare.X.
from .report import render_markdown, summarize, verdict  # noqa: F401
from ..train import LORA_SETTINGS, Task, TrainConfig, train
from .uniformity import step_metrics

COMPARED_TRAINING_METHODS = ("uniform", "oar-g", "oar-p")  # the training methods `compare` runs by default

# Training settings shared by every profile (flags and ``overrides`` change them): `TrainConfig`'s
# defaults (its learning rate is the one benchmarks/RESULTS.md, "Learning", chose) but these.
TRAINING = TrainConfig(max_new_tokens=66, checkpoint_every=5)


@dataclass(frozen=True)
class Profile:
    """A budget of the comparison: the runs' `TrainConfig` preset (each run sets its method
    and seed), the seeds, the target accuracy and the credit settings of the methods that
    take them (`run_config`)."""

    config: TrainConfig
    seeds: tuple[int, ...]
    target: float
    credit: dict = field(default_factory=dict)


# "default": the comparison the README reports; "quick": for trying it (its target is lower, as it
# stops before the default one is reached); "tiny": for tests.
PROFILES: dict[str, Profile] = {
    "default": Profile(replace(TRAINING, steps=30, prompts_per_step=8, group_size=8, eval_every=5, eval_size=None),
                       seeds=(0, 1, 2), target=0.85),
    "quick": Profile(replace(TRAINING, steps=10, prompts_per_step=8, group_size=8, eval_every=5, eval_size=100),
                     seeds=(0,), target=0.7),
    "tiny": Profile(replace(TRAINING, steps=2, prompts_per_step=2, group_size=4, eval_every=1, eval_size=8,
                            checkpoint_every=1), seeds=(0,), target=0.85),
    # "credit": the regime of benchmarks/credit_regime.py (notebook 06): small batches, sharp credit
    # (boost 9: "0.1 elsewhere" for the oracle's binary scores), 5 seeds, frequent evaluations.
    "credit": Profile(replace(TRAINING, steps=16, prompts_per_step=2, group_size=4, eval_every=2, eval_size=100),
                      seeds=(0, 1, 2, 3, 4), target=0.75, credit={"boost": ORACLE_BOOST}),
}
DEFAULT_TARGET = PROFILES["default"].target
TRAIN_POOL = dict(n=4000, seed=12345, digits=(2, 4))
# Held-out problems for other digit ranges (--digits): fresh ones (the shipped held-out set has too
# few of any one length), disjoint from it and from the training pool.
OTHER_EVAL = dict(n=200, seed=54321)


RUN_OPTIONS = {
    "target": Setting(None, "Held-out accuracy to reach.", dict(low=0, high=1, low_open=True)),
    "jobs": Setting(1, "Runs trained at the same time, one process each.", dict(integer=True, low=1)),
    "threads": Setting(1, "Torch threads per run (None: torch's setting).", dict(integer=True, low=1, optional=True)),
}
"""`compare`'s own settings, beside the runs' `TrainConfig` (the command line's flags read them)."""
CLI_JOBS = min(2, os.cpu_count() or 1)
"""``python -m oar_lite.lab compare``'s default ``--jobs``: one run per core, at most 2. Called from
Python, `compare` trains in its own process (``RUN_OPTIONS["jobs"]``, 1)."""
RUN_SET = ("method", "seed", "progress")
"""Run settings `compare` sets itself (``methods``, ``seeds``, ``progress``): ``overrides`` may not."""
SHORT_FLAGS = {"learning_rate": "--lr", "prompts_per_step": "--prompts", "num_iterations": "--iterations"}
"""Shorter second flags of some run settings (`oar_lite.settings.add_setting_flags`' ``short``)."""


def run_settings() -> dict:
    """``{name: Setting}``: every numeric setting of a run (`TrainConfig`, its `CreditConfig`),
    but the seed (runs take seeds by ``--seeds``): the flags of the command lines that train runs."""
    return {name: s for name, s in {**settings_of(TrainConfig), **settings_of(CreditConfig)}.items()
            if s.range and name != "seed"}


def for_method(method: str, settings: dict | None = None) -> CreditConfig:
    """A `CreditConfig` of ``method`` with those of ``settings`` (``{field: value}``, e.g. a
    profile's or a command line's, shared by several methods) that it takes (`credit_settings`);
    the others stay their defaults. A name that is no `CreditConfig` field is a ValueError."""
    settings = dict(settings or {})
    unknown = sorted(set(settings) - set(CREDIT_DEFAULTS))
    if unknown:
        raise ValueError(f"unknown credit setting(s) {unknown}; expected some of {sorted(CREDIT_DEFAULTS)}")
    taken = credit_settings(method)
    return CreditConfig(method=method, **{k: v for k, v in settings.items() if k in taken})


def for_methods(methods, settings: dict | None = None, *, defaults: dict | None = None) -> dict[str, CreditConfig]:
    """``{method: CreditConfig}`` for several methods sharing ``settings`` (a command line's):
    each method gets those it takes (`for_method`), and ``defaults`` beneath them. A setting that none of ``methods`` takes is
    a ValueError naming each method and what it takes."""
    settings, methods = dict(settings or {}), list(methods)
    taken = {m: credit_settings(m) for m in methods}
    unused = sorted(k for k in settings if k in CREDIT_DEFAULTS and not any(k in t for t in taken.values()))
    if unused:
        raise ValueError(f"credit setting(s) {unused} are taken by none of the methods {methods}; they take "
                         + "; ".join(f"{m}: {sorted(t) or 'no settings (plain GRPO)'}" for m, t in taken.items()))
    return {m: for_method(m, {**(defaults or {}), **settings}) for m in methods}


def add_run_flags(p: argparse.ArgumentParser, options: dict, defaults: dict[str, str] | None = None) -> None:
    """The flags of a command line that trains runs (``python -m oar_lite.lab compare``,
    benchmarks/credit_regime.py): one per `run_settings` and per ``options`` (``{name: Setting}``,
    of `RUN_OPTIONS`), and ``--lora``, which the ``--lora-*`` flags need."""
    add_setting_flags(p, {**options, **run_settings()}, defaults, short=SHORT_FLAGS)
    p.add_argument("--lora", action="store_true",
                   help="train a peft LoRA adapter instead of every weight (TrainConfig.lora); the --lora-* flags need it")


def run_overrides(p: argparse.ArgumentParser, args: argparse.Namespace, methods: Sequence[str]) -> dict:
    """The `add_run_flags` flags given, as `compare`'s ``overrides`` (``steps`` aside: `compare`
    takes it apart); a flag that would have no effect is a usage error (exit 2) before anything
    trains: a ``--lora-*`` flag without ``--lora``, a credit flag none of ``methods`` takes."""
    overrides = {k: v for k, v in changed_settings(args, run_settings()).items() if k != "steps"}
    lora_flags = [f"{flag(k)} {overrides[k]}" for k in LORA_SETTINGS if k in overrides]
    if lora_flags and not args.lora:
        p.error(f"{', '.join(lora_flags)}: no effect without --lora (every weight trains): pass --lora, or drop "
                f"{'them' if len(lora_flags) > 1 else 'it'}")
    if args.lora:
        overrides["lora"] = True
    try:
        for_methods(methods, {k: v for k, v in overrides.items() if k in CREDIT_FIELDS})
    except ValueError as err:
        p.error(str(err).replace("credit setting(s) ", "flag(s) for the credit setting(s) "))
    return overrides


def method_name(text: str) -> str:
    """An argparse ``type`` for methods: a name `oar_lite.attribution.method_of` knows (its error
    lists them and says where the others come from)."""
    try:
        method_of(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return text


def toy_task(*, eval_size: int | None = None, digits: int | tuple[int, int] | None = None) -> Task:
    """The toy addition task: training problems that avoid the held-out set, and the first
    ``eval_size`` held-out problems. ``digits`` (an int or an inclusive ``(low, high)``) other
    than `TRAIN_POOL`'s sets both; the held-out ones are then fresh (``OTHER_EVAL``)."""
    held_out = exclude = toy.load_eval_set()
    lo, hi = toy.digit_range(TRAIN_POOL["digits"] if digits is None else digits)
    if (lo, hi) != TRAIN_POOL["digits"]:
        held_out = toy.make_problems(OTHER_EVAL["n"], seed=OTHER_EVAL["seed"], digits=(lo, hi), exclude=held_out)
        exclude = held_out + exclude
    train_problems = toy.make_problems(TRAIN_POOL["n"], seed=TRAIN_POOL["seed"], digits=(lo, hi), exclude=exclude)
    evals = held_out[:eval_size] if eval_size else held_out
    return Task(train_problems=train_problems, eval_problems=evals, formats=toy.FORMATS)


def run_config(method: str, seed: int, settings: TrainConfig = TRAINING, credit: dict | None = None) -> TrainConfig:
    """``settings`` (`TRAINING`, a profile's, or one made from them) with a run's method and
    seed. Its credit: the settings ``settings.credit`` changes and
    ``credit`` (a profile's, a command line's: shared by several methods), each where
    ``method`` takes it (`for_method`)."""
    shared = {**settings.credit.changed(), **(credit or {})}
    return replace(settings, seed=seed, credit=for_method(method, shared))


def with_overrides(config: TrainConfig, overrides: dict) -> TrainConfig:
    """``config`` with settings changed by name, as command lines give them: a `TrainConfig`
    field, or a `CreditConfig` field (it changes ``config.credit``); ``credit`` given as a
    dict changes the fields it names. An unknown name, or a value out of range, is a ValueError."""
    if isinstance(overrides.get("credit"), dict):
        overrides = {**{k: v for k, v in overrides.items() if k != "credit"}, **overrides["credit"]}
    credit = {k: v for k, v in overrides.items() if k in CREDIT_FIELDS}
    unknown = sorted(set(overrides) - set(credit) - {f.name for f in fields(TrainConfig)})
    if unknown:
        raise ValueError(f"unknown TrainConfig setting(s) {unknown}; expected a field of TrainConfig "
                         f"{[f.name for f in fields(TrainConfig)]} or of CreditConfig {list(CREDIT_FIELDS)}")
    config = replace(config, **{k: v for k, v in overrides.items() if k not in credit})
    return replace(config, credit=replace(config.credit, **credit)) if credit else config


def _run_one(job: dict) -> list[dict]:
    """Train (or resume, or read back) one (method, seed) run; returns its records."""
    threads = torch.get_num_threads()
    if job.get("threads"):
        torch.set_num_threads(job["threads"])
    try:
        config = job["config"]
        model, tokenizer = toy.load_model(job.get("model_dir"))
        task = toy_task(eval_size=config.eval_size, digits=job.get("digits"))
        # The checkpoint records the task's fingerprint: a folder of 2-4-digit runs refuses --digits 4.
        _, records = train(model, tokenizer, task, config, out_dir=Path(job["out"]), resume=True,
                           step_metrics=step_metrics)
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
    jobs: int = RUN_OPTIONS["jobs"].default,
    threads: int | None = RUN_OPTIONS["threads"].default,
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
        seeds, steps, target: default the profile's (`PROFILES`); seed s gives every method the
            same prompts; ``target`` is the held-out accuracy whose first crossing counts.
        out: output folder.
        profile: a `PROFILES` name.
        jobs: runs trained at the same time (separate processes); 1 trains in this process.
        threads: torch threads per run (None: torch's setting).
        model_dir: a toy model folder other than the shipped one.
        overrides: settings to change by name (`with_overrides`), e.g. ``{"boost": 2.0}``; a
            credit setting goes to the methods that take it, and one that none of ``methods``
            takes is a ValueError (`for_methods`); not those `compare` sets itself (`RUN_SET`, and ``steps`` when ``steps`` is given).
        digits: train and evaluate on problems with this many digits (see `toy_task`).
        progress: progress bars.
        command: the command line, recorded in ``compare.md``.

    Returns:
        the summary (`summarize`) with ``"settings"`` added.
    """
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; expected one of {sorted(PROFILES)}")
    if not methods:
        raise ValueError("methods is empty; expected e.g. ('uniform', 'oar-g', 'oar-p')")
    overrides = dict(overrides or {})
    if isinstance(overrides.get("credit"), dict):
        overrides = {**{k: v for k, v in overrides.items() if k != "credit"}, **overrides["credit"]}
    refused = [k for k in overrides if k in RUN_SET]
    refused += ["steps"] if steps is not None and "steps" in overrides else []
    if refused:
        raise ValueError(f"overrides {refused} are set by compare's own arguments (methods, seeds, steps, progress); "
                         "give them there")
    preset = PROFILES[profile]
    credit = {k: v for k, v in overrides.items() if k in CREDIT_FIELDS}
    for_methods(methods, credit)  # ValueError: a credit setting none of the methods takes
    credit = {**preset.credit, **credit}
    settings = with_overrides(preset.config, {**{k: v for k, v in overrides.items() if k not in CREDIT_FIELDS},
                                              "progress": progress, **({} if steps is None else {"steps": steps})})
    target = preset.target if target is None else target
    for name, value in (("jobs", jobs), ("threads", threads), ("target", target)):
        check_number("compare", name, value, **RUN_OPTIONS[name].range)
    if digits is not None:
        digits = toy.digit_range(digits if isinstance(digits, int) else tuple(digits))  # raises ValueError
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
            config = run_config(method, seed, settings, credit)  # validates method and settings up front
            runs.append({"config": config, "out": str(out / "runs" / f"{_slug(method)}-seed{seed}"),
                         "threads": threads, "model_dir": str(model_dir) if model_dir else None, "digits": digits})
    # Every run folder is checked before any training, so a mismatch costs nothing.
    model = _model_fingerprint(model_dir)
    for job in runs:
        job["settings"] = _run_settings(job["config"], model, digits)
        _check_reuse(Path(job["out"]), job["config"], job["settings"])
    out.mkdir(parents=True, exist_ok=True)
    for job in runs:
        Path(job["out"]).mkdir(parents=True, exist_ok=True)
        write_json(Path(job["out"]) / RUN_SETTINGS, job.pop("settings"))
    # Runs finished by an earlier invocation are read back, not trained: the elapsed time
    # below then says nothing about the training, and compare.md says so.
    read_back = sum(_finished(Path(job["out"]), job["config"].steps) for job in runs)

    t0 = time.perf_counter()
    if jobs == 1:
        results = [_run_one(job) for job in runs]
    else:

        # The workers' bars would overwrite each other: they stay quiet, and MethodBars reports.
        for job in runs:
            job["config"] = replace(job["config"], progress=False)
        # Costliest runs first (OAR-P, then OAR-G), so the workers finish at about the same time.
        cost = {"oar-p": 0, "oar-g": 1}
        order = sorted(range(len(runs)), key=lambda i: cost.get(runs[i]["config"].credit.parsed.name, 2))
        results = [None] * len(runs)
        bars = MethodBars([(job["config"].credit.method, job["out"], job["config"].steps) for job in runs],
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
                bars.finish(i, f"done {job['config'].credit.method} seed {job['config'].seed}: held-out accuracy {acc}"
                            if progress else None)
    elapsed = time.perf_counter() - t0

    records = [r for rs in results for r in rs]
    write_jsonl(out / "compare.jsonl", records)
    summary = summarize(records, target=target, methods=methods)
    shared = {k: v for k, v in {**asdict(settings), **asdict(CreditConfig()), **credit}.items()
              if k not in ("credit", "method", "seed")}  # the credit settings beside the others, for the report
    summary["settings"] = {**shared, "seeds": list(seeds), "methods": list(methods), "target": target,
                           "jobs": jobs, "threads": threads, "profile": profile, "elapsed_s": elapsed,
                           "runs": len(runs), "read_back": read_back,
                           "digits": list(digits) if digits else list(TRAIN_POOL["digits"]),
                           "model_dir": portable(model_dir) if model_dir else "oar_lite/course/data/toy-model",
                           "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.platform(terse=True)}"}
    summary["command"] = command
    write_json(out / "compare.json", summary)
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


def _refuse_duplicates(what: str, keys: list, given: list) -> None:
    dups = [name for i, (key, name) in enumerate(zip(keys, given)) if key in keys[:i]]
    if dups:
        raise ValueError(f"{what} {given} repeat {dups}: two runs would share one folder; give each once")


def _model_fingerprint(model_dir) -> str | None:
    """A hash of the toy model's files (config, weights, tokenizer): the same model copied
    elsewhere has the same fingerprint, a retrained one another. None if the folder is
    missing (loading it then raises its own error)."""
    folder = Path(model_dir) if model_dir else toy.MODEL_DIR
    files = [folder / name for name in ("config.json", "model.safetensors", "tokenizer.json")]
    if not all(f.is_file() for f in files):
        return None
    return hashlib.sha256(b"".join(f.read_bytes() for f in files)).hexdigest()[:16]


def _run_settings(config: TrainConfig, model: str | None, digits) -> dict:
    """What decides a run's results: its full `TrainConfig`, the model, the problems' digits."""
    return {"config": json.loads(json.dumps(asdict(config))), "model": model,
            "digits": list(digits) if digits else list(TRAIN_POOL["digits"])}


def _check_reuse(run_dir: Path, config: TrainConfig, settings: dict) -> None:
    """Refuse to reuse ``run_dir`` if it holds a run with other settings; ValueError names each
    difference. Allowed to differ (`oar_lite.checkpoint.resumable`): bookkeeping, more steps (the
    run continues) and, for a run that is not finished or gets more steps, its evaluations."""
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
        changes = config_changes(saved["config"], config)
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        raise ValueError(f"{path} is damaged ({err}); delete {run_dir} to train the run again, or use another --out") from None
    saved_steps = changes.get("steps", (config.steps,))[0] or 0
    more_steps = config.steps > saved_steps
    open_run = more_steps or not _finished(run_dir, saved_steps)
    diffs = [f"{key}={saved.get(key)!r} (now {settings[key]!r})" for key in ("model", "digits")
             if saved.get(key) != settings[key]]
    allowed = {"bookkeeping": True, "more": more_steps, "evaluation": open_run}
    may_change = resumable(config)
    diffs += [f"{key}={old!r} (now {new!r})" for key, (old, new) in sorted(changes.items())
              if not allowed.get(may_change.get(key))]
    if diffs:
        raise ValueError(f"{run_dir} holds a run with other settings: {'; '.join(diffs)}. Its results would be "
                         f"labelled with the new ones; use another --out, or delete {run_dir} to train it again")


# ----------------------------------------------------------------------------- records

def load_records(out: str | os.PathLike) -> list[dict]:
    """The raw records of a comparison folder (``compare.jsonl``, else the runs' metrics)."""
    out = Path(out)
    if (out / "compare.jsonl").exists():
        return read_jsonl(out / "compare.jsonl")
    return [r for p in sorted((out / "runs").glob(f"*/{METRICS}")) for r in read_jsonl(p)]
