"""The course's structure: every notebook states objectives, prerequisites, where its time is
printed (with the machine's load), takeaways and references, and has graded exercises in otter's
format with solutions, model answers, public and hidden tests; 01-05 open with their Key
equations; the tooling reads them, and `make student` strips the solutions. (Running the student
notebooks, their stubs, shortcuts and solutions is `make check-student`, grading `make
check-grade`, the sites `make check-site`: in CI, minutes, not unit tests.)"""
from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
from conftest import load_script

ROOT = Path(__file__).resolve().parent.parent
course = load_script("course")

NOTEBOOKS = course.notebooks()
REQUIRED_ARXIV = {"2601.07408"}  # the OAR paper, in every notebook
# ... with its ACL 2026 version, the authors' two official repositories and the spec section
# that ties what it fixes to their code's lines (issue 37)
REQUIRED_LINKS = {"https://aclanthology.org/2026.acl-long.1132/",
                  "https://github.com/Valsure/Outcome-Grounded-Advantage-Reshaping",
                  "https://github.com/XINGYUN-AI-LAB/XINGYUN_LAB", "../docs/oar-spec.md"}
ALL_ARXIV = {"2601.07408", "2402.03300", "2503.20783", "2503.14476", "2410.01679", "2412.08905", "2009.07896",
             "2602.09331", "2606.00257", "2604.09459", "2506.01939"}  # the 2026 credit-assignment work (issue 37)


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
    assert all(f"]({link})" in references for link in REQUIRED_LINKS), REQUIRED_LINKS
    assert "Notebook runtime" in nb.cells[-1].source                 # the last cell prints it


def test_the_series_cites_every_reference():
    cited = "\n".join(c.source for p in NOTEBOOKS for c in _read(p).cells if c.cell_type == "markdown")
    assert all(f"arxiv.org/abs/{a}" in cited for a in ALL_ARXIV)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_graded_exercises_have_solutions_public_and_hidden_tests_and_model_answers(path):
    nb = _read(path)
    qs = course.questions(nb)
    assert len(qs) >= 2
    for q in qs:
        assert q["name"].startswith(f"ex{path.name[:2]}_"), "names share one tests/ folder: prefix the notebook"
        assert q["solution"] and any("# BEGIN SOLUTION" in s or "# SOLUTION" in s for s in q["solution"])
        assert q["tests"] and all("assert" in t for t in q["tests"]), f"{q['name']}: a public test"
        assert q["hidden"] and all("assert" in t for t in q["hidden"]), f"{q['name']}: a hidden test"
        # public tests check type and shape: they never compare with the package or read the records
        assert not any(word in t for t in q["tests"] for word in ("ol.", "forbid(", "exercises.record")), q["name"]
        prompt = nb.cells[q["cells"][1]].source
        if "?" in prompt:
            assert q["answers"] and q["answers"][0].startswith("**Model answer.**"), f"{q['name']} asks why: a model answer"


def test_every_reimplementation_exercise_has_a_package_shortcut():
    """An exercise whose hidden tests disable a package function (forbid) has a shortcut
    submission that calls it (check-student proves it fails), and only those."""
    forbidding = {q["name"] for p in NOTEBOOKS for q in course.questions(_read(p)) if any("exercises.forbid(" in t for t in q["hidden"])}
    assert forbidding == set(course.load_shortcuts())
    assert {"ex01_dr_grpo", "ex02_joint", "ex04_mass", "ex05_target", "ex06_blame"} <= forbidding   # issue 27's list


def test_every_question_has_a_well_typed_wrong_answer():
    """scripts/exercise_shortcuts.py WRONG: one per question, a source per answer cell (check-student
    proves each passes the public checks and scores 0; check-grade grades 01's)."""
    wrong = course.load_wrong_answers()
    asked = {q["name"]: q for p in NOTEBOOKS for q in course.questions(_read(p))}
    assert set(wrong) == set(asked)
    assert all(len(wrong[name]) == len(q["solution"]) for name, q in asked.items())


