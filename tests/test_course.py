"""The course's structure: every notebook states objectives, prerequisites, where its time is
printed (with the machine's load), takeaways and references, and has graded exercises in otter's
format with solutions, model answers, public and hidden tests; 01-05 open with their Key
equations; the tooling reads them, and `make student` strips the solutions. (Running the student
notebooks, their stubs, shortcuts and solutions is `make check-student`, grading `make
check-grade`, the sites `make check-site`: in CI, minutes, not unit tests.)"""
from __future__ import annotations

import csv
import json
import re
import sys
import types
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
    shortcuts = course.load_shortcuts()
    assert forbidding == set(shortcuts)
    assert {"ex01_dr_grpo", "ex02_joint", "ex04_mass", "ex05_target", "ex06_blame"} <= forbidding   # issue 27's list
    # issue 49's: another package function with the same answer, and copies made before the block
    assert any("concentration.answer_mass" in s for s in shortcuts["ex06_blame"])
    assert all(any("FunctionType" in s for s in shortcuts[name]) for name in ("ex02_joint", "ex06_blame"))


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
    course.student(tmp_path / "student", tmp_path / "course", checks=tmp_path / "checks")
    for path in NOTEBOOKS:
        committed, fresh = _read(course.STUDENT / path.name), _read(tmp_path / "student" / path.name)
        assert [(c.cell_type, c.source) for c in committed.cells] == [(c.cell_type, c.source) for c in fresh.cells], (
            f"student/{path.name} is stale: run `make student` and commit student/")
        checks = (tmp_path / "checks" / f"{path.stem}.json").read_text()
        assert (course.CHECKS / f"{path.stem}.json").read_text() == checks, (
            f"oar_lite/course/data/checks/{path.stem}.json is stale: run `make student` and commit it")
        assert committed.metadata["otter"]["assignment_name"] == path.stem      # what `make grade` matches on
        sources = "\n".join(c.source for c in committed.cells)
        names = [q["name"] for q in course.questions(_read(path))]
        assert "SOLUTION" not in sources and "# HIDDEN" not in sources and "Model answer" not in sources
        assert not any(line in sources + checks for line in course.solution_lines(_read(path)))
        assert all(f'grader.check("{n}")' in sources for n in names) and sorted(json.loads(checks)) == sorted(names)
        grader = next(c.source for c in committed.cells if "exercises.checks(" in c.source)
        assert len(grader.splitlines()) <= 12 and "_PUBLIC_TESTS" not in sources   # the checks' source is in the package
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
    # Run All twice in one kernel: the second prediction says re-recorded and is not flagged
    nb.cells = [_ran(predict, 49, "ex_q: prediction 0.5 re-recorded\n"), _ran(measure, 50, "ex_q: predicted 0.5, measured 0.25\n")]
    got = course.prediction_order(nb, "ex_q")
    assert got["order"] == "predicted first" and got["prediction"] == "0.5" and got["changed"] is None
    # only the prediction cell run again, after the measurement: its output, not the counts, decides
    nb.cells[0] = _ran(predict, 51, "ex_q: prediction 0.5 re-recorded\n")
    assert course.prediction_order(nb, "ex_q")["order"] == "predicted first"
    # ... changed to the measured value: not flagged, but noted with the value it replaced
    nb.cells[0] = _ran(predict, 52, "ex_q: prediction 0.25 re-recorded (changed from 0.5 after a measurement of this exercise)\n")
    got = course.prediction_order(nb, "ex_q")
    assert got["order"] == "predicted first" and got["changed"] == "0.5" and "changed from 0.5" in got["detail"]
    # re-recorded in a kernel that measured first: still flagged
    nb.cells[0] = _ran(predict, 53, f"ex_q: prediction 0.5 re-recorded; the first prediction was recorded {AFTER_MEASUREMENT}\n")
    assert course.prediction_order(nb, "ex_q")["order"] == "measured first"
    # no output of the prediction in the file (cleared): the execution counts decide
    nb.cells = [_ran(predict, 7, ""), _ran(measure, 6, "ex_q: predicted 0.5, measured 0.25\n")]
    assert course.prediction_order(nb, "ex_q")["order"] == "measured first"
    nb.cells = [_ran(predict, 5, ""), _ran(measure, 6, "ex_q: predicted 0.5, measured 0.25\n")]
    assert course.prediction_order(nb, "ex_q")["order"] == "predicted first"


