"""Course tooling: student notebooks, grading, the checks of both, and the course site.

    python scripts/course.py student        # otter assign: build/course/{student,autograder}
    python scripts/course.py check-student  # student notebooks run, stubs fail, solutions pass
    python scripts/course.py grade DIR      # grade a folder of completed student notebooks
    python scripts/course.py site           # build/site: static HTML of the executed series
    python scripts/course.py check-site     # one page per notebook, no broken internal links

The exercises are written in the source notebooks in otter-grader's format
(https://otter-grader.readthedocs.io, "otter assign"): a raw cell ``# BEGIN QUESTION`` with the
question's ``name``, the solution code between ``# BEGIN SOLUTION`` / ``# END SOLUTION`` (or a
line ending in ``# SOLUTION``), raw ``# BEGIN TESTS`` / ``# END TESTS`` around the test cells
(plain ``assert`` statements, so the source notebooks check their own solutions when they run,
under nbval too), and raw ``# END QUESTION``. The assignment configuration is added here, so
the source notebooks carry no otter settings. Question names start with the notebook's number
(``ex02_...``) so that the tests of every notebook share one ``tests/`` folder.
"""
from __future__ import annotations

import argparse
import csv
import html.parser
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from urllib.parse import unquote, urlparse

import nbformat

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
BUILD = ROOT / "build"

ASSIGNMENT_CONFIG = """# ASSIGNMENT CONFIG
init_cell: true
check_all_cell: false
export_cell: false
run_tests: false
generate: true
tests:
  files: true
"""

INIT_CELL = """# Initialise otter-grader, which runs the checks of the exercises (`grader.check("...")`).
try:
    import otter
except ImportError:  # e.g. a fresh Colab runtime
    %pip install -q otter-grader
    import otter
grader = otter.Notebook({name!r}, tests_dir="tests")"""

RUNTIME = re.compile(r"Notebook runtime: (\d+) s")


def notebooks() -> list[Path]:
    """Every notebook of the series, in order."""
    return sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))


def _raw_command(cell) -> str | None:
    if cell.cell_type != "raw":
        return None
    first = cell.source.strip().splitlines()[0] if cell.source.strip() else ""
    return first.strip() if first.startswith("# BEGIN") or first.startswith("# END") else None


def questions(nb) -> list[dict]:
    """The graded questions of a source notebook: ``[{name, points, solution, tests}]`` where
    ``solution`` is the source of the solution cells and ``tests`` that of the test cells."""
    found, current, part = [], None, None
    for cell in nb.cells:
        command = _raw_command(cell)
        if command == "# BEGIN QUESTION":
            config = dict(line.split(":", 1) for line in cell.source.strip().splitlines()[1:] if ":" in line)
            current = {"name": config["name"].strip(), "points": float(config.get("points", 1)),
                       "solution": [], "tests": []}
            part = "solution"
        elif command == "# BEGIN TESTS":
            part = "tests"
        elif command == "# END TESTS":
            part = None
        elif command == "# END QUESTION":
            found.append(current)
            current, part = None, None
        elif current is not None and part is not None and cell.cell_type == "code":
            current[part].append(cell.source)
    if current is not None:
        raise ValueError(f"question {current['name']!r} has no '# END QUESTION' raw cell")
    return found


