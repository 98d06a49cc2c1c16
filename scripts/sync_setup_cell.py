#!/usr/bin/env python
"""Write ``notebooks/setup_cell.py`` into the first code cell of every notebook, the one
place the Colab set-up lives. Only that cell's source changes; outputs, the other cells
and the file's formatting (nbformat's: one-space indent, UTF-8) stay as they were.

    python scripts/sync_setup_cell.py            # rewrite the notebooks that differ
    python scripts/sync_setup_cell.py --check    # exit 1 and name them, change nothing
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = ROOT / "notebooks" / "setup_cell.py"


def template_source(path: Path = TEMPLATE) -> str:
    """The setup cell's source (the template without its final newline, as Jupyter stores it)."""
    return path.read_text(encoding="utf-8").rstrip("\n")


def setup_cell(notebook: dict) -> dict:
    """The notebook's first code cell (ValueError if it has none)."""
    for cell in notebook["cells"]:
        if cell["cell_type"] == "code":
            return cell
    raise ValueError("the notebook has no code cell to hold the setup")


def cell_source(cell: dict) -> str:
    source = cell["source"]
    return source if isinstance(source, str) else "".join(source)


def sync(paths, source: str, check: bool = False) -> list[Path]:
    """Notebooks whose setup cell differs from ``source``; rewritten unless ``check``."""
    stale = []
    for path in paths:
        notebook = json.loads(path.read_text(encoding="utf-8"))
        cell = setup_cell(notebook)
        if cell_source(cell) == source:
            continue
        stale.append(path)
        if not check:
            cell["source"] = source.splitlines(keepends=True)
            path.write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return stale


def main(argv=None) -> int:
    from oar_lite.settings import parser

    ap = parser(__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="only report notebooks that differ")
    ap.add_argument("notebooks", nargs="*", type=Path, help="default: notebooks/*.ipynb")
    args = ap.parse_args(argv)
    paths = args.notebooks or sorted((ROOT / "notebooks").glob("*.ipynb"))
    stale = sync(paths, template_source(), check=args.check)
    for path in stale:
        print(f"{'differs' if args.check else 'updated'}: {path}")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