def test_the_predict_outputs_of_a_real_kernel_are_read_back(capsys):
    """What oar_lite.course.exercises prints, read by prediction_order: one wording, two places."""
    from oar_lite.course import exercises
    outputs = []
    for source, call in (("p", lambda: exercises.predict("ex_kernel", 0.5)), ("m", lambda: exercises.measure("ex_kernel", 0.25))) * 2:
        call()
        outputs.append(capsys.readouterr().out)
    nb = nbformat.v4.new_notebook()
    nb.cells = [_ran('exercises.predict("ex_kernel", p)', 3, outputs[2]), _ran('exercises.measure("ex_kernel", m)', 4, outputs[3])]
    assert "re-recorded" in outputs[2] and course.prediction_order(nb, "ex_kernel")["order"] == "predicted first"
    exercises.measure("ex_kernel_late", 0.25)
    exercises.predict("ex_kernel_late", 0.25)
    late = capsys.readouterr().out.splitlines()
    nb.cells = [_ran('exercises.predict("ex_kernel_late", p)', 9, late[1] + "\n"),
                _ran('exercises.measure("ex_kernel_late", m)', 10, "ex_kernel_late: predicted 0.25, measured 0.25\n")]
    assert course.prediction_order(nb, "ex_kernel_late")["order"] == "measured first"


def test_code_that_may_get_around_the_checks_is_found_in_the_students_cells_only():
    handed = nbformat.v4.new_notebook()
    handed.cells = [nbformat.v4.new_code_cell("import importlib, os\n%pip install git+https://github.com/oar-lite/oar-lite.git"),
                    nbformat.v4.new_code_cell("def snr(grads):\n    ...")]
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("import importlib, os\n%pip install git+https://github.com/my-school/rl.git"),
                nbformat.v4.new_code_cell("import types\n_f = types.FunctionType(gq.gradient_stats.__code__, {})  # copy\n"
                                          "model.eval()\nre.compile('x')"),
                nbformat.v4.new_code_cell("import inspect\nexec(inspect.getsource(oracle.blame_share))")]
    found = course.tricks(nb, [handed])
    assert {(f["cell"], f["what"]) for f in found} == {(1, "FunctionType"), (1, "__code__"), (2, "inspect.getsource"),
                                                      (2, "exec / eval / compile")}
    assert course.tricks(handed, [handed]) == []


def _grades_folder(folder, answers_points):
    rows = [["student", "submission", "notebook", "question", "score", "possible", "failure", "prediction order"],
            ["ann", "ann/01.ipynb", "01_grpo_basics", "ex01_a", 1.0, 1.0, "", ""],
            ["ann", "ann/01.ipynb", "01_grpo_basics", "ex01_b", 0.0, 1.0, "AssertionError: expected 2", "measured first: x"],
            ["ben", "ben/01.ipynb", "01_grpo_basics", "ex01_a", 1.0, 1.0, "", ""],
            ["ben", "ben/01.ipynb", "01_grpo_basics", "ex01_b", 1.0, 1.0, "", "predicted first: y"],
            ["cy", "cy.ipynb", None, None, 0, None, "no autograder for assignment None", ""]]
    answers = [course.ANSWER_COLUMNS] + [[who, f"{who}/01.ipynb", "01_grpo_basics", q, "", "", "", "text", points, 1.0]
                                         for (who, q), points in answers_points.items()]
    for name, table in (("grades.csv", rows), ("answers.csv", answers)):
        with (folder / name).open("w", newline="") as f:
            csv.writer(f).writerows(table)


def test_the_totals_add_the_written_points_entered(tmp_path):
    _grades_folder(tmp_path, {("ann", "ex01_a"): "1", ("ann", "ex01_b"): "0.5", ("ben", "ex01_a"): "", ("ben", "ex01_b"): ""})
    report = course.write_report(tmp_path)
    with (tmp_path / "totals.csv").open() as f:
        totals = {t["student"]: t for t in csv.DictReader(f)}
    assert (totals["ann"]["automatic"], totals["ann"]["written"], totals["ann"]["total"], totals["ann"]["possible"]) == ("1", "1.5", "2.5", "4")
    assert (totals["ben"]["written"], totals["ben"]["written_to_grade"], totals["ben"]["total"]) == ("0", "2", "2")
    assert "| ann | 1 of 2 | 1.5 of 2 | 2.5 of 4 |" in report and "| ben | 2 of 2 | 0 of 2 (2 still to grade) | 2 of 4 so far |" in report
    assert "**ann**: 01_grpo_basics ex01_b" in report.split("### Measured before predicting")[1].split("###")[0]
    assert "[0.5 of 1]" in (tmp_path / "answers.md").read_text()
    for bad, why in (("1.5", "out of range"), ("-1", "out of range"), ("half", "not a number")):
        _grades_folder(tmp_path, {("ann", "ex01_a"): bad})
        with pytest.raises(ValueError, match=why):
            course.write_report(tmp_path)


