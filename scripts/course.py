"""Course tooling: student notebooks, grading, the checks of both, and the course sites.

    python scripts/course.py student        # student/*.ipynb (committed) + build/course/{autograder,tests}
    python scripts/course.py check-student  # student notebooks run; stubs and package shortcuts fail,
                                            # solutions pass (public and hidden tests)
    python scripts/course.py grade DIR      # grade a folder of completed student notebooks
    python scripts/course.py check-grade    # grade hand-made submissions: solved, shortcuts, blank, renamed
    python scripts/course.py site           # build/site/{teacher,student}: static HTML, readable offline
    python scripts/course.py check-site     # pages, links, no external resource, no solution for students

The exercises are written in the source notebooks in otter-grader's format
(https://otter-grader.readthedocs.io, "otter assign"): a raw cell ``# BEGIN QUESTION`` with the
question's ``name``, the solution between raw ``# BEGIN SOLUTION`` / ``# END SOLUTION`` cells
(code between ``# BEGIN SOLUTION`` / ``# END SOLUTION`` comments or on a line ending in
``# SOLUTION`` becomes ``...`` for students; a markdown cell there, the model answer to the
question's "why", is left out of the student version), raw ``# BEGIN TESTS`` / ``# END TESTS``
around the test cells (plain ``assert`` statements, so the source notebooks check their own
solutions when they run, under nbval too), and raw ``# END QUESTION``. A test cell whose first
line is ``# HIDDEN`` is hidden: students never see it, the autograder runs it. Public tests check
only the type and shape of an answer; the hidden ones check its values, and for an exercise that
re-implements a package function they run the student's code inside `oar_lite.course.exercises.forbid`,
so a submission that only calls the package fails (scripts/exercise_shortcuts.py holds such a
submission for each; `check-student` proves it fails). The assignment configuration is added
here, so the source notebooks carry no otter settings. Question names start with the notebook's
number (``ex02_...``).
"""
from __future__ import annotations

import argparse
import copy
import csv
import hashlib
import html.parser
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from urllib.parse import unquote, urlparse

import nbformat

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
STUDENT = ROOT / "student"          # the student notebooks, committed so that their Colab badge opens them
BUILD = ROOT / "build"
COURSE = BUILD / "course"           # autograder zips, the full (hidden + public) tests, grades
SITE = BUILD / "site"
MATHJAX = ROOT / "node_modules" / "mathjax" / "es5"   # package.json; `npm ci` installs it

ASSIGNMENT_CONFIG = """# ASSIGNMENT CONFIG
name: {name}
init_cell: true
check_all_cell: false
export_cell: false
run_tests: false
generate:
  print_summary: false
tests:
  files: true
"""
# print_summary: false. Otter's summary verifies the scores against the log (.OTTER_LOG) that a
# student's grader.export() zip carries; a plain .ipynb submission has none, so otter printed
# "No log found with which to verify student scores" for every one. Scores come from
# re-executing the notebook, which is what grading here wants; `grade` writes its own report.

INIT_CELL = """# The checks of the exercises below (otter-grader): `grader.check("<name>")` runs the public
# tests of an exercise (they check the type and shape of an answer; the values are graded when
# the notebook is handed in). The tests are written next to this notebook, so this works in
# JupyterLab, on Colab and wherever the notebook was downloaded.
import os
try:
    import otter
except ImportError:  # e.g. a fresh Colab runtime
    %pip install -q otter-grader
    import otter
os.makedirs("exercise_checks", exist_ok=True)
for _name, _test in _PUBLIC_TESTS.items():
    with open(os.path.join("exercise_checks", _name + ".py"), "w") as _file:
        _file.write(_test)
grader = otter.Notebook({notebook!r}, tests_dir="exercise_checks")"""

COLAB = re.compile(r"(https://colab\.research\.google\.com/github/[^/\s)]+/[^/\s)]+/blob/[^/\s)]+/)notebooks/")
BADGE = re.compile(r"\[!\[Open In Colab\]\([^)]*\)\]\(([^)]+)\)", re.IGNORECASE)
RUN_RECORD = re.compile(r"Notebook runtime: (\d+) s(?:; load average over the last 1 / 5 / 15 min: "
                        r"([\d.]+) / ([\d.]+) / ([\d.]+) on (\d+) cores)?")


def notebooks() -> list[Path]:
    """Every notebook of the series, in order."""
    return sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))


def _read(path: Path):
    return nbformat.read(path, as_version=4)


# ---- the questions ---------------------------------------------------------------------------

