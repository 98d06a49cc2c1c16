"""What a run leaves on disk, written so that no crash loses work: `atomic_path` (a file is
replaced whole or not at all), metric records as JSONL (`write_jsonl`, `read_jsonl`,
`JsonlLog`), and checkpoints that resume a run with the results of one that never stopped
(`save_checkpoint`, `load_checkpoint`). Which settings may change on resume is declared
once, on the config's fields (`oar_lite.settings.Setting.resume`, `resumable`).
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import os
from pathlib import Path
from typing import Iterator

import torch

from .attribution import CREDIT_FIELDS, credit_settings
from .settings import settings_of
from .seeding import rng_state, set_rng_state

CHECKPOINT = "checkpoint.pt"
METRICS = "metrics.jsonl"


@contextlib.contextmanager
def atomic_path(path) -> Iterator[Path]:
    """A temporary sibling of ``path`` to write, renamed over ``path`` when the block ends
    without error (removed if it raised), so a crash or a kill leaves the previous file
    whole, never half of the new one."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_json(path, data) -> None:
    """Write ``data`` to ``path`` as indented JSON, replacing it atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(data, indent=1, default=str) + "\n")


def write_jsonl(path, records: list[dict]) -> None:
    """Write ``records`` to ``path`` (one JSON object per line), replacing it atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text("".join(json.dumps(r) + "\n" for r in records))


def append_jsonl(path, record: dict) -> None:
    """Append one JSON line to ``path`` and flush it, so a kill loses at most that line."""
    with open(path, "a") as f:
        f.write(json.dumps(record) + "\n")


def read_jsonl(path) -> list[dict]:
    """Records from a JSONL file; a line that is not JSON (a run killed while writing it)
    raises ValueError naming the file and the line."""
    records = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as err:
                raise ValueError(f"{path} line {number} is not JSON ({err.msg}): the file is damaged (a run killed "
                                 "while writing?); resume the run to rewrite it from its checkpoint, or delete the "
                                 "line") from None
    return records


class JsonlLog:
    """Appends records to a list and to a JSONL file (flushed every line; no file for ``path=None``)."""

    def __init__(self, path: Path | None, records: list[dict]):
        self.path, self.records = path, records

    def __call__(self, record: dict | None) -> dict | None:
        if record is None:
            return None
        self.records.append(record)
        if self.path is not None:
            append_jsonl(self.path, record)
        return record


# ----------------------------------------------------------------------------- configs

def resumable(config) -> dict[str, str]:
    """``{field: how it may change}`` for the fields of ``config`` (a `TrainConfig`) that may
    differ between a run and its resumption (`oar_lite.settings.Setting.resume`)."""
    return {name: s.resume for name, s in settings_of(config).items() if s.resume}


def config_changes(saved: dict, config) -> dict[str, tuple]:
    """``{name: (saved, now)}`` for each setting in which ``saved`` (a config as checkpoints
    and run.json store it, `dataclasses.asdict`) differs from ``config``; credit settings are
    named ``credit.<field>``. A config in the flat form of versions before `CreditConfig` is a
    ValueError that says how to migrate it."""
    saved = _jsonable(saved)
    if not isinstance(saved.get("credit"), dict):
        raise ValueError("a config in the flat form of versions before CreditConfig (no 'credit'): migrate its files "
                         "with `python scripts/migrate_logs.py FOLDER` (CHANGELOG, issue 47)")

    def flat(data: dict) -> dict:
        return {**{k: v for k, v in data.items() if k != "credit"}, **{f"credit.{k}": v for k, v in data["credit"].items()}}

    old, now = flat(saved), flat(_jsonable(dataclasses.asdict(config)))
    # A credit setting the method does not take never acted (older files record one for every method).
    try:
        unused = {f"credit.{k}" for k in CREDIT_FIELDS if k != "method" and k not in credit_settings(config.credit.method)}
    except ValueError:
        unused = set()
    if old.get("credit.method") == now["credit.method"]:
        old, now = ({k: v for k, v in d.items() if k not in unused} for d in (old, now))
    # A setting added after ``saved`` was written ran at its default then.
    default = flat(_jsonable(dataclasses.asdict(type(config)())))
    return {k: (old.get(k), v) for k, v in now.items() if old.get(k, default.get(k)) != v}


def _jsonable(x):
    return json.loads(json.dumps(x))


# ----------------------------------------------------------------------------- checkpoints

def trainable_state(model) -> dict[str, torch.Tensor]:
    """The weights that training changes: all of them, or only the adapter with LoRA."""
    names = {n for n, p in model.named_parameters() if p.requires_grad}
    return {k: v.detach().clone() for k, v in model.state_dict().items() if k in names}


def save_checkpoint(path, model, optimizer, config, step: int, records: list[dict], *, task=None) -> None:
    """Write weights (or adapter), optimizer, RNG states, step, config, records and the
    task's fingerprint to ``path`` atomically: a temporary file renamed over the old one,
    so a crash leaves either the previous checkpoint or the new one, never half of one."""
    state = {"step": step, "config": dataclasses.asdict(config), "records": records,
             "task": task.fingerprint() if task is not None else None,
             "model": trainable_state(model), "optimizer": optimizer.state_dict(), "rng": rng_state()}
    with atomic_path(path) as tmp:
        torch.save(state, tmp)


def load_checkpoint(path, model, optimizer, config, *, task=None) -> tuple[int, list[dict]]:
    """Restore a checkpoint written by `save_checkpoint` into ``model`` and ``optimizer``
    and the RNGs. Returns ``(step, records)``. Refuses a checkpoint of a different run:
    another config (but the `resumable` fields), or (when both sides know it) another task."""
    state = read_checkpoint(path)
    changed = {k: v for k, v in config_changes(state["config"], config).items() if k not in resumable(config)}
    if changed:
        raise ValueError(f"{path} was written by a different run: "
                         f"{', '.join(f'{k}={old!r} (now {new!r})' for k, (old, new) in changed.items())}")
    if task is not None and state.get("task") and state["task"] != task.fingerprint():
        raise ValueError(f"{path} was written by a run on other problems (task {state['task']}, now "
                         f"{task.fingerprint()}); use another output folder")
    expected = set(trainable_state(model))
    if set(state["model"]) != expected:
        raise ValueError(f"{path} holds weights {sorted(set(state['model']) ^ expected)[:5]}... that do not match the model's trainable weights")
    model.load_state_dict(state["model"], strict=False)
    optimizer.load_state_dict(state["optimizer"])
    set_rng_state(state["rng"])
    return int(state["step"]), list(state["records"])


CHECKPOINT_KEYS = ("step", "config", "records", "model", "optimizer", "rng")


def read_checkpoint(path) -> dict:
    """``torch.load`` of a checkpoint, with an error that names the file and what to do
    when it is not a whole checkpoint (truncated, overwritten, not one at all)."""
    advice = ("delete it to start the run over (or restore it from a copy); the run's metrics.jsonl "
              "is rewritten from the checkpoint on resume")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001 - torch raises EOFError, RuntimeError, UnpicklingError, ...
        raise ValueError(f"{path} is not a readable checkpoint ({type(err).__name__}: {str(err)[:200]}); "
                         f"{advice}") from err
    missing = [k for k in CHECKPOINT_KEYS if not isinstance(state, dict) or k not in state]
    if missing:
        raise ValueError(f"{path} is not an oar-lite checkpoint (missing {', '.join(missing)}); {advice}")
    return state
