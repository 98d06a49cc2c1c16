"""Pacing and the numbers the course repeats agree with the notebooks: the syllabus and the
instructor notes (scripts/pacing.py writes their numbers from the notebooks) and notebook 00's
series map (its committed output lists each notebook's current title and objectives, and no
runtime, which only the notebook's own last cell prints)."""
from __future__ import annotations

import math
import re

import nbformat
import pytest
from conftest import load_script

pacing = load_script("pacing")
course = pacing.course


def test_the_syllabus_and_instructor_notes_agree_with_the_notebooks():
    assert pacing.stale() == [], "run `python scripts/pacing.py` and commit docs/syllabus.md and docs/teacher/"


def _notebook(path):
    return nbformat.read(path, as_version=4)


def _by_prefix(prefix: str):
    return next(p for p in course.notebooks() if p.name.startswith(prefix))


def test_the_estimate_follows_the_notebook(tmp_path):
    """More prose, more code, an exercise more or a slower run each raise the estimate by the
    stated rate, and the rendered page then differs: a page that was not regenerated is stale."""
    source = _by_prefix("01")
    before = pacing.pacing(source)
    nb = _notebook(source)
    nb.cells.insert(3, nbformat.v4.new_markdown_cell(" ".join(["word"] * (10 * pacing.READING_WPM))))
    nb.cells.insert(3, nbformat.v4.new_code_cell("\n".join(f"x{i} = {i}" for i in range(5 * pacing.CODE_LINES_PER_MIN))))
    nb.cells[-1].outputs = [nbformat.v4.new_output("stream", name="stdout", text=(
        "Notebook runtime: 601 s; load average over the last 1 / 5 / 15 min: 1.0 / 1.0 / 1.0 on 2 cores\n"))]
    changed = tmp_path / source.name
    nbformat.write(nb, changed)
    after = pacing.pacing(changed)
    assert after["parts"][0]["cost"]["reading_min"] - before["parts"][0]["cost"]["reading_min"] == 15
    assert after["live_min"] == 11 and after["run"]["seconds"] == 601
    assert after["total_min"] > before["total_min"]
    assert pacing.syllabus_block(after) != pacing.syllabus_block(before)


def test_notebook_06_is_two_parts_with_every_exercise_in_one():
    info = pacing.pacing(_by_prefix("06"))
    assert [p["label"] for p in info["parts"]] == ["Part 1", "Part 2"] and info["sessions"] == 2
    cited = [q["name"] for p in info["parts"] for q in p["exercises"]]
    assert sorted(cited) == sorted(q["name"] for q in course.questions(_notebook(_by_prefix("06"))))
    markdown = [c.source for c in _notebook(_by_prefix("06")).cells if c.cell_type == "markdown"]
    for n in (1, 2):
        assert any(s.startswith(f"## Part {n}") and f"### Part {n} objectives" in s for s in markdown)
        assert any(f"### Part {n} takeaways" in s for s in markdown)


def test_the_syllabus_reads_the_parts_sections_and_exercise_counts_from_the_notebook():
    """06's entry says which numbered sections each part holds and how many exercises it has, as
    the notebook's own headings say (issue 49: "sections 6-10" had stayed when 06 grew an 11th)."""
    path = _by_prefix("06")
    nb = _notebook(path)
    starts = [i for i, c in enumerate(nb.cells) if c.cell_type == "markdown" and c.source.startswith("## Part ")]
    bounds = starts[1:] + [len(nb.cells)]
    info = pacing.pacing(path)
    block = pacing.syllabus_block(info)
    for k, (part, end, span) in enumerate(zip(starts, bounds, info["parts"])):
        numbers = [int(m) for c in nb.cells[(0 if k == 0 else part):end] if c.cell_type == "markdown"
                   for m in re.findall(r"^## (\d+)\. ", c.source, flags=re.MULTILINE)]
        assert [n for n, _ in span["sections"]] == numbers and numbers
        assert f"**{span['label']}** (sections {numbers[0]}-{numbers[-1]})" in block
        assert f"its {len(span['exercises'])} exercise" in block
    assert "sections 6-10" not in (course.ROOT / "docs" / "syllabus.md").read_text()