def _raw_command(cell) -> str | None:
    if cell.cell_type != "raw":
        return None
    first = cell.source.strip().splitlines()[0] if cell.source.strip() else ""
    return first.strip() if first.startswith("# BEGIN") or first.startswith("# END") else None


def questions(nb) -> list[dict]:
    """The graded questions of a source notebook: ``[{name, points, solution, answers, tests,
    hidden, cells}]``: ``solution`` the source of the solution code cells, ``answers`` that of
    the model answers (markdown in the solution), ``tests`` / ``hidden`` that of the public /
    hidden test cells, ``cells`` the indices of every cell of the question."""
    found, current, part = [], None, None
    for index, cell in enumerate(nb.cells):
        command = _raw_command(cell)
        if current is not None:
            current["cells"].append(index)
        if command == "# BEGIN QUESTION":
            config = dict(line.split(":", 1) for line in cell.source.strip().splitlines()[1:] if ":" in line)
            current = {"name": config["name"].strip(), "points": float(config.get("points", 1)),
                       "solution": [], "answers": [], "tests": [], "hidden": [], "cells": [index]}
            part = None
        elif command == "# BEGIN SOLUTION":
            part = "solution"
        elif command == "# BEGIN TESTS":
            part = "tests"
        elif command in ("# END SOLUTION", "# END TESTS"):
            part = None
        elif command == "# END QUESTION":
            found.append(current)
            current, part = None, None
        elif current is not None and part == "solution":
            current["solution" if cell.cell_type == "code" else "answers"].append(cell.source)
        elif current is not None and part == "tests" and cell.cell_type == "code":
            hidden = cell.source.lstrip().lower().startswith("# hidden")
            current["hidden" if hidden else "tests"].append(cell.source)
    if current is not None:
        raise ValueError(f"question {current['name']!r} has no '# END QUESTION' raw cell")
    return found


