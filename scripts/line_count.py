"""Lines of the package's layers and the benchmarks, split into code, docstrings, comments and
blank lines, at the working tree or at any git revision (issue 29 asks for the split, so that a
refactor that moves prose into docstrings is not read as one that adds code; issue 40 for the
layers: the library a researcher imports, the course and the lab beside it)::

    python scripts/line_count.py                  # the working tree
    python scripts/line_count.py e2b1974 HEAD     # two revisions side by side

Layers (`layer_of`): ``library`` is ``oar_lite/*.py`` and ``oar_lite/attribution/``;
``course`` is ``oar_lite/course/``; ``lab`` is ``oar_lite/lab/`` (its command line,
``lab/__main__.py``, included) and, at revisions before issue 47, ``oar_lite/__main__.py`` (the
lab's command line then); ``benchmarks``.
At revisions before the layers (e2b1974 and earlier) the course and lab modules stood flat in
``oar_lite/`` and are mapped by module name (`COURSE_MODULES`, `LAB_MODULES`).

A second table puts the two algorithms beside what dispatches to them (issue 47: dispatch no
larger than the algorithms): `GROUPS`, files of ``oar_lite/attribution/``.
"""
from __future__ import annotations

import ast
import io
import subprocess
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("oar_lite", "benchmarks")
KINDS = ("code", "docstring", "comment", "blank")
LAYERS = ("library", "course", "lab", "benchmarks")
COURSE_MODULES = {"toy", "oracle", "problems", "models", "viz", "exercises"}
LAB_MODULES = {"compare", "cli", "report", "plots", "stats", "credit", "gradient_quality", "regime", "ground_truth",
               "lora_learning", "findings", "progress", "recipes", "__main__"}
"""Modules of the course and the lab when they stood flat in ``oar_lite/`` (before the layers)."""
GROUPS = {"algorithms (OAR-P, OAR-G)": ("oar_p.py", "oar_g.py"),
          "dispatch (registry, config, scoring, controls)": ("registry.py", "config.py", "scoring.py", "controls.py")}
"""Files of ``oar_lite/attribution/`` counted together (``controls.py``: the library's until issue 47)."""


def layer_of(path: str) -> str:
    """The layer of a ``.py`` path relative to the repository root (`LAYERS`)."""
    parts = path.split("/")
    if parts[0] == "benchmarks":
        return "benchmarks"
    if parts[1] in ("course", "lab"):
        return parts[1]
    if len(parts) == 2:
        name = parts[1].removesuffix(".py")
        return "course" if name in COURSE_MODULES else "lab" if name in LAB_MODULES else "library"
    return "library"  # oar_lite/attribution/


def classify(source: str) -> dict[str, int]:
    """Count the lines of one Python source by kind. A docstring is the string that opens a
    module, class or function; a comment line holds only a comment; a line with code and a
    trailing comment is code."""
    lines = source.splitlines()
    kind = ["code"] * len(lines)
    for i, line in enumerate(lines):
        if not line.strip():
            kind[i] = "blank"
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT and not lines[tok.start[0] - 1][:tok.start[1]].strip():
            kind[tok.start[0] - 1] = "comment"
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                for i in range(first.lineno - 1, first.end_lineno):
                    kind[i] = "docstring"
    return {k: kind.count(k) for k in KINDS}


def files(revision: str | None) -> dict[str, str]:
    """``{path: source}`` of the ``.py`` files under `FOLDERS`, in the working tree or at ``revision``."""
    if revision is None:
        return {str(p.relative_to(ROOT)): p.read_text() for folder in FOLDERS for p in sorted((ROOT / folder).rglob("*.py"))}
    names = subprocess.run(["git", "ls-tree", "-r", "--name-only", revision, *FOLDERS], cwd=ROOT, check=True,
                           capture_output=True, text=True).stdout.split()
    return {n: subprocess.run(["git", "show", f"{revision}:{n}"], cwd=ROOT, check=True, capture_output=True,
                              text=True).stdout for n in names if n.endswith(".py")}


def count(revision: str | None) -> dict[str, dict[str, int]]:
    """Per layer of `LAYERS`, the summed `classify` counts and ``total``."""
    out = {layer: dict.fromkeys((*KINDS, "total"), 0) for layer in LAYERS}
    for path, source in files(revision).items():
        layer = out[layer_of(path)]
        for k, n in classify(source).items():
            layer[k] += n
            layer["total"] += n
    return out


def count_groups(revision: str | None) -> dict[str, dict[str, int]]:
    """Per group of `GROUPS`, the summed `classify` counts and ``total`` of its files that exist."""
    sources = files(revision)
    out = {}
    for group, names in GROUPS.items():
        out[group] = dict.fromkeys((*KINDS, "total"), 0)
        for name in names:
            for k, n in classify(sources.get(f"oar_lite/attribution/{name}", "")).items():
                out[group][k] += n
                out[group]["total"] += n
    return out


def main(argv=None) -> None:
    from oar_lite.settings import parser

    ap = parser(__doc__.split("\n\n")[0])
    ap.add_argument("revisions", nargs="*", help="git revisions (default: the working tree)")
    args = ap.parse_args(argv)
    print("| revision | layer | " + " | ".join(KINDS) + " | total |")
    print("|---|---|" + "---|" * (len(KINDS) + 1))
    for revision in args.revisions or [None]:
        counts = count(revision)
        counts["all"] = {k: sum(c[k] for c in counts.values()) for k in (*KINDS, "total")}
        for layer, c in counts.items():
            print(f"| {revision or 'working tree'} | {layer} | " + " | ".join(str(c[k]) for k in (*KINDS, "total")) + " |")
    print("\n| revision | group | " + " | ".join(KINDS) + " | total |")
    print("|---|---|" + "---|" * (len(KINDS) + 1))
    for revision in args.revisions or [None]:
        for group, c in count_groups(revision).items():
            print(f"| {revision or 'working tree'} | {group} | " + " | ".join(str(c[k]) for k in (*KINDS, "total")) + " |")


if __name__ == "__main__":
    main()