def test_the_pre_registration_is_homework_before_the_session_that_shows_it(tmp_path):
    """06's positive control has a pre-registration in RESULTS.md: it is read after Part 1, before
    Part 2 shows it; moved into Part 1, it becomes homework before the first session."""
    assert "When credit must pay: a positive control" in pacing.preregistered()
    info = pacing.pacing(_by_prefix("06"))
    showing = [k for k, span in enumerate(info["parts"]) if span["preregistered"]]
    assert showing == [1]
    homework = pacing.syllabus_block(info).split("**Homework**")[1]
    after_part_1 = next(l for l in homework.splitlines() if l.startswith("- After Part 1"))
    assert "pre-registration of \"When credit must pay: a positive control\"" in after_part_1
    nb = _notebook(_by_prefix("06"))
    heading = next(c for c in nb.cells if c.cell_type == "markdown" and "## 9. When credit must pay" in c.source)
    heading.source = heading.source.replace("## 9. When credit must pay", "## 9. Something else")
    first = next(c for c in nb.cells if c.cell_type == "markdown" and c.source.startswith("## 1. "))
    first.source = first.source.replace("## 1. ", "## 1. When credit must pay: a positive control\n\n## 1b. ", 1)
    moved = tmp_path / _by_prefix("06").name
    nbformat.write(nb, moved)
    homework = pacing.syllabus_block(pacing.pacing(moved)).split("**Homework**")[1]
    assert "- Before the first session: before Part 1 shows it in section 1" in homework
    assert "pre-registration" not in next(l for l in homework.splitlines() if l.startswith("- After Part 1"))


def test_exercises_are_budgeted_by_their_kind():
    """ex02_joint (eleven lines of model code to write) costs more than ex06_blame (two); a
    predict-then-measure exercise pays for its prediction and experiment; a written answer for
    its words; the syllabus states both kinds of points (24 automatic + 23 written, issue 49)."""
    costs = {q["name"]: q["cost"] for p in course.notebooks() for q in pacing.pacing(p)["questions"]}
    joint, blame, batch = costs["ex02_joint"], costs["ex06_blame"], costs["ex06_batch"]
    assert joint["kind"] == blame["kind"] == "re-implementation" and batch["kind"] == "predict-then-measure"
    assert joint["minutes"] > 15 and joint["minutes"] > blame["minutes"] and joint["code_lines"] > 3 * blame["code_lines"]
    assert joint["written_words"] == 0 and blame["written_words"] > 0 and batch["run_s"] > 1
    expected = math.ceil(blame["prompt_words"] / pacing.READING_WPM + blame["code_lines"] * pacing.CODE_MIN_PER_LINE
                         + pacing.CHECK_MIN + blame["written_words"] / pacing.WRITING_WPM + blame["run_s"] / 60)
    assert blame["minutes"] == expected
    assert batch["minutes"] >= pacing.PREDICT_MIN + pacing.CHECK_MIN + batch["code_lines"] * pacing.CODE_MIN_PER_LINE
    infos = [pacing.pacing(p) for p in course.notebooks()]
    auto, written = sum(i["points"] for i in infos), sum(i["written_points"] for i in infos)
    assert written == sum(1 for c in costs.values() if c["written_words"]) * course.WRITTEN_POINTS
    assert f"({auto:g} + {written:g} written = {auto + written:g} points)" in pacing.overview_block(infos)


def test_a_part_heading_that_drops_an_exercise_is_refused(tmp_path):
    nb = _notebook(_by_prefix("06"))
    part2 = next(c for c in nb.cells if c.cell_type == "markdown" and c.source.startswith("## Part 2"))
    part2.source = re.sub(r"`ex06_\w+`", "it", part2.source)
    path = tmp_path / "06_when_credit_matters.ipynb"
    nbformat.write(nb, path)
    with pytest.raises(ValueError, match="cite each exercise once"):
        pacing.pacing(path)


def test_render_replaces_blocks_and_refuses_missing_markers():
    text = "a\n<!-- pacing:begin x -->\nold\n<!-- pacing:end x -->\nb\n"
    assert pacing.render(text, {"x": "new"}) == "a\n<!-- pacing:begin x -->\nnew\n<!-- pacing:end x -->\nb\n"
    with pytest.raises(ValueError, match="without markers"):
        pacing.render(text, {"x": "new", "y": "more"})
    with pytest.raises(ValueError, match="without a block"):
        pacing.render(text, {})