def student(out: Path = BUILD / "course", paths: list[Path] | None = None) -> None:
    """Student notebooks (solutions replaced by ``...``, tests kept as ``grader.check`` cells)
    in ``out/student`` (with ``tests/``), otter's autograder zips in ``out/autograder``; of
    every notebook of the series, or of ``paths``."""
    student_dir, autograder_dir = out / "student", out / "autograder"
    for folder in (student_dir, autograder_dir):
        shutil.rmtree(folder, ignore_errors=True)
        (folder / "tests").mkdir(parents=True) if folder is student_dir else folder.mkdir(parents=True)
    for path in paths or notebooks():
        nb = nbformat.read(path, as_version=4)
        if not questions(nb):
            print(f"{path.name}: no graded questions, skipped")
            continue
        with tempfile.TemporaryDirectory() as tmp:
            source = Path(tmp) / path.name
            nb.cells.insert(0, nbformat.v4.new_raw_cell(ASSIGNMENT_CONFIG))
            nbformat.write(nb, source)
            dist = Path(tmp) / "dist"
            subprocess.run([sys.executable, "-m", "otter", "assign", str(source), str(dist)], check=True,
                           cwd=tmp, stdout=subprocess.DEVNULL)
            generated = nbformat.read(dist / "student" / path.name, as_version=4)
            init = next(i for i, c in enumerate(generated.cells) if "otter.Notebook(" in c.source)
            generated.cells[init].source = INIT_CELL.format(name=path.name)
            nbformat.write(generated, student_dir / path.name)
            for test in (dist / "student" / "tests").glob("*.py"):
                shutil.copy(test, student_dir / "tests" / test.name)
            (zip_path,) = (dist / "autograder").glob("*.zip")
            shutil.copy(zip_path, autograder_dir / f"{path.stem}.zip")
        print(f"{path.name}: {len(questions(nbformat.read(path, as_version=4)))} graded questions")
    print(f"student notebooks in {student_dir}, autograder zips in {autograder_dir}")


def _environment() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    return env


CHECK_CELL = """import json as _json
print("OTTER-GRADES " + _json.dumps({{q: grader.check(q).grade for q in {names!r}}}))"""


def _grades(outputs) -> dict:
    for output in outputs:
        text = output.get("text", "")
        if output.get("output_type") == "stream" and "OTTER-GRADES " in text:
            return json.loads(text.split("OTTER-GRADES ", 1)[1])
    raise RuntimeError(f"no grades printed: {outputs}")


def check_student(out: Path = BUILD / "course", only: list[str] | None = None, timeout: int = 900) -> None:
    """Execute every student notebook (it must run without an error), check that each graded
    question fails with the blank stub, then run the solution cells of the source notebook in
    the same kernel and check that each question passes. Raises AssertionError otherwise."""
    from nbclient import NotebookClient

    student_dir = out / "student"
    failures = []
    for path in notebooks():
        target = student_dir / path.name
        if only and not any(path.name.startswith(o) for o in only):
            continue
        qs = questions(nbformat.read(path, as_version=4))
        if not qs:
            continue
        if not target.exists():
            raise FileNotFoundError(f"{target} is missing: run `python scripts/course.py student` first")
        nb = nbformat.read(target, as_version=4)
        os.environ.update({k: v for k, v in _environment().items() if k == "PYTHONPATH"})
        client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                                resources={"metadata": {"path": str(student_dir)}})
        names = [q["name"] for q in qs]
        with client.setup_kernel():
            for index, cell in enumerate(nb.cells):
                client.execute_cell(cell, index)        # raises CellExecutionError on an error
            probe = nbformat.v4.new_code_cell(CHECK_CELL.format(names=names))
            nb.cells.append(probe)
            client.execute_cell(probe, len(nb.cells) - 1)
            blank = _grades(probe.outputs)
            for q in qs:
                for source in q["solution"]:
                    cell = nbformat.v4.new_code_cell(source)
                    nb.cells.append(cell)
                    client.execute_cell(cell, len(nb.cells) - 1)
            probe = nbformat.v4.new_code_cell(CHECK_CELL.format(names=names))
            nb.cells.append(probe)
            client.execute_cell(probe, len(nb.cells) - 1)
            solved = _grades(probe.outputs)
        for name in names:
            status = "ok" if blank[name] < 1 and solved[name] == 1 else "WRONG"
            print(f"{path.name} {name}: stub {blank[name]:.2f}, solution {solved[name]:.2f}  {status}")
            if status != "ok":
                failures.append(f"{path.name} {name}: stub {blank[name]}, solution {solved[name]}")
    assert not failures, "graded questions that do not fail on the stub or pass on the solution:\n" + "\n".join(failures)