@pytest.mark.parametrize("path", [p for p in NOTEBOOKS if p.name[:2] != "00"], ids=lambda p: p.name)
def test_a_predict_then_measure_exercise(path):
    """From 01 on, an exercise records a prediction, then in a later cell the measurement; its
    hidden test checks the measurement and never the prediction (it earns nothing for matching;
    the order is read from the handed-in file), and it has a written answer (the gap)."""
    found = []
    for q in course.questions(_read(path)):
        name = q["name"]
        predict = [i for i, s in enumerate(q["solution"]) if f'exercises.predict("{name}"' in s]
        measure = [i for i, s in enumerate(q["solution"]) if f'exercises.measure("{name}"' in s]
        if predict and measure and predict[0] < measure[0]:
            predicted = re.search(r"^(predicted_\w+) = ", q["solution"][predict[0]], re.MULTILINE).group(1)
            assert q["answers"] and course.predict_then_measure(q), name
            assert not any(predicted in t or "predicted_first" in t or ".prediction" in t for t in q["hidden"]), name
            assert not any("json.loads" in s or "read_text" in s for s in q["solution"]), f"{name}: run an experiment"
            found.append(name)
    assert found, f"{path.name}: no predict-then-measure exercise"


KEY_LINK = re.compile(r"\$\$(?:(?!\$\$).)+\$\$\s*\n([^\n]*)`([\w.]+)`[^`\n]*?\]\(#(eq-[\w-]+)\)", re.DOTALL)


@pytest.mark.parametrize("path", [p for p in NOTEBOOKS if p.name[:2] in ("01", "02", "03", "04", "05")], ids=lambda p: p.name)
def test_key_equations_link_to_the_cells_that_implement_them(path):
    """Near the top (right after the title cell), a Key equations block: each display equation,
    then the name that computes it and a link to an anchor at the head of that code."""
    nb = _read(path)
    block = nb.cells[1]
    assert block.cell_type == "markdown" and block.source.startswith("### Key equations")
    links = KEY_LINK.findall(block.source)
    assert len(links) >= 3 and len(links) == block.source.count("$$") // 2, "every equation with its link"
    for _, name, anchor in links:
        at = [i for i, c in enumerate(nb.cells) if c.cell_type == "markdown" and f'<a id="{anchor}"></a>' in c.source]
        assert len(at) == 1, f"{anchor}: one anchor"
        following = []
        for c in nb.cells[at[0] + 1:]:
            if c.cell_type == "markdown" and following:
                break
            following.append(c.source if c.cell_type == "code" else "")
        assert any(name in s for s in following), f"{name} is not in the code right after #{anchor}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_the_runtime_is_printed_with_the_load(path):
    last = _read(path).cells[-1].source
    assert "Notebook runtime" in last and "os.getloadavg()" in last and "os.cpu_count()" in last


def test_questions_parser_refuses_an_unclosed_question():
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_raw_cell("# BEGIN QUESTION\nname: q1"), nbformat.v4.new_code_cell("x = 1")]
    with pytest.raises(ValueError, match="END QUESTION"):
        course.questions(nb)


def test_site_links_point_at_pages():
    text = "[a](02_perturbation_attribution.ipynb) [b](../docs/trl.md#x) [c](https://x.org/a.md) [d](../README.md)"
    assert course._site_links(text) == ("[a](02_perturbation_attribution.html) [b](../docs/trl.html#x) "
                                        "[c](https://x.org/a.md) [d](../project.html)")


def test_runtime_and_load_are_read_from_the_output():
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("print(...)")
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="Notebook runtime: 42 s\n")]
    nb.cells = [cell]
    assert course.runtime(nb) == 42
    assert course.describe_run(course.run_record(nb)) == "42 s (machine load not recorded)"
    cell.outputs[0]["text"] = "Notebook runtime: 334 s; load average over the last 1 / 5 / 15 min: 3.1 / 3.9 / 2.0 on 2 cores\n"
    assert course.run_record(nb) == {"seconds": 334, "load": 3.9, "cores": 2}
    assert "busy machine" in course.describe_run(course.run_record(nb))
    cell.outputs[0]["text"] = "Notebook runtime: 60 s; load average over the last 1 / 5 / 15 min: 0.2 / 0.3 / 0.1 on 2 cores\n"
    assert course.describe_run(course.run_record(nb)) == "60 s on 2 cores at load average 0.3"


