"""Pacing and the numbers the course repeats agree with the notebooks: the syllabus and the
instructor notes (scripts/pacing.py writes their numbers from the notebooks) and notebook 00's
series map (its committed output lists each notebook's current title and objectives, and no
runtime, which only the notebook's own last cell prints)."""
from __future__ import annotations

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
    assert pages["teacher"] == {"docs/syllabus.md", "docs/teacher/instructor-notes.md", "docs/teacher/rubrics.md"}
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