def grade(submissions: Path, out: Path = BUILD / "course") -> Path:
    """Grade every notebook under ``submissions`` (any layout, e.g. one folder per student)
    with otter's autograder for the notebook of the same name (``otter run``, no Docker).
    Writes ``out/grades/grades.csv`` (submission, question, score, possible) and returns it."""
    autograder_dir, grades_dir = out / "autograder", out / "grades"
    grades_dir.mkdir(parents=True, exist_ok=True)
    rows = []
    for submission in sorted(Path(submissions).rglob("*.ipynb")):
        if ".ipynb_checkpoints" in submission.parts:
            continue
        zip_path = autograder_dir / f"{submission.stem}.zip"
        if not zip_path.exists():
            print(f"{submission}: no autograder {zip_path.name}, skipped")
            continue
        result_dir = grades_dir / submission.relative_to(submissions).with_suffix("")
        result_dir.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "otter", "run", "-a", str(zip_path), "-o", str(result_dir),
                        "--no-logo", str(submission)], check=True, env=_environment())
        results = json.loads((result_dir / "results.json").read_text())
        for test in results["tests"]:                  # otter's Gradescope-format results
            if test.get("score") is not None and test.get("max_score") is not None:
                rows.append([str(submission), test["name"], test["score"], test["max_score"]])
    table = grades_dir / "grades.csv"
    with table.open("w", newline="") as f:
        csv.writer(f).writerows([["submission", "question", "score", "possible"], *rows])
    print(f"{len(rows)} graded questions -> {table}")
    return table


# ---- the course site -----------------------------------------------------------------------

def _header(nb) -> dict:
    """Title, objectives and prerequisites from a notebook's first markdown cell."""
    first = next(c for c in nb.cells if c.cell_type == "markdown").source
    title = first.splitlines()[0].lstrip("# ").strip()
    sections = dict(re.findall(r"^### (\w+)\s*\n(.*?)(?=^### |\Z)", first, flags=re.MULTILINE | re.DOTALL))
    return {"title": title, "objectives": sections.get("Objectives", "").strip(),
            "prerequisites": sections.get("Prerequisites", "").strip()}


def runtime(nb) -> int | None:
    """Seconds the committed run took, read from the notebook's own last output."""
    for cell in reversed(nb.cells):
        for output in cell.get("outputs", []):
            match = RUNTIME.search(output.get("text", ""))
            if match:
                return int(match.group(1))
    return None


def _site_links(text: str) -> str:
    """Repository-relative links of the notebooks, rewritten for the site's pages."""
    text = re.sub(r"\]\((?!https?:|#|mailto:)([^)\s]+?)\.(?:md|ipynb)(#[^)]*)?\)",
                  lambda m: f"]({m.group(1)}.html{m.group(2) or ''})", text)
    return re.sub(r"\]\(((?:\.\./)*)README\.html", r"](\1project.html", text)


def index_page(paths: list[Path]) -> str:
    """The site's index: each notebook's objectives and prerequisites, with the runtime of
    its committed run (read from its output, so it is never typed by hand)."""
    lines = ["# oar-lite: credit assignment for GRPO, a course", "",
             "Outcome-grounded Advantage Reshaping (OAR, [arXiv 2601.07408](https://arxiv.org/abs/2601.07408)) "
             "from scratch, in notebooks that run on a CPU. Each page below is the executed notebook; "
             "the student versions (exercises without solutions, with checks) come from `make student`.", ""]
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        head, seconds = _header(nb), runtime(nb)
        lines += [f"## [{head['title']}](notebooks/{path.stem}.html)", ""]
        if seconds is not None:
            lines += [f"*Committed run: {seconds} s on a CPU (printed by its last cell).*", ""]
        lines += ["**Objectives**", "", head["objectives"] or "(none stated)", "",
                  "**Prerequisites**", "", head["prerequisites"] or "(none stated)", ""]
    return "\n".join(lines)