@pytest.mark.slow
def test_student_notebooks_are_current_and_hold_no_solution(tmp_path):
    """student/ (committed, for the Colab badge) is what `make student` writes from the sources:
    no solution, model answer or hidden test; the public checks inside; the badge opens it."""
    course.student(tmp_path / "student", tmp_path / "course")
    for path in NOTEBOOKS:
        committed, fresh = _read(course.STUDENT / path.name), _read(tmp_path / "student" / path.name)
        assert [(c.cell_type, c.source) for c in committed.cells] == [(c.cell_type, c.source) for c in fresh.cells], (
            f"student/{path.name} is stale: run `make student` and commit student/")
        assert committed.metadata["otter"]["assignment_name"] == path.stem      # what `make grade` matches on
        sources = "\n".join(c.source for c in committed.cells)
        names = [q["name"] for q in course.questions(_read(path))]
        assert "SOLUTION" not in sources and "# HIDDEN" not in sources and "Model answer" not in sources
        assert not any(line in sources for line in course.solution_lines(_read(path)))
        assert all(f'grader.check("{n}")' in sources and f"'{n}': r" in sources for n in names)
        assert "blob/main/student/" in committed.cells[0].source and "blob/main/notebooks/" not in committed.cells[0].source
        assert (tmp_path / "course" / "autograder" / f"{path.stem}.zip").exists()
        hidden = [(tmp_path / "course" / "tests" / path.stem / f"{n}.py").read_text() for n in names]
        assert all("'hidden': True" in t for t in hidden)


def test_site_pages_replace_widgets_and_the_badge_and_keep_exercise_outputs_out():
    source = _read(NOTEBOOKS[4])                      # 04: the reshaping widget
    assert any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for c in source.cells for o in c.get("outputs", []))
    page = course._for_readers(source)
    outputs = [o for c in page.cells for o in c.get("outputs", [])]
    assert not any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in outputs)
    assert "colab-badge.svg" not in page.cells[0].source and "Open this notebook in Colab" in page.cells[0].source
    assert not any(c.cell_type == "raw" for c in page.cells)
    student = course._with_outputs(_read(course.STUDENT / NOTEBOOKS[4].name), source)
    exercises_start = next(i for i, c in enumerate(student.cells) if c.source.startswith("## Exercises"))
    assert any(c.get("outputs") for c in student.cells[:exercises_start])
    assert not any(c.get("outputs") for c in student.cells[exercises_start:-1])


def test_a_failure_is_reported_by_its_first_error():
    doctest_output = ("Failed example:\n    with exercises.forbid(ol.group_advantages):\nException raised:\n"
                      "    Traceback (most recent call last):\n    RuntimeError: oar_lite.grpo.group_advantages was called: ...\n"
                      "Failed example:\n    assert _mine\nException raised:\n    NameError: name '_mine' is not defined\n")
    assert course._failure(doctest_output).startswith("RuntimeError: oar_lite.grpo.group_advantages was called")
    assert course._failure("Exception raised:\n    AssertionError\n") == "AssertionError"
    assert course._failure("all passed") == ""


def test_every_written_answer_has_a_rubric():
    """docs/teacher/rubrics.md: a section per question with a model answer, with what a full
    answer contains and the common wrong answers (and the gap, for predict-then-measure)."""
    text = course.RUBRICS.read_text()
    sections = dict(re.findall(r"^### (ex\w+)[^\n]*\n(.*?)(?=^##|\Z)", text, flags=re.MULTILINE | re.DOTALL))
    asked = {q["name"]: q for p in NOTEBOOKS for q in course.questions(_read(p)) if q["answers"]}
    assert len(asked) >= 20 and set(sections) == set(asked)
    for name, q in asked.items():
        assert "**A full answer**" in sections[name] and "**Common wrong answers**" in sections[name], name
        assert ("**Gap**" in sections[name]) == course.predict_then_measure(q), name