def test_cell_timings_are_read_from_the_recorded_metadata():
    cell = nbformat.v4.new_code_cell("pass")
    assert pacing.cell_seconds(cell) is None
    cell.metadata["execution"] = {"iopub.execute_input": "2026-12-05T10:00:00.000000Z",
                                  "shell.execute_reply": "2026-12-05T10:00:02.500000Z"}
    assert pacing.cell_seconds(cell) == 2.5


# ---- notebook 00's series map ----------------------------------------------------------------

def _series_map() -> str:
    nb = _notebook(_by_prefix("00"))
    maps = [o["data"]["text/markdown"] for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
            if "text/markdown" in o.get("data", {}) and o["data"]["text/markdown"].startswith("| notebook |")]
    assert len(maps) == 1, "notebook 00 shows one series map (a markdown table opening '| notebook |')"
    return maps[0]


def _expected_row(path) -> str:
    head = course._header(_notebook(path))
    goals = " ".join(line[2:] for line in head["objectives"].splitlines())
    return f"| [{head['title']}]({path.name}) | {goals} |"


def check_series_map(table: str) -> list[str]:
    """What in notebook 00's committed map disagrees with the notebooks (empty: it agrees)."""
    rows = [r for r in table.splitlines() if r.startswith("| [")]
    problems = [f"a row for {p.name} with its current title and objectives is missing"
                for p in course.notebooks() if _expected_row(p) not in rows]
    problems += [f"a row names no current notebook: {r[:80]}" for r in rows
                 if r not in {_expected_row(p) for p in course.notebooks()}]
    if re.search(r"\b\d+ s\b|runtime|committed run", table):
        problems.append("the map lists runtimes: each notebook's own last cell prints its runtime")
    return problems


def test_notebook_00s_series_map_agrees_with_the_notebooks():
    problems = check_series_map(_series_map())
    assert not problems, "\n".join(problems) + "\nre-execute notebooks/00_tour.ipynb (its section 4 reads the others)"


def test_the_series_map_check_catches_a_stale_title_or_a_runtime():
    table = _series_map()
    first = next(r for r in table.splitlines() if r.startswith("| [01"))
    assert check_series_map(table.replace(first, first.replace("GRPO basics", "GRPO, the basics")))
    assert check_series_map(table.replace(first, first[:-1] + "| 18 s |"))
    assert check_series_map("\n".join(r for r in table.splitlines() if r != first))


def test_both_sites_carry_the_syllabus_and_only_the_teachers_the_notes():
    pages = {kind: set(titles.values()) for kind, titles in course.PACING.items()}
    assert pages["student"] == {"docs/syllabus.md"}
    assert pages["teacher"] == {"docs/syllabus.md", "docs/teacher/instructor-notes.md", "docs/teacher/rubrics.md",
                                "docs/teacher/grading.md"}
    assert all((course.ROOT / page).is_file() for page in pages["teacher"])


def test_an_appendix_is_read_at_home_not_in_class(tmp_path):
    """Notebook 06's long tables sit in an appendix: it ends the last part, its reading is stated on
    its own, and neither the class time nor the sessions count it."""
    source = _by_prefix("06")
    info = pacing.pacing(source)
    assert info["home"] is not None and info["home"]["cost"]["words"] > 0
    nb = _notebook(source)
    heading = next(c for c in nb.cells if c.cell_type == "markdown" and c.source.startswith("## Appendix"))
    heading.source = heading.source.replace("## Appendix", "### Appendix", 1)  # no longer an appendix: Part 2's
    path = tmp_path / source.name
    nbformat.write(nb, path)
    inline = pacing.pacing(path)
    assert inline["home"] is None
    assert inline["parts"][-1]["cost"]["words"] == info["parts"][-1]["cost"]["words"] + info["home"]["cost"]["words"]
    assert inline["total_min"] > info["total_min"]
    assert "**Appendix, at home**: reading" in pacing.syllabus_block(info)
