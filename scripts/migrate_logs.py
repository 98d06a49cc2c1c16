#!/usr/bin/env python
"""Rewrite logs written before issue 47 with today's names, once (the shipped ones were, by
this script: its diff is in the commit that removed the old names from the code).

    python scripts/migrate_logs.py                  # the shipped logs (oar_lite/lab/data/**/*.json), in place
    python scripts/migrate_logs.py results/credit   # other logs: folders (every log under them) or files
    python scripts/migrate_logs.py --check PATH...  # say what would change, change nothing (exit 1 if anything would)

A log is a ``.json`` (a benchmark's results, a ``run.json``), a ``.jsonl`` (``metrics.jsonl``,
``compare.jsonl``: one record a line) or a ``checkpoint.pt``. What changes:

- plain GRPO's old names, as the value of a ``"method"`` key: ``"none"``, ``"uniform (GRPO)"`` and
  ``"GRPO (uniform)"`` become ``"uniform"``; a run's ``"name"`` that starts ``"none-"`` starts
  ``"uniform-"``. What a run's ``command`` and ``argv`` record is left as it was typed.
- the flat form of a config (a ``"config"`` key: checkpoints, ``run.json``), from before
  `oar_lite.attribution.CreditConfig`: its credit settings move under ``"credit"``;
- the old names of OAR-P's settings, ``attribution_batch_size`` and ``attribution_token_budget``
  (in a config or a comparison's ``"settings"``), become ``batch_size`` and ``token_budget``.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run from a checkout without installing
    sys.path.insert(0, str(ROOT))

SHIPPED = ROOT / "oar_lite" / "lab" / "data"
OLD_METHODS = {"none": "uniform", "uniform (GRPO)": "uniform", "GRPO (uniform)": "uniform"}
"""Plain GRPO's names before issue 47, and its name now."""
OLD_SETTINGS = {"attribution_batch_size": "batch_size", "attribution_token_budget": "token_budget"}
"""OAR-P's settings' names before `CreditConfig`, and their names now."""
CREDIT_FIELDS = ("method", "quantile", "boost", "floor", "preserve_mass", "noise_std", "batch_size", "token_budget")
"""`oar_lite.attribution.CREDIT_FIELDS` (tests/test_migrate_logs.py checks they agree): the flat form's credit keys."""


def migrate(data, changes: list[str], where: str = ""):
    """``data`` (a log's parsed JSON) with today's names; each change is appended to ``changes``."""
    if isinstance(data, list):
        return [migrate(x, changes, f"{where}[{i}]") for i, x in enumerate(data)]
    if not isinstance(data, dict):
        return data
    out = {}
    for key, value in data.items():
        here = f"{where}/{key}"
        if key in OLD_SETTINGS and isinstance(data, dict):
            changes.append(f"{here} -> {OLD_SETTINGS[key]}")
            key = OLD_SETTINGS[key]
        if key == "method" and isinstance(value, str) and value in OLD_METHODS:
            changes.append(f"{here}: {value!r} -> {OLD_METHODS[value]!r}")
            value = OLD_METHODS[value]
        elif key == "name" and isinstance(value, str) and value.startswith("none-") and "method" in data:
            changes.append(f"{here}: {value!r} -> {'uniform-' + value[5:]!r}")
            value = "uniform-" + value[5:]
        elif key in ("command", "argv"):
            out[key] = value  # what was typed, kept
            continue
        else:
            value = migrate(value, changes, here)
        if key == "config" and isinstance(value, dict) and "credit" not in value and "steps" in value:
            credit = {k: value.pop(k) for k in CREDIT_FIELDS if k in value}
            changes.append(f"{here}: credit settings {sorted(credit)} moved under 'credit'")
            value["credit"] = credit
        out[key] = value
    return out


def migrate_file(path: Path, check: bool = False) -> list[str]:
    """Migrate one log file in place (``check``: only say what would change); returns the changes."""
    changes: list[str] = []
    if path.suffix == ".json":
        data = migrate(json.loads(path.read_text()), changes)
        text = json.dumps(data, indent=1) + "\n"
    elif path.suffix == ".jsonl":
        lines = [json.dumps(migrate(json.loads(line), changes, f"line {i + 1}"))
                 for i, line in enumerate(path.read_text().splitlines()) if line.strip()]
        text = "\n".join(lines) + ("\n" if lines else "")
    elif path.suffix == ".pt":
        import torch

        state = torch.load(path, map_location="cpu", weights_only=True)
        state = {**state, "config": migrate({"config": state["config"]}, changes)["config"],
                 "records": migrate(state.get("records", []), changes, "/records")}
    else:
        raise ValueError(f"{path}: not a log (expected .json, .jsonl or a checkpoint .pt)")
    if changes and not check:
        if path.suffix == ".pt":
            import torch

            torch.save(state, path)
        else:
            path.write_text(text)
    return changes


def logs(paths: list[Path]) -> list[Path]:
    """The log files of ``paths`` (a folder: every ``.json``, ``.jsonl`` and ``checkpoint.pt`` under it)."""
    out = []
    for path in paths:
        if path.is_dir():
            out += sorted(p for p in path.rglob("*") if p.suffix in (".json", ".jsonl") or p.name == "checkpoint.pt")
        elif path.is_file():
            out.append(path)
        else:
            raise FileNotFoundError(f"{path}: no such file or folder")
    return out


def main(argv: list[str] | None = None) -> int:
    from oar_lite.settings import parser

    ap = parser(__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="*", type=Path, help="log files or folders (default: the shipped logs)")
    ap.add_argument("--check", action="store_true", help="say what would change and change nothing")
    args = ap.parse_args(argv)
    changed = 0
    for path in logs(args.paths or [SHIPPED]):
        changes = migrate_file(path, check=args.check)
        if changes:
            changed += 1
            print(f"{path}: {len(changes)} change(s){' needed' if args.check else ''}")
            for change in changes[:20]:
                print("   ", change)
    print(f"{changed} log(s) {'to migrate' if args.check else 'migrated'}")
    return 1 if args.check and changed else 0


if __name__ == "__main__":
    raise SystemExit(main())