def test_points_go_to_the_hidden_tests():
    nb = nbformat.v4.new_notebook()
    raw, code = nbformat.v4.new_raw_cell, nbformat.v4.new_code_cell
    nb.cells = [raw("# BEGIN QUESTION\nname: q1\npoints: 2"), raw("# BEGIN TESTS"), code("assert 1"),
                code("# HIDDEN\nassert 1"), code("# HIDDEN\nassert 1"), raw("# END TESTS"), raw("# END QUESTION")]
    course._points_to_hidden_tests(nb)
    assert nb.cells[0].source.splitlines()[-1] == "points: [0, 1.0, 1.0]"
    nb.cells[3].source = "assert 1"                        # no longer hidden: a public test after a hidden one
    nb.cells[0].source = "# BEGIN QUESTION\nname: q1\npoints: 2"
    nb.cells[2].source, nb.cells[3].source = "# HIDDEN\nassert 1", "assert 1"
    with pytest.raises(ValueError, match="before the hidden"):
        course._points_to_hidden_tests(nb)
    nb.cells[2:5] = [code("assert 1")]
    nb.cells[0].source = "# BEGIN QUESTION\nname: q1\npoints: 2"
    with pytest.raises(ValueError, match="no hidden test"):
        course._points_to_hidden_tests(nb)


def _ran(source, count, text):
    cell = nbformat.v4.new_code_cell(source)
    cell.execution_count = count
    if text:
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=text)]
    return cell


def test_the_prediction_order_is_read_from_the_file():
    from oar_lite.course.exercises import AFTER_MEASUREMENT
    predict, measure = 'exercises.predict("ex_q", p)', 'exercises.measure("ex_q", m)'
    nb = nbformat.v4.new_notebook()
    nb.cells = [_ran(predict, 3, "ex_q: prediction 0.5 recorded\n"), _ran(measure, 4, "ex_q: predicted 0.5, measured 0.25\n")]
    got = course.prediction_order(nb, "ex_q")
    assert (got["order"], got["prediction"], got["measurement"]) == ("predicted first", "0.5", "0.25")
    nb.cells = [_ran(predict, 5, "ex_q: prediction 0.5 recorded\n"), _ran(measure, 4, "ex_q: no prediction recorded, measured 0.25\n")]
    assert course.prediction_order(nb, "ex_q")["order"] == "measured first"
    # counts in order, but the prediction was entered after an earlier measurement: its output says so
    nb.cells = [_ran(predict, 5, f"ex_q: prediction 0.25 recorded {AFTER_MEASUREMENT}\n"),
                _ran(measure, 6, "ex_q: predicted 0.25, measured 0.25\n")]
    assert course.prediction_order(nb, "ex_q")["order"] == "measured first"
    nb.cells = [_ran(predict, None, ""), _ran(measure, None, "")]
    assert course.prediction_order(nb, "ex_q")["order"] == "not run"


def test_written_answers_are_filled_and_collected():
    nb = nbformat.v4.new_notebook()
    answer = nbformat.v4.new_code_cell("x = ...")
    answer.metadata["tags"] = ["otter_answer_cell"]
    nb.cells = [answer, course._answer_cell("ex_q", gap=True), nbformat.v4.new_code_cell('grader.check("ex_q")'),
                nbformat.v4.new_markdown_cell("**Your answer (ex_r).** " + course.ANSWER_PROMPT + "\n\n" + course.ANSWER_PLACEHOLDER)]
    assert course.written_answers(nb) == {"ex_q": "", "ex_r": ""}
    filled = course.fill(nb, {"ex_q": ["x = 1"]}, {"ex_q": "Because the group agrees."})
    assert filled.cells[0].source == "x = 1" and nb.cells[0].source == "x = ..."
    assert course.written_answers(filled) == {"ex_q": "Because the group agrees.", "ex_r": ""}
    with pytest.raises(ValueError, match="answer cells"):
        course.fill(nb, {"ex_q": ["x = 1", "y = 2"]})
    with pytest.raises(ValueError, match="not in this notebook"):
        course.fill(nb, {"ex_z": ["x = 1"]})


def test_synthetic_class_is_solved_and_answered(tmp_path):
    written = course.synthetic(tmp_path, per_notebook=2)
    graded = [p for p in NOTEBOOKS if course.questions(_read(p))]
    assert len(written) == 2 * len(graded)
    nb = _read(tmp_path / "student01" / "01_grpo_basics.ipynb")
    answers = [c.source for c in nb.cells if "otter_answer_cell" in c.metadata.get("tags", [])]
    assert answers and not any(a.rstrip().endswith("...") or "= ...\n" in a for a in answers)
    assert set(course.written_answers(nb).values()) == {"A written answer."}
