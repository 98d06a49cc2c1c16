"""The course's structure: every notebook states objectives, prerequisites, where its time is
printed, takeaways and references, and has graded exercises in otter's format with solutions and
tests; the tooling reads them, and `make student` strips the solutions. (Running the student
notebooks is `make check-student`, in CI: minutes, not a unit test.)"""
from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("course", ROOT / "scripts" / "course.py")
course = importlib.util.module_from_spec(spec)
spec.loader.exec_module(course)

NOTEBOOKS = course.notebooks()
REQUIRED_ARXIV = {"2601.07408"}  # the OAR paper, in every notebook
ALL_ARXIV = {"2601.07408", "2402.03300", "2503.20783", "2503.14476", "2410.01679", "2412.08905", "2009.07896"}


def _read(path):
    return nbformat.read(path, as_version=4)


def test_the_series_is_there():
    assert [p.name[:2] for p in NOTEBOOKS][:7] == ["00", "01", "02", "03", "04", "05", "06"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_opens_with_objectives_prerequisites_time_and_closes_with_takeaways_references(path):
    nb = _read(path)
    head = course._header(nb)
    assert head["objectives"].count("\n- ") >= 2 and head["prerequisites"].startswith("- ")
    first = next(c for c in nb.cells if c.cell_type == "markdown").source
    assert "### Time" in first and "Notebook runtime" in first      # says where the time is printed
    markdown = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert "## Takeaways" in markdown and "## References" in markdown
    references = markdown[markdown.index("## References"):]
    assert all(f"arxiv.org/abs/{a}" in references for a in REQUIRED_ARXIV)
    assert "Notebook runtime" in nb.cells[-1].source                 # the last cell prints it


def test_the_series_cites_every_reference():
    cited = "\n".join(c.source for p in NOTEBOOKS for c in _read(p).cells if c.cell_type == "markdown")
    assert all(f"arxiv.org/abs/{a}" in cited for a in ALL_ARXIV)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_graded_exercises_have_solutions_and_tests(path):
    qs = course.questions(_read(path))
    assert len(qs) >= (1 if path.name.startswith("07") else 2)
    for q in qs:
        assert q["name"].startswith(f"ex{path.name[:2]}_"), "names share one tests/ folder: prefix the notebook"
        assert q["solution"] and any("# BEGIN SOLUTION" in s for s in q["solution"])
        assert q["tests"] and all("assert" in t or "=" in t for t in q["tests"])
        assert any("assert" in t for t in q["tests"])


def test_questions_parser_refuses_an_unclosed_question():
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_raw_cell("# BEGIN QUESTION\nname: q1"), nbformat.v4.new_code_cell("x = 1")]
    with pytest.raises(ValueError, match="END QUESTION"):
        course.questions(nb)


def test_site_links_point_at_pages():
    text = "[a](02_perturbation_attribution.ipynb) [b](../docs/trl.md#x) [c](https://x.org/a.md) [d](../README.md)"
    assert course._site_links(text) == ("[a](02_perturbation_attribution.html) [b](../docs/trl.html#x) "
                                        "[c](https://x.org/a.md) [d](../project.html)")


def test_runtime_is_read_from_the_output():
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("print(...)")
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="Notebook runtime: 42 s\n")]
    nb.cells = [cell]
    assert course.runtime(nb) == 42


@pytest.mark.skipif(shutil.which("otter") is None and importlib.util.find_spec("otter") is None,
                    reason="otter-grader is in the `course` extra")
def test_student_notebooks_have_no_solutions_and_keep_the_checks(tmp_path):
    picked = [p for p in NOTEBOOKS if p.name.startswith("01")]   # one notebook: `make student` does all
    course.student(tmp_path, picked)
    for path in picked:
        names = [q["name"] for q in course.questions(_read(path))]
        student = _read(tmp_path / "student" / path.name)
        sources = "\n".join(c.source for c in student.cells)
        assert "# BEGIN SOLUTION" not in sources and "# END SOLUTION" not in sources
        assert all(f'grader.check("{n}")' in sources for n in names)
        assert all((tmp_path / "student" / "tests" / f"{n}.py").exists() for n in names)
        assert (tmp_path / "autograder" / f"{path.stem}.zip").exists()