def load_shortcuts() -> dict[str, str]:
    """``{question: code}``: for each re-implementation exercise, a submission that only calls the
    package function it re-implements (scripts/exercise_shortcuts.py); it must fail the exercise."""
    spec = importlib.util.spec_from_file_location("exercise_shortcuts", ROOT / "scripts" / "exercise_shortcuts.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return dict(module.SHORTCUTS)


# ---- student notebooks -----------------------------------------------------------------------

def _stable_ids(nb) -> None:
    """Cell ids from each cell's place and content (otter assign draws random ones), so that
    regenerating an unchanged notebook writes the same file."""
    for i, cell in enumerate(nb.cells):
        cell["id"] = hashlib.sha1(f"{i}:{cell.cell_type}:{cell.source}".encode()).hexdigest()[:8]


def _literal(text: str) -> str:
    """``text`` as a Python literal that reads like the file: a raw triple-quoted string where
    that is exact, else its repr."""
    if '"""' not in text and not text.endswith("\\") and "\r" not in text:
        return 'r"""' + text + '"""'
    return repr(text)


def _student_notebook(generated, name: str, public_tests: dict[str, str]):
    """Otter's student notebook made ready to hand out: our grader cell (public tests inside it)
    at the start of the exercises instead of otter's at the top, the Colab badge pointing at the
    student notebook, stable ids."""
    init = next(i for i, c in enumerate(generated.cells) if "otter.Notebook(" in c.source)
    del generated.cells[init]
    start = next(i for i, c in enumerate(generated.cells)
                 if c.cell_type == "markdown" and c.source.lstrip().startswith("## Exercises"))
    tests = "_PUBLIC_TESTS = {  # otter's test file of each exercise: its public checks\n" + "".join(
        f"    {k!r}: {_literal(v)},\n" for k, v in sorted(public_tests.items())) + "}\n"
    generated.cells.insert(start + 1, nbformat.v4.new_code_cell(tests + INIT_CELL.format(notebook=name)))
    first = next(c for c in generated.cells if c.cell_type == "markdown")
    first.source = COLAB.sub(r"\1student/", first.source)
    for cell in generated.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    _stable_ids(generated)
    return generated


def student(out: Path = STUDENT, course: Path = COURSE, paths: list[Path] | None = None) -> None:
    """Student notebooks (solutions replaced by ``...``, model answers and hidden tests left out,
    public tests kept as ``grader.check`` cells) in ``out``; otter's autograder zips in
    ``course/autograder`` and every notebook's full tests (hidden included) in
    ``course/tests/<notebook>``; of every notebook of the series, or of ``paths``."""
    out.mkdir(parents=True, exist_ok=True)
    for folder in (course / "autograder", course / "tests"):
        folder.mkdir(parents=True, exist_ok=True)
    for path in paths or notebooks():
        nb = _read(path)
        if not questions(nb):
            print(f"{path.name}: no graded questions, skipped")
            continue
        with tempfile.TemporaryDirectory() as tmp:
            source = Path(tmp) / path.name
            nb.cells.insert(0, nbformat.v4.new_raw_cell(ASSIGNMENT_CONFIG.format(name=path.stem)))
            nbformat.write(nb, source)
            dist = Path(tmp) / "dist"
            subprocess.run([sys.executable, "-m", "otter", "assign", str(source), str(dist)], check=True,
                           cwd=tmp, stdout=subprocess.DEVNULL)
            public = {p.stem: p.read_text() for p in sorted((dist / "student" / "tests").glob("*.py"))}
            generated = _student_notebook(_read(dist / "student" / path.name), path.name, public)
            nbformat.write(generated, out / path.name)
            (zip_path,) = (dist / "autograder").glob("*.zip")
            shutil.copy(zip_path, course / "autograder" / f"{path.stem}.zip")
            full = course / "tests" / path.stem
            shutil.rmtree(full, ignore_errors=True)
            full.mkdir(parents=True)
            with zipfile.ZipFile(zip_path) as z:
                for member in z.namelist():
                    if member.startswith("tests/") and member.endswith(".py"):
                        (full / Path(member).name).write_bytes(z.read(member))
        print(f"{path.name}: {len(questions(_read(path)))} graded questions")
    print(f"student notebooks in {out}, autograder zips in {course / 'autograder'}")


def _environment() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    return env


PROBE_CELL = """import json as _json, otter as _otter
_all_tests = _otter.Notebook({notebook!r}, tests_dir={tests!r})
print("OTTER-GRADES " + _json.dumps({{_q: [grader.check(_q, globals()).grade, _all_tests.check(_q, globals()).grade]
                                     for _q in {names!r}}}))"""


def _grades(outputs) -> dict:
    for output in outputs:
        text = output.get("text", "")
        if output.get("output_type") == "stream" and "OTTER-GRADES " in text:
            return json.loads(text.split("OTTER-GRADES ", 1)[1].splitlines()[0])
    raise RuntimeError(f"no grades printed: {outputs}")


def check_student(student_dir: Path = STUDENT, course: Path = COURSE, only: list[str] | None = None,
                  timeout: int = 900) -> None:
    """Execute every student notebook (it must run without an error) and grade each question,
    public tests and all tests (hidden included), three times in the same kernel: with the
    blank stubs (every question must fail), after the package shortcut of each re-implementation
    exercise (it must fail all tests), after the source notebook's solution cells (every question
    must pass both). Raises AssertionError otherwise."""
    from nbclient import NotebookClient

    shortcuts = load_shortcuts()
    failures, seen = [], set()
    os.environ["PYTHONPATH"] = _environment()["PYTHONPATH"]
    for path in notebooks():
        if only and not any(path.name.startswith(o) for o in only):
            continue
        qs = questions(_read(path))
        if not qs:
            continue
        target, tests = student_dir / path.name, course / "tests" / path.stem
        for needed in (target, tests):
            if not needed.exists():
                raise FileNotFoundError(f"{needed} is missing: run `python scripts/course.py student` first")
        names = [q["name"] for q in qs]
        with tempfile.TemporaryDirectory() as work:
            shutil.copy(target, Path(work) / path.name)
            nb = _read(target)
            client = NotebookClient(nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": work}})

            def run(source: str):
                cell = nbformat.v4.new_code_cell(source)
                nb.cells.append(cell)
                client.execute_cell(cell, len(nb.cells) - 1)
                return cell

            def probe() -> dict:
                return _grades(run(PROBE_CELL.format(notebook=path.name, tests=str(tests), names=names)).outputs)

            with client.setup_kernel():
                for index, cell in enumerate(list(nb.cells)):
                    client.execute_cell(cell, index)        # raises CellExecutionError on an error
                blank = probe()
                for q in qs:
                    if q["name"] in shortcuts:
                        run(shortcuts[q["name"]])
                shortcut = probe()
                for q in qs:
                    for source in q["solution"]:
                        run(source)
                solved = probe()
        for q in qs:
            name = q["name"]
            seen.add(name)
            problems = []
            if blank[name][0] >= 1 or blank[name][1] >= 1:
                problems.append("the stub passes")
            if name in shortcuts and shortcut[name][1] >= 1:
                problems.append("the package shortcut passes")
            if name in shortcuts and shortcut[name][0] < 1:
                problems.append("the package shortcut fails a public test (public tests check type and shape only)")
            if solved[name] != [1, 1]:
                problems.append("the solution fails")
            line = (f"{path.name} {name}: stub {blank[name][1]:.2f}, "
                    + (f"package shortcut {shortcut[name][1]:.2f} (public {shortcut[name][0]:.2f}), " if name in shortcuts else "")
                    + f"solution {solved[name][1]:.2f} (public {solved[name][0]:.2f})")
            print(line + ("  " + "; ".join(problems) if problems else "  ok"))
            failures += [f"{line}: {p}" for p in problems]
    unknown = sorted(set(shortcuts) - seen) if not only else []
    assert not unknown, f"shortcuts for questions that do not exist: {unknown}"
    assert not failures, "exercises that do not test what they should:\n" + "\n".join(failures)


# ---- grading ---------------------------------------------------------------------------------

def _failure(output: str) -> str:
    """The first error line of a failed test case in otter's output ('' if none): the first
    failure of a doctest is the one that says why (the later ones follow from it)."""
    lines = [l.strip() for l in output.splitlines() if re.match(r"\s*[\w.]*(?:Error|Exception)(?::.*)?$", l)]
    return lines[0][:300] if lines else ""


def grade(submissions: Path, course: Path = COURSE, out: Path | None = None) -> Path:
    """Grade every notebook under ``submissions`` (any layout: one folder per student, or files
    named anyhow, as an LMS downloads them). Each is matched to its autograder by the assignment
    name otter wrote into the notebook's metadata, not by its file name, and run with ``otter
    run`` (no Docker). Writes ``course/grades/grades.csv`` (student, submission, notebook,
    question, score, possible, failure) and ``report.md`` (per student and per question, what
    failed and why) in ``out`` (default ``course/grades``); otter's own output for each
    submission is in its folder's ``otter.log``. Returns the csv's path."""
    submissions = Path(submissions)
    autograders = {p.stem: p for p in sorted((course / "autograder").glob("*.zip"))}
    if not autograders:
        raise FileNotFoundError(f"no autograder in {course / 'autograder'}: run `make student` first")
    grades_dir = out or course / "grades"
    grades_dir.mkdir(parents=True, exist_ok=True)
    rows = []
    for submission in sorted(submissions.rglob("*.ipynb")):
        if ".ipynb_checkpoints" in submission.parts:
            continue
        relative = submission.relative_to(submissions)
        who = relative.parts[0] if len(relative.parts) > 1 else submission.stem
        try:
            name = _read(submission).metadata.get("otter", {}).get("assignment_name")
        except Exception as err:  # not a notebook nbformat can read
            rows.append([who, str(relative), None, None, 0, None, f"unreadable notebook: {err}"])
            continue
        if name not in autograders:
            rows.append([who, str(relative), name, None, 0, None,
                         f"no autograder for assignment {name!r} (not a student notebook of this course?)"])
            continue
        result_dir = grades_dir / relative.with_suffix("")
        result_dir.mkdir(parents=True, exist_ok=True)
        proc = subprocess.run([sys.executable, "-m", "otter", "run", "-a", str(autograders[name]), "-o", str(result_dir),
                               "--no-logo", str(submission)], env=_environment(), capture_output=True, text=True)
        (result_dir / "otter.log").write_text(proc.stdout + proc.stderr)
        results = result_dir / "results.json"
        if proc.returncode != 0 or not results.exists():
            rows.append([who, str(relative), name, None, 0, None,
                         f"otter run failed (exit {proc.returncode}): see {result_dir / 'otter.log'}"])
            continue
        for test in json.loads(results.read_text())["tests"]:     # otter's Gradescope-format results
            if test.get("max_score") is None:
                continue
            failed = test["score"] < test["max_score"]
            rows.append([who, str(relative), name, test["name"].split(" ")[0], test["score"], test["max_score"],
                         _failure(test.get("output", "")) or ("failed" if failed else "")])
    table = grades_dir / "grades.csv"
    with table.open("w", newline="") as f:
        csv.writer(f).writerows([["student", "submission", "notebook", "question", "score", "possible", "failure"], *rows])
    report = ["# Grades", ""]
    for who in sorted({r[0] for r in rows}):
        mine = [r for r in rows if r[0] == who]
        got, possible = sum(r[4] or 0 for r in mine), sum(r[5] or 0 for r in mine)
        report += [f"## {who}: {got:g} of {possible:g}", ""]
        report += [f"- {r[2] or r[1]} {r[3] or ''}: {r[4]:g}/{r[5]:g}" + (f", failed: {r[6]}" if r[6] else "")
                   if r[5] is not None else f"- {r[1]}: {r[6]}" for r in mine]
        report.append("")
    (grades_dir / "report.md").write_text("\n".join(report))
    print("\n".join(report))
    print(f"{len(rows)} rows -> {table}; report: {grades_dir / 'report.md'}")
    return table


def check_grade(course: Path = COURSE, notebook: str = "01_grpo_basics.ipynb") -> None:
    """`grade` on hand-made submissions of one notebook, renamed as an LMS renames them: a solved
    one (full marks), one with the package shortcuts (each re-implementation exercise fails, with
    the reason), the blank student notebook (every question fails) and a notebook that is not
    the course's (reported, not graded). Raises AssertionError otherwise."""
    source = _read(NOTEBOOKS / notebook)
    qs, shortcuts = questions(source), load_shortcuts()
    blank = _read(STUDENT / notebook)

    def submission(cells: list[str]):
        nb = copy.deepcopy(blank)
        nb.cells += [nbformat.v4.new_code_cell(c) for c in cells]
        return nb

    with tempfile.TemporaryDirectory() as tmp:
        handed_in = Path(tmp) / "handed-in"
        for who in ("alice", "bob", "carol", "dave"):
            (handed_in / who).mkdir(parents=True)
        nbformat.write(submission([c for q in qs for c in q["solution"]]), handed_in / "alice" / f"Copy of {notebook[:-6]} (1).ipynb")
        nbformat.write(submission([c for q in qs for c in ([shortcuts[q["name"]]] if q["name"] in shortcuts else q["solution"])]),
                       handed_in / "bob" / "submission.ipynb")
        nbformat.write(blank, handed_in / "carol" / notebook)
        nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1 + 1")]), handed_in / "dave" / notebook)
        with (grade(handed_in, course, out=Path(tmp) / "grades")).open() as f:
            rows = list(csv.DictReader(f))
    score = {(r["student"], r["question"]): (float(r["score"]), r["possible"], r["failure"]) for r in rows}
    problems = []
    for q in qs:
        name = q["name"]
        if score.get(("alice", name), (0,))[0] != q["points"]:
            problems.append(f"the solved submission does not get full marks on {name}: {score.get(('alice', name))}")
        if name in shortcuts and not (score[("bob", name)][0] < q["points"] and "was called" in score[("bob", name)][2]):
            problems.append(f"the package shortcut is not failed, with its reason, on {name}: {score.get(('bob', name))}")
        if score.get(("carol", name), (1,))[0] != 0:
            problems.append(f"the blank notebook scores on {name}: {score.get(('carol', name))}")
    if not any(r["student"] == "dave" and "no autograder" in r["failure"] for r in rows):
        problems.append("a notebook that is not the course's is not reported")
    assert not problems, "\n".join(problems)
    print("grading ok: matched by metadata under other file names, solved passes, shortcuts and stubs fail with reasons")


# ---- the course sites ------------------------------------------------------------------------

def _header(nb) -> dict:
    """Title, objectives and prerequisites from a notebook's first markdown cell."""
    first = next(c for c in nb.cells if c.cell_type == "markdown").source
    title = first.splitlines()[0].lstrip("# ").strip()
    sections = dict(re.findall(r"^### (\w+)\s*\n(.*?)(?=^### |\Z)", first, flags=re.MULTILINE | re.DOTALL))
    return {"title": title, "objectives": sections.get("Objectives", "").strip(),
            "prerequisites": sections.get("Prerequisites", "").strip()}


def run_record(nb) -> dict | None:
    """``{seconds, load (5-minute average, None if not recorded), cores}`` of the committed run,
    read from the notebook's own last output ("Notebook runtime: ... s; load average ...")."""
    for cell in reversed(nb.cells):
        for output in cell.get("outputs", []):
            match = RUN_RECORD.search(output.get("text", ""))
            if match:
                seconds, _, load5, _, cores = match.groups()
                return {"seconds": int(seconds), "load": None if load5 is None else float(load5),
                        "cores": None if cores is None else int(cores)}
    return None


def runtime(nb) -> int | None:
    """Seconds the committed run took, read from the notebook's own last output."""
    record = run_record(nb)
    return None if record is None else record["seconds"]


def describe_run(record: dict | None) -> str:
    """The committed run's time in words, with the machine's load: a time measured on a busy
    machine (5-minute load average at least its number of cores) says so."""
    if record is None:
        return "not run yet"
    text = f"{record['seconds']} s"
    if record["load"] is None:
        return text + " (machine load not recorded)"
    text += f" on {record['cores']} cores at load average {record['load']:.1f}"
    if record["load"] >= record["cores"]:
        text += ": a busy machine, expect less on an idle one"
    return text


def _site_links(text: str) -> str:
    """Repository-relative links of the notebooks, rewritten for the site's pages."""
    text = re.sub(r"\]\((?!https?:|#|mailto:)([^)\s]+?)\.(?:md|ipynb)(#[^)]*)?\)",
                  lambda m: f"]({m.group(1)}.html{m.group(2) or ''})", text)
    return re.sub(r"\]\(((?:\.\./)*)README\.html", r"](\1project.html", text)


def _for_readers(nb):
    """A notebook as the site shows it: no raw cells (otter's markup), links to the site's pages,
    the Colab badge as a text link (its image is on the web), widgets replaced by the static
    figure they carry (a static page has no kernel to move a slider)."""
    nb = copy.deepcopy(nb)
    nb.cells = [c for c in nb.cells if c.cell_type != "raw"]
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = _site_links(BADGE.sub(r"[Open this notebook in Colab](\1)", cell.source))
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if "text/markdown" in data:               # markdown rendered by code (e.g. 00's map)
                data["text/markdown"] = _site_links(data["text/markdown"])
            if "application/vnd.jupyter.widget-view+json" in data:
                del data["application/vnd.jupyter.widget-view+json"]
                if not {"image/png", "text/html"} & set(data):
                    data["text/plain"] = "(an interactive widget: run the notebook to use it)"
    nb.metadata.pop("widgets", None)
    return nb


def _with_outputs(student_nb, source_nb):
    """The student notebook with the committed outputs of the source notebook's cells that it
    shares verbatim, outside the exercises (the outputs of exercise cells would be answers)."""
    inside = {i for q in questions(source_nb) for i in q["cells"]}
    outputs = {}
    for i, cell in enumerate(source_nb.cells):
        if cell.cell_type == "code" and i not in inside:
            outputs.setdefault(cell.source, cell)
    nb = copy.deepcopy(student_nb)
    for cell in nb.cells:
        if cell.cell_type == "code" and cell.source in outputs:
            cell.outputs = copy.deepcopy(outputs[cell.source].outputs)
            cell.execution_count = outputs[cell.source].execution_count
    return nb


def index_page(paths: list[Path], kind: str) -> str:
    """A site's index: each notebook's objectives and prerequisites, with the runtime of its
    committed run and the machine's load then (read from its output, never typed by hand)."""
    other = "student" if kind == "teacher" else "teacher"
    lines = [f"# oar-lite: credit assignment for GRPO, a course ({kind} version)", "",
             "Outcome-grounded Advantage Reshaping (OAR, [arXiv 2601.07408](https://arxiv.org/abs/2601.07408)) "
             "from scratch, in notebooks that run on a CPU. Each page below is the executed notebook. "
             + ("This is the **teacher** version: the exercises show their solutions, model answers and hidden "
                "tests. " if kind == "teacher" else
                "This is the **student** version: the exercises are blank, with their public checks. ")
             + f"The [{other} version](../{other}/index.html) sits beside it.", ""]
    for path in paths:
        nb = _read(path)
        head = _header(nb)
        lines += [f"## [{head['title']}](notebooks/{path.stem}.html)", "",
                  f"*Committed run: {describe_run(run_record(nb))} (printed by its last cell).*", "",
                  "**Objectives**", "", head["objectives"] or "(none stated)", "",
                  "**Prerequisites**", "", head["prerequisites"] or "(none stated)", ""]
    return "\n".join(lines)


THEME_MAIN = """{% extends "base.html" %}
{% block extrahead %}
<script>
  // MathJax 3, served from this site (assets/mathjax, from the npm package): the notebooks'
  // $...$ and $$...$$, never inside code.
  window.MathJax = {
    tex: {inlineMath: [["$", "$"], ["\\\\(", "\\\\)"]], displayMath: [["$$", "$$"], ["\\\\[", "\\\\]"]],
          processEscapes: true, processEnvironments: true},
    options: {skipHtmlTags: ["script", "noscript", "style", "textarea", "pre", "code"]}
  };
</script>
{% endblock %}
"""
EXTRAS = ["docs/trl.md", "docs/oar-spec.md", "benchmarks/RESULTS.md", "docs/compare.png", "docs/scaling.png",
          "docs/ground_truth.png"]
# mkdocs-jupyter's page template loads mermaid from a CDN whether or not a page has a diagram
# (the notebooks have none): the site drops that script.
MERMAID = re.compile(r"<script type=\"module\">(?:(?!</script>).)*mermaid(?:(?!</script>).)*</script>", re.DOTALL)


def _mkdocs(kind: str, pages: dict[str, object], out: Path) -> None:
    """One site with mkdocs + mkdocs-jupyter (nothing executed, nothing fetched): ``pages`` are
    ``{file name: notebook}``; MathJax copied in from node_modules."""
    if not (MATHJAX / "tex-mml-chtml.js").exists():
        raise FileNotFoundError(f"{MATHJAX} is missing: run `npm ci` in {ROOT} (make site does)")
    src = BUILD / "site-src" / kind
    shutil.rmtree(src, ignore_errors=True)
    docs = src / "docs"
    (docs / "notebooks").mkdir(parents=True)
    (src / "theme").mkdir()
    (src / "theme" / "main.html").write_text(THEME_MAIN)
    (docs / "index.md").write_text(index_page([NOTEBOOKS / name for name in pages], kind))
    for name, nb in pages.items():
        nbformat.write(nb, docs / "notebooks" / name)
    # mkdocs reserves README.md for the index; the README's Colab badges become text links
    (docs / "project.md").write_text(BADGE.sub(r"[Open in Colab](\1)", (ROOT / "README.md").read_text()))
    for extra in EXTRAS:
        if (ROOT / extra).exists():
            (docs / extra).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(ROOT / extra, docs / extra)
    nav = [{"Objectives": "index.md"}] + [{_header(nb)["title"]: f"notebooks/{name}"} for name, nb in pages.items()]
    config = {"site_name": f"oar-lite course ({kind})", "docs_dir": "docs", "site_dir": str(out.resolve()),
              "use_directory_urls": False,
              "theme": {"name": "mkdocs", "custom_dir": "theme", "highlightjs": False}, "nav": nav,
              "plugins": [{"mkdocs-jupyter": {"execute": False, "include_source": True, "ignore_h1_titles": True,
                                              "custom_mathjax_url": "../assets/mathjax/tex-mml-chtml.js"}}],
              "markdown_extensions": ["tables"], "validation": {"links": {"not_found": "warn"}}}
    (src / "mkdocs.yml").write_text(json.dumps(config, indent=1))   # JSON is YAML
    subprocess.run([sys.executable, "-m", "mkdocs", "build", "-q", "-f", str(src / "mkdocs.yml")], check=True)
    target = out / "assets" / "mathjax"
    target.mkdir(parents=True, exist_ok=True)
    shutil.copy(MATHJAX / "tex-mml-chtml.js", target)
    for part in ("output/chtml/fonts/woff-v2", "input/tex/extensions"):
        shutil.copytree(MATHJAX / part, target / part, dirs_exist_ok=True)
    for page in out.rglob("*.html"):
        text = page.read_text()
        if MERMAID.search(text):
            page.write_text(MERMAID.sub("", text))


def site(out: Path = SITE, student_dir: Path = STUDENT) -> None:
    """Static HTML of the executed series, readable offline: ``out/teacher`` (the source
    notebooks: solutions, model answers, hidden tests) and ``out/student`` (the student
    notebooks with the outputs of everything but the exercises), ``out/index.html`` between."""
    shutil.rmtree(out, ignore_errors=True)
    paths = notebooks()
    teacher = {p.name: _for_readers(_read(p)) for p in paths}
    missing = [p.name for p in paths if questions(_read(p)) and not (student_dir / p.name).exists()]
    if missing:
        raise FileNotFoundError(f"student notebooks missing from {student_dir}: {missing}; run `make student`")
    students = {p.name: _for_readers(_with_outputs(_read(student_dir / p.name), _read(p)) if questions(_read(p))
                                     else _read(p)) for p in paths}
    _mkdocs("teacher", teacher, out / "teacher")
    _mkdocs("student", students, out / "student")
    (out / "index.html").write_text(
        "<!doctype html><meta charset='utf-8'><title>oar-lite course</title>"
        "<h1>oar-lite: credit assignment for GRPO, a course</h1><ul>"
        "<li><a href='student/index.html'>Student version</a>: exercises blank, with their public checks</li>"
        "<li><a href='teacher/index.html'>Teacher version</a>: solutions, model answers and hidden tests</li></ul>")
    print(f"sites: {out}/teacher/index.html and {out}/student/index.html ({len(paths)} notebooks each)")


class _Resources(html.parser.HTMLParser):
    """Every link of a page (``links``) and every resource it loads (``loads``: scripts,
    stylesheets, images, frames), outside code."""

    def __init__(self):
        super().__init__()
        self.links: list[str] = []
        self.loads: list[str] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        for key in ("href", "src"):
            value = attrs.get(key)
            if not value:
                continue
            self.links.append(value)
            if tag in ("script", "img", "iframe", "source", "video", "audio") and key == "src":
                self.loads.append(value)
            if tag == "link" and key == "href" and "stylesheet" in (attrs.get("rel") or "") + (attrs.get("as") or ""):
                self.loads.append(value)


def solution_lines(nb) -> list[str]:
    """Lines of a source notebook's solutions and model answers that appear nowhere else in it
    (long enough to be telling): the student site must show none of them."""
    qs = questions(nb)
    hidden = {source for q in qs for source in q["solution"] + q["answers"] + q["hidden"]}
    elsewhere = "\n".join(c.source for c in nb.cells if c.source not in hidden)   # prompts, public tests, the rest
    found = []
    for q in qs:
        for source in q["solution"]:
            lines, keep = source.splitlines(), False
            for line in lines:
                if "# BEGIN SOLUTION" in line:
                    keep = True
                elif "# END SOLUTION" in line:
                    keep = False
                elif (keep or line.rstrip().endswith("# SOLUTION")) and len(line.strip()) >= 24:
                    text = line.split("# SOLUTION")[0].strip()
                    if len(text) >= 24 and text not in elsewhere:
                        found.append(text)
        for answer in q["answers"] + q["hidden"]:
            found += [l.strip() for l in answer.splitlines() if len(l.strip()) >= 40 and l.strip() not in elsewhere]
    return found


def check_site(out: Path = SITE) -> None:
    """Both sites: one page per notebook, every internal link resolves, nothing is loaded from
    outside the site (scripts, stylesheets, images), and the student site shows no solution, model
    answer or hidden test (no line of them, no ``BEGIN SOLUTION`` marker)."""
    problems = []
    for kind in ("teacher", "student"):
        root = out / kind
        if not (root / "index.html").exists():
            raise FileNotFoundError(f"{root}/index.html missing: run `python scripts/course.py site` first")
        problems += [f"{kind}: no page for {p.name}" for p in notebooks()
                     if not (root / "notebooks" / f"{p.stem}.html").exists()]
        pages = sorted(root.rglob("*.html"))
        for page in pages:
            parser = _Resources()
            parser.feed(page.read_text(errors="replace"))
            for link in parser.links:
                parsed = urlparse(link)
                if parsed.scheme or link.startswith(("#", "//", "data:", "mailto:")):
                    continue
                path = unquote(parsed.path)
                target = (root / path.lstrip("/") if path.startswith("/") else page.parent / path).resolve()
                if parsed.path and not target.exists():
                    problems.append(f"{kind}: broken link {page.relative_to(root)} -> {link}")
            problems += [f"{kind}: {page.relative_to(root)} loads {src} from outside the site"
                         for src in parser.loads if urlparse(src).scheme in ("http", "https") or src.startswith("//")]
        if kind == "student":
            for path in notebooks():
                page = root / "notebooks" / f"{path.stem}.html"
                text = html.unescape(page.read_text(errors="replace")) if page.exists() else ""
                shown = [line for line in solution_lines(_read(path)) if line in text]
                if "BEGIN SOLUTION" in text or "# HIDDEN" in text:
                    problems.append(f"student: {page.name} shows otter's solution or hidden-test markup")
                problems += [f"student: {page.name} shows a solution line: {line!r}" for line in shown]
        print(f"{kind} site: {len(pages)} pages checked")
    assert not problems, "\n".join(sorted(set(problems)))
    print("sites ok: a page per notebook, internal links resolve, nothing loaded from outside, no solution for students")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("student", allow_abbrev=False)
    check = sub.add_parser("check-student", allow_abbrev=False)
    check.add_argument("--only", nargs="*", help="notebook name prefixes, e.g. 00 03")
    graded = sub.add_parser("grade", allow_abbrev=False)
    graded.add_argument("submissions", type=Path)
    sub.add_parser("check-grade", allow_abbrev=False)
    sub.add_parser("site", allow_abbrev=False)
    sub.add_parser("check-site", allow_abbrev=False)
    args = parser.parse_args(argv)
    if args.command == "student":
        student()
    elif args.command == "check-student":
        check_student(only=args.only)
    elif args.command == "grade":
        grade(args.submissions)
    elif args.command == "check-grade":
        check_grade()
    elif args.command == "site":
        site()
    else:
        check_site()


if __name__ == "__main__":
    main()
