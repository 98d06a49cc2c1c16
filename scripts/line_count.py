"""Lines of the package and the benchmarks, split into code, docstrings, comments and blank
lines, at the working tree or at any git revision (issue 29 asks for the split, so that a
refactor that moves prose into docstrings is not read as one that adds code)::

    python scripts/line_count.py                  # the working tree
    python scripts/line_count.py 6422dfa HEAD     # two revisions side by side
"""
from __future__ import annotations

import argparse
import ast
import io
import subprocess
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("oar_lite", "benchmarks")
KINDS = ("code", "docstring", "comment", "blank")


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
    """Per folder of `FOLDERS`, the summed `classify` counts and ``total``."""
    out = {folder: dict.fromkeys((*KINDS, "total"), 0) for folder in FOLDERS}
    for path, source in files(revision).items():
        folder = out[path.split("/")[0]]
        for k, n in classify(source).items():
            folder[k] += n
            folder["total"] += n
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    ap.add_argument("revisions", nargs="*", help="git revisions (default: the working tree)")
    args = ap.parse_args(argv)
    print("| revision | folder | " + " | ".join(KINDS) + " | total |")
    print("|---|---|" + "---|" * (len(KINDS) + 1))
    for revision in args.revisions or [None]:
        counts = count(revision)
        counts["both"] = {k: sum(c[k] for c in counts.values()) for k in (*KINDS, "total")}
        for folder, c in counts.items():
            print(f"| {revision or 'working tree'} | {folder} | " + " | ".join(str(c[k]) for k in (*KINDS, "total")) + " |")


if __name__ == "__main__":
    main()