def site(out: Path = BUILD / "site") -> None:
    """Static HTML of the executed series with mkdocs + mkdocs-jupyter (nothing is executed
    and nothing fetched at build time): ``out/index.html`` and ``out/notebooks/<name>.html``."""
    src = BUILD / "site-src"
    shutil.rmtree(src, ignore_errors=True)
    docs = src / "docs"
    (docs / "notebooks").mkdir(parents=True)
    paths = notebooks()
    (docs / "index.md").write_text(index_page(paths))
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        nb.cells = [c for c in nb.cells if c.cell_type != "raw"]   # otter's markup is not for readers
        for cell in nb.cells:
            if cell.cell_type == "markdown":
                cell.source = _site_links(cell.source)
            for output in cell.get("outputs", []):     # markdown rendered by code (e.g. 00's map)
                if "text/markdown" in output.get("data", {}):
                    output["data"]["text/markdown"] = _site_links(output["data"]["text/markdown"])
        nbformat.write(nb, docs / "notebooks" / path.name)
    shutil.copy(ROOT / "README.md", docs / "project.md")   # mkdocs reserves README.md for the index
    for extra in ["docs/trl.md", "docs/oar-spec.md", "benchmarks/RESULTS.md", "docs/compare.png", "docs/scaling.png"]:
        if (ROOT / extra).exists():
            (docs / extra).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(ROOT / extra, docs / extra)
    nav = [{"Objectives": "index.md"}] + [{_header(nbformat.read(p, as_version=4))["title"]: f"notebooks/{p.name}"}
                                          for p in paths]
    config = {"site_name": "oar-lite course", "docs_dir": "docs", "site_dir": str(out.resolve()),
              "use_directory_urls": False, "theme": {"name": "mkdocs"}, "nav": nav,
              "plugins": [{"mkdocs-jupyter": {"execute": False, "include_source": True, "ignore_h1_titles": True}}],
              "markdown_extensions": ["tables"], "validation": {"links": {"not_found": "warn"}}}
    (src / "mkdocs.yml").write_text(json.dumps(config, indent=1))   # JSON is YAML
    subprocess.run([sys.executable, "-m", "mkdocs", "build", "-q", "-f", str(src / "mkdocs.yml")], check=True)
    print(f"site: {out}/index.html ({len(paths)} notebooks)")


class _Links(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.links: list[str] = []

    def handle_starttag(self, tag, attrs):
        for key, value in attrs:
            if key in ("href", "src") and value:
                self.links.append(value)


def check_site(out: Path = BUILD / "site") -> None:
    """One page per notebook, and every internal link of every page resolves to a file."""
    if not (out / "index.html").exists():
        raise FileNotFoundError(f"{out}/index.html missing: run `python scripts/course.py site` first")
    missing_pages = [p.name for p in notebooks() if not (out / "notebooks" / f"{p.stem}.html").exists()]
    broken = []
    pages = sorted(out.rglob("*.html"))
    for page in pages:
        parser = _Links()
        parser.feed(page.read_text(errors="replace"))
        for link in parser.links:
            parsed = urlparse(link)
            if parsed.scheme or link.startswith(("#", "//", "data:", "mailto:")):
                continue
            path = unquote(parsed.path)
            target = (out / path.lstrip("/") if path.startswith("/") else page.parent / path).resolve()
            if parsed.path and not target.exists():
                broken.append(f"{page.relative_to(out)} -> {link}")
    assert not missing_pages, f"notebooks without a page: {missing_pages}"
    assert not broken, "broken internal links:\n" + "\n".join(sorted(set(broken)))
    print(f"site ok: {len(pages)} pages, one per notebook ({len(notebooks())}), no broken internal links")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("student")
    check = sub.add_parser("check-student")
    check.add_argument("--only", nargs="*", help="notebook name prefixes, e.g. 00 03")
    graded = sub.add_parser("grade")
    graded.add_argument("submissions", type=Path)
    sub.add_parser("site")
    sub.add_parser("check-site")
    args = parser.parse_args(argv)
    if args.command == "student":
        student()
    elif args.command == "check-student":
        check_student(only=args.only)
    elif args.command == "grade":
        grade(args.submissions)
    elif args.command == "site":
        site()
    else:
        check_site()


if __name__ == "__main__":
    main()