def test_a_regrade_keeps_the_points_of_answers_that_did_not_change(tmp_path):
    _grades_folder(tmp_path, {("ann", "ex01_a"): "1", ("ann", "ex01_b"): ""})
    entered = course._entered_points(tmp_path / "answers.csv")
    assert set(entered) == {("ann", "ann/01.ipynb", "ex01_a")} and entered[("ann", "ann/01.ipynb", "ex01_a")]["answer"] == "text"
    assert course._entered_points(tmp_path / "missing.csv") == {}


def test_the_shortcut_search_finds_a_package_function_that_computes_the_answer():
    """package_shortcuts, run on 06's ex06_blame with the notebook's imports: oracle.blame_share and
    the lab's answer_mass compute the share; the hidden test blocks both, and without answer_mass
    in its forbid() the search says that it passes (the check can fail)."""
    import torch
    from oar_lite.course import exercises, oracle
    from oar_lite.lab import gradient_quality as gq
    q = next(q for q in course.questions(_read(NOTEBOOKS[6])) if q["name"] == "ex06_blame")
    assert course.student_functions(q) == ["share_on_wrong"]
    namespace = {"torch": torch, "exercises": exercises, "oracle": oracle, "gq": gq}
    exec(q["solution"][0], namespace)
    asked = [{"name": q["name"], "functions": ["share_on_wrong"], "hidden": q["hidden"]}]
    found = course.package_shortcuts(namespace, asked)["ex06_blame"]
    assert found["solved"] and found["calls"] == 6
    assert {"oar_lite.course.oracle.blame_share", "oar_lite.lab.concentration.answer_mass"} <= set(found["computes"])
    assert found["passes"] == []
    unblocked = [h.replace(", _concentration.answer_mass", "") for h in q["hidden"]]
    assert unblocked != q["hidden"]
    found = course.package_shortcuts(namespace, [{**asked[0], "hidden": unblocked}])["ex06_blame"]
    assert found["passes"] == ["oar_lite.lab.concentration.answer_mass"]


def test_answers_are_compared_as_numbers():
    import torch
    assert course._same(0.3, 0.30000001) and course._same(torch.tensor([1.0, 2.0]), [1.0, 2.0])
    assert not course._same(torch.ones(2), torch.ones(3)) and not course._same(True, 1) and not course._same("a", "a")
    assert course._same({"a": [1, 2]}, {"a": [1.0, 2.0]}) and not course._same({"a": 1}, {"b": 1})


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


def test_the_shortcut_search_cannot_write_files(tmp_path):
    """A candidate called with an exercise's arguments may fall back to a default path (before the
    guard, toy.write_eval_set(scores) emptied the shipped held-out set): no write, rename or
    removal while a candidate runs, and such functions are not called at all."""
    target = tmp_path / "data.jsonl"
    target.write_text("kept\n")
    with course._no_writes():
        assert target.read_text() == "kept\n" and open(target).read() == "kept\n"
        for attempt in (lambda: open(target, "w"), lambda: target.write_text("x"), lambda: target.open("a"),
                        lambda: __import__("os").remove(target), lambda: target.unlink(),
                        lambda: __import__("subprocess").run(["true"])):
            with pytest.raises(PermissionError):
                attempt()
    assert target.read_text() == "kept\n"
    target.write_text("free again\n")                      # restored on exit
    assert course.SEARCH_SKIPS.search("oar_lite.course.toy.write_eval_set")
    assert course.SEARCH_SKIPS.search("oar_lite.course.exercises.predict")
    assert not course.SEARCH_SKIPS.search("oar_lite.lab.concentration.answer_mass")


def test_the_shortcut_search_says_what_stopped_the_hidden_test():
    """check-student's message names why the hidden test did not pass with the solution: its
    error, or the hidden test's own time limit (separate from a candidate's)."""
    namespace = {"share_on_wrong": lambda x: x}
    failing = [{"name": "q", "functions": ["share_on_wrong"],
                "hidden": ["assert share_on_wrong is not None", "assert 1 == 2, 'expected a share of 0.25'"]}]
    found = course.package_shortcuts(namespace, failing)["q"]
    assert (found["solved"], found["stopped"], found["calls"]) == (False, "AssertionError: expected a share of 0.25", 0)
    slow = [{**failing[0], "hidden": ["import time\nwhile True:\n    time.sleep(0.01)"]}]
    found = course.package_shortcuts(namespace, slow, timeout=5.0, hidden_timeout=0.2)["q"]
    assert (found["solved"], found["stopped"]) == (False, "the hidden test ran past 0.2 s")
    passing = [{**failing[0], "hidden": ["assert share_on_wrong is not None"]}]
    found = course.package_shortcuts(namespace, passing)["q"]
    assert (found["solved"], found["stopped"]) == (True, "")
