"""Pacing: how much class time each notebook takes, estimated from the notebooks themselves.

    python scripts/pacing.py           # rewrite the generated blocks of the syllabus and instructor notes
    python scripts/pacing.py --check   # fail if a generated block disagrees with the notebooks

docs/syllabus.md (both course sites) and docs/teacher/instructor-notes.md (the teacher's) are
hand-written prose around blocks this script writes, between ``<!-- pacing:begin NAME -->`` and
``<!-- pacing:end NAME -->`` markers: the class-time estimate, prerequisites and graded exercises
of each notebook in the syllabus, the timing of its live cells in the notes. Everything in a block
is read from the committed notebooks (their words, code, exercises, printed runtime and the cell
timings nbconvert records), so `--check` (tests/test_pacing.py) fails as soon as a notebook
changes without the pages being regenerated.

The estimate, stated on the syllabus page with its constants:

- reading: words of prose (markdown cells and the text the code prints, tables included; a word
  is a run of characters with a letter in it, so numbers and maths symbols do not count) at
  ``READING_WPM``, plus the lines of code outside the exercises at ``CODE_LINES_PER_MIN``;
- live cells: the runtime the notebook's last cell printed in its committed run, rounded up to
  the minute (a part's: the sum of its cells' recorded timings, rounded up);
- exercises, by kind (`exercise_cost`): every exercise reads its prompt at ``READING_WPM`` and
  writes its solution's lines of code at ``CODE_MIN_PER_LINE`` minutes each, plus ``CHECK_MIN``
  to run its checks and fix what they find; a predict-then-measure exercise adds ``PREDICT_MIN``
  to work out its prediction and its experiment's recorded runtime; a written answer (the
  question's "why", the gap for a predict-then-measure one) takes its model answer's words at
  ``WRITING_WPM``.

Class time is the sum. Sessions count the reading and the live cells against ``SESSION_MIN``
(the exercises begin in class and what does not fit is homework), and a notebook in parts takes
at least one session per part.

A notebook split into parts (markdown cells opening ``## Part 1``, ``## Part 2``, ...; notebook 06)
gets the estimate per part: a part runs from its heading to the next one (the cells before Part 1
count to Part 1, the exercise section and what follows to the last part; the exercises' own cells
to neither), and its exercises are the question names its heading cell cites in backticks. Its
sessions and homework are written from the same reading: the numbered sections (``## 6. ...``)
each part holds, its exercises, and the pre-registrations to read before the session that shows
their results (`preregistered`: a section titled as a section of benchmarks/RESULTS.md that holds
a pre-registration).

An appendix (a markdown cell opening ``## Appendix``, after everything else but the runtime cell;
notebook 06's long tables) is read at home: it ends the last part, its reading is stated on its
own, and it counts neither to the class time nor to the sessions.
"""
from __future__ import annotations

import math
import re
import sys
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import course  # noqa: E402  (scripts/course.py: the notebooks, their questions, headers and run records)

ROOT = course.ROOT
SYLLABUS = ROOT / "docs" / "syllabus.md"
NOTES = ROOT / "docs" / "teacher" / "instructor-notes.md"

READING_WPM = 120          # words per minute, technical prose read and discussed in class
CODE_LINES_PER_MIN = 6     # lines of code per minute, read and explained (blank lines not counted)
CODE_MIN_PER_LINE = 2      # minutes per line of an exercise's solution code, written and debugged by a student
CHECK_MIN = 5              # minutes per exercise to run its checks and fix what they find
PREDICT_MIN = 5            # minutes to work out a prediction before the experiment
WRITING_WPM = 15           # words per minute of a written answer, as long as the model answer
SESSION_MIN = 90           # one class session
SLOW_CELL_S = 1.0          # the notes list the cells whose recorded run took at least this long

WORD = re.compile(r"\S*[A-Za-z]\S*")
PART = re.compile(r"^## Part (\d+)\b", re.MULTILINE)
APPENDIX = re.compile(r"^## Appendix\b")
SECTION = re.compile(r"^## (\d+)\. (.+?)\s*$", re.MULTILINE)
EXERCISES_HEADING = "## Exercises"
RESULTS = ROOT / "benchmarks" / "RESULTS.md"


def words(text: str) -> int:
    """Words with at least one letter (numbers, maths symbols and table rules do not count)."""
    return len(WORD.findall(text))


def _printed(cell) -> str:
    """The text a code cell printed: stream output, rendered markdown, plain-text results."""
    texts = []
    for output in cell.get("outputs", []):
        if "text" in output:
            texts.append(output["text"])
        data = output.get("data", {})
        if "text/markdown" in data:
            texts.append(data["text/markdown"])
        elif "text/plain" in data and not {"image/png", "text/html"} & set(data):
            texts.append(data["text/plain"])
    return "\n".join(texts)


def cell_seconds(cell) -> float | None:
    """Seconds a code cell took in the committed run, from the timing nbconvert records in its
    metadata (``execution``: ``iopub.execute_input`` to ``shell.execute_reply``), or None."""
    timing = cell.get("metadata", {}).get("execution", {})
    start, end = timing.get("iopub.execute_input"), timing.get("shell.execute_reply")
    if not (start and end):
        return None
    parse = lambda s: datetime.fromisoformat(s.replace("Z", "+00:00"))  # noqa: E731
    return (parse(end) - parse(start)).total_seconds()


def _title(prompt: str, name: str) -> str:
    """An exercise's title: the bold lead of its prompt (``**1. Signal and noise.**``)."""
    match = re.search(r"\*\*\s*\d+\.\s*(.+?)\*\*", prompt)
    return match.group(1).strip().rstrip(".") if match else name


def _parts(nb) -> list[dict]:
    """``[{number, first, exercises}]`` for a notebook split into parts, else ``[]``."""
    found = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown":
            match = PART.match(cell.source)
            if match:
                found.append({"number": int(match.group(1)), "first": index,
                              "exercises": re.findall(r"`(ex\d\d_\w+)`", cell.source)})
    if [p["number"] for p in found] != list(range(1, len(found) + 1)):
        raise ValueError(f"parts must be numbered 1, 2, ... in order; found {[p['number'] for p in found]}")
    return found


def _appendix(nb) -> int | None:
    """The index of the cell opening the appendix read at home, or None."""
    return next((i for i, c in enumerate(nb.cells) if c.cell_type == "markdown" and APPENDIX.match(c.source)), None)


def _solution_lines(q: dict) -> int:
    """Lines of code a student writes for question ``q``: its solution's lines between ``# BEGIN
    SOLUTION`` and ``# END SOLUTION`` or ending in ``# SOLUTION``, blank lines and comments aside."""
    count = 0
    for source in q["solution"]:
        keep = False
        for line in source.splitlines():
            if "# BEGIN SOLUTION" in line:
                keep = True
            elif "# END SOLUTION" in line:
                keep = False
            elif (keep or line.rstrip().endswith("# SOLUTION")) and line.strip() and not line.strip().startswith("#"):
                count += 1
    return count


def exercise_cost(nb, q: dict) -> dict:
    """One graded exercise's time by its kind (module docstring): ``{kind, prompt_words,
    code_lines, run_s, written_words, minutes}``. ``kind``: "predict-then-measure" (it records a
    prediction, then a measurement) or "re-implementation" (it writes code whose values the hidden
    test checks); ``written_words``: its model answer's (0: no written answer); ``run_s``: the
    recorded runtime of its solution cells in the committed run."""
    ptm = course.predict_then_measure(q)
    answers = set(q["answers"])
    prompt = sum(words(nb.cells[i].source) for i in q["cells"]
                 if nb.cells[i].cell_type == "markdown" and nb.cells[i].source not in answers)
    solution = set(q["solution"])
    run_s = sum(cell_seconds(nb.cells[i]) or 0 for i in q["cells"]
                if nb.cells[i].cell_type == "code" and nb.cells[i].source in solution)
    lines, written = _solution_lines(q), sum(words(a) for a in q["answers"])
    minutes = (prompt / READING_WPM + lines * CODE_MIN_PER_LINE + CHECK_MIN + written / WRITING_WPM
               + ((PREDICT_MIN + run_s / 60) if ptm else run_s / 60))
    return {"kind": "predict-then-measure" if ptm else "re-implementation", "prompt_words": prompt,
            "code_lines": lines, "run_s": run_s, "written_words": written, "minutes": math.ceil(minutes)}


def _cost(nb, cells: list[int], questions: list[dict]) -> dict:
    """Words, code lines and minutes of a set of cells (indices into ``nb.cells``) outside the
    exercises, and the exercise time of ``questions``."""
    inside = {i for q in course.questions(nb) for i in q["cells"]}   # the exercises' own time
    prose = code = 0
    for i in cells:
        cell = nb.cells[i]
        if i in inside:
            continue
        if cell.cell_type == "markdown":
            prose += words(cell.source)
        elif cell.cell_type == "code":
            code += sum(1 for line in cell.source.splitlines() if line.strip())
            prose += words(_printed(cell))
    reading = prose / READING_WPM + code / CODE_LINES_PER_MIN
    recorded = [cell_seconds(nb.cells[i]) for i in cells if nb.cells[i].cell_type == "code"]
    return {"words": prose, "code_lines": code, "reading_min": math.ceil(reading),
            "exercises": len(questions), "exercise_min": sum(q["cost"]["minutes"] for q in questions),
            "recorded_s": sum(s for s in recorded if s is not None)}


def _sections(nb, cells: list[int]) -> list[tuple[int, str]]:
    """The numbered sections (``## 6. Title``) whose headings lie in ``cells``: ``[(6, "Title")]``."""
    return [(int(n), title) for i in cells if nb.cells[i].cell_type == "markdown"
            for n, title in SECTION.findall(nb.cells[i].source)]


def preregistered(results: Path = RESULTS) -> list[str]:
    """Titles of the sections of benchmarks/RESULTS.md (``## Title (issue N)``) that hold a
    pre-registration (a ``###`` heading saying so): a class reads it, and predicts, before the
    session that shows the results."""
    found = []
    for block in re.split(r"^(?=## )", results.read_text(), flags=re.MULTILINE):
        head = re.match(r"## (.+?)\s*(?:\(issue [^)]*\))?\s*$", block.splitlines()[0]) if block.startswith("## ") else None
        if head and re.search(r"^### .*pre-registration", block, flags=re.MULTILINE | re.IGNORECASE):
            found.append(head.group(1).strip())
    return found


def _range(sections: list[tuple[int, str]]) -> str:
    numbers = [n for n, _ in sections]
    if not numbers:
        return "no numbered section"
    return f"section {numbers[0]}" if len(numbers) == 1 else f"sections {numbers[0]}-{numbers[-1]}"


def pacing(path: Path) -> dict:
    """Everything the pages say about one notebook: ``{name, title, prerequisites, questions,
    points, run, live_min, parts: [{label, cost, exercises}], total_min, sessions}``."""
    nb = course._read(path)
    head = course._header(nb)
    questions = course.questions(nb)
    for q in questions:
        q["title"] = _title(next((nb.cells[i].source for i in q["cells"] if nb.cells[i].cell_type == "markdown"), ""),
                            q["name"])
        q["cost"] = exercise_cost(nb, q)
    run = course.run_record(nb)
    live_min = math.ceil(run["seconds"] / 60) if run else 0
    parts = _parts(nb)
    appendix = _appendix(nb)
    end = len(nb.cells) if appendix is None else appendix
    if parts:
        named = [name for p in parts for name in p["exercises"]]
        known = [q["name"] for q in questions]
        if sorted(named) != sorted(known):
            raise ValueError(f"{path.name}: the part headings must cite each exercise once, in backticks; "
                             f"they cite {named}, the notebook has {known}")
        bounds = [0] + [p["first"] for p in parts[1:]] + [end]
        spans = [{"label": f"Part {part['number']}", "exercises": mine,
                  "cost": _cost(nb, list(range(bounds[k], bounds[k + 1])), mine),
                  "sections": _sections(nb, list(range(bounds[k], bounds[k + 1])))}
                 for k, part in enumerate(parts)
                 for mine in [[q for q in questions if q["name"] in part["exercises"]]]]
    else:
        spans = [{"label": "", "cost": _cost(nb, list(range(end)), questions), "exercises": questions,
                  "sections": _sections(nb, list(range(end)))}]
    titles = {t.lower(): t for t in preregistered()}
    for k, span in enumerate(spans):
        span["preregistered"] = [(n, titles[t.lower()]) for n, t in span["sections"] if t.lower() in titles]
    # the whole notebook's live time is the printed runtime; a part's share is its recorded cell time
    for span in spans:
        span["live_min"] = (math.ceil(span["cost"]["recorded_s"] / 60) if len(spans) > 1 else live_min)
        span["total_min"] = span["cost"]["reading_min"] + span["live_min"] + span["cost"]["exercise_min"]
    total = sum(s["total_min"] for s in spans)
    home = None
    if appendix is not None:  # read at home: neither class time nor a session
        cost = _cost(nb, list(range(appendix, len(nb.cells))), [])
        home = {"label": "Appendix, at home", "cost": cost}
    return {"name": path.stem, "file": path.name, "title": head["title"], "prerequisites": head["prerequisites"],
            "questions": questions, "points": sum(q["points"] for q in questions),
            "written_points": course.WRITTEN_POINTS * sum(1 for q in questions if q["answers"]), "run": run,
            "live_min": live_min, "parts": spans, "home": home, "total_min": total,
            "sessions": max(len(spans), math.ceil(sum(s["cost"]["reading_min"] + s["live_min"] for s in spans)
                                                  / SESSION_MIN)),
            "slow_cells": _slow_cells(nb)}


def _slow_cells(nb) -> list[dict]:
    """Code cells (the exercises' included) whose recorded run took at least ``SLOW_CELL_S``, slowest
    first: ``[{seconds, section, line}]`` (the section heading above it, its first code line)."""
    section, found = "", []
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            heading = re.search(r"^##? (.+)$", cell.source, re.MULTILINE)
            section = heading.group(1).strip() if heading else section
        elif cell.cell_type == "code":
            seconds = cell_seconds(cell)
            if seconds is not None and seconds >= SLOW_CELL_S:
                line = next((l.strip() for l in cell.source.splitlines() if l.strip() and not l.strip().startswith("#")), "")
                found.append({"seconds": seconds, "section": section, "line": line[:70]})
    return sorted(found, key=lambda c: -c["seconds"])


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _run_words(run: dict | None) -> str:
    if run is None:
        return "no committed run (its last cell has printed no runtime)"
    text = f"{run['seconds']} s"
    if run["load"] is not None:
        text += f" on {run['cores']} cores at load average {run['load']:.1f}"
    return text


def _points(p: float) -> str:
    return f"{p:g} point" + ("" if p == 1 else "s")


def _exercise_line(q: dict, part: str = "") -> str:
    cost = q["cost"]
    what = [_plural(cost["code_lines"], "line") + " of code"]
    if cost["kind"] == "predict-then-measure":
        what.append("a prediction" + (f", an experiment of {cost['run_s']:.0f} s" if cost["run_s"] >= 1 else ""))
    if cost["written_words"]:
        what.append(f"a written answer (the model answer's {cost['written_words']} words)")
    written = f" + {course.WRITTEN_POINTS:g} written" if q["answers"] else ""
    return (f"- `{q['name']}`{part}: {q['title']} ({_points(q['points'])}{written}); {cost['kind']}, "
            f"{cost['minutes']} min: {', '.join(what)}")


def _exercise_names(qs: list[dict]) -> str:
    return ", ".join(f"`{q['name']}`" for q in qs)


def sessions_lines(info: dict) -> list[str]:
    """A notebook's sessions and homework, when it is in parts or a section of it shows the results
    of a pre-registration (read from the notebook: its parts' sections and exercises)."""
    spans, lines = info["parts"], []
    if len(spans) > 1:
        parts = [f"{s['label']} ({_range(s['sections'])}: {'; '.join(t for _, t in s['sections'])}) is session {k + 1}"
                 for k, s in enumerate(spans)]
        lines += [f"**Sessions** (from the notebook's part headings): {'; '.join(parts)}. Each part opens with its "
                  "own objectives and names its exercises, and closes with its own takeaways.", ""]
    homework = []
    for k, span in enumerate(spans):
        before = [f"before {span['label'] or 'the session'} shows it in section {n}, read the pre-registration of "
                  f"\"{title}\" in `benchmarks/RESULTS.md` and write down which of its predictions you expect to hold"
                  for n, title in span["preregistered"]]
        if k == 0 and before:
            homework.append(f"- Before the first session: {'; '.join(before)}.")
        elif before:
            spans[k - 1].setdefault("then", []).extend(before)
    for span in spans:
        if len(spans) == 1 and not span.get("then") and not homework:
            continue
        exercises = span["exercises"]
        text = (f"its {_plural(len(exercises), 'exercise')} ({_exercise_names(exercises)}, "
                f"{span['cost']['exercise_min']} min with their written answers)" if exercises else "no exercise")
        homework.append(f"- After {span['label'] or 'the session'}: {text}"
                        + "".join(f"; and, {t}" for t in span.get("then", [])) + ".")
    if homework:
        lines += ["**Homework** (from the same reading):", "", *homework, ""]
    return lines


def syllabus_block(info: dict) -> str:
    """The syllabus's generated block for one notebook."""
    link = f"[{info['title']}](../notebooks/{info['file']})"
    lines = [f"### {link}", ""]
    for span in info["parts"]:
        cost = span["cost"]
        label = f"**{span['label']}** ({_range(span['sections'])}): " if span["label"] else ""
        live = (f"its cells' recorded run, {cost['recorded_s']:.0f} s" if span["label"]
                else f"the committed run printed {_run_words(info['run'])}")
        lines.append(f"- {label}reading {cost['reading_min']} min ({cost['words']:,} words of prose and printed "
                     f"output, {cost['code_lines']} lines of code) + live cells {span['live_min']} min ({live}) + "
                     f"exercises {cost['exercise_min']} min ({_plural(cost['exercises'], 'exercise')}, by kind, "
                     f"written answers included) = **{span['total_min']} min**")
    if info["home"] is not None:
        cost = info["home"]["cost"]
        lines.append(f"- **{info['home']['label']}**: reading {cost['reading_min']} min ({cost['words']:,} words of prose "
                     f"and printed output, {cost['code_lines']} lines of code), not counted in class time")
    lines += [f"- class time **{info['total_min']} min**; {_plural(info['sessions'], 'session')} of "
              f"{SESSION_MIN} min", ""]
    lines += sessions_lines(info)
    lines += ["**Prerequisites** (from the notebook)", "", info["prerequisites"] or "(none stated)", "",
              f"**Graded exercises** ({_points(info['points'])} from the hidden tests + "
              f"{_points(info['written_points'])} for the written answers, graded by hand)", ""]
    for span in info["parts"]:
        for q in span["exercises"]:
            lines.append(_exercise_line(q, f" ({span['label']})" if span["label"] else ""))
    return "\n".join(lines)


def overview_block(infos: list[dict]) -> str:
    lines = ["| notebook | class time | sessions | graded exercises | live cells (committed run) |",
             "|---|---|---|---|---|"]
    for info in infos:
        lines.append(f"| [{info['title']}](../notebooks/{info['file']}) | {info['total_min']} min | {info['sessions']} | "
                     f"{len(info['questions'])} ({info['points']:g} + {info['written_points']:g} written points) | "
                     f"{info['run']['seconds'] if info['run'] else '-'} s |")
    total = sum(i["total_min"] for i in infos)
    auto, written = sum(i["points"] for i in infos), sum(i["written_points"] for i in infos)
    lines += [f"| **the series** | **{total} min** | **{sum(i['sessions'] for i in infos)}** | "
              f"{sum(len(i['questions']) for i in infos)} ({auto:g} + {written:g} written = {auto + written:g} points) | |",
              "",
              f"Estimated with words read at {READING_WPM} words per minute, code at {CODE_LINES_PER_MIN} lines "
              f"per minute, the live cells at the runtime the committed run printed (rounded up to the minute), and "
              f"each exercise by its kind: its prompt read at {READING_WPM} words per minute, each line of its "
              f"solution's code written and debugged in {CODE_MIN_PER_LINE} min, {CHECK_MIN} min to run its checks and "
              f"fix what they find; a predict-then-measure exercise adds {PREDICT_MIN} min to work out the "
              f"prediction and its experiment's recorded runtime; a written answer as long as the model answer, "
              f"written at {WRITING_WPM} words per minute. Points: each exercise's hidden tests carry its points "
              f"(graded automatically); each written answer carries {_points(course.WRITTEN_POINTS)}, graded by "
              f"hand with the rubric. Sessions ({SESSION_MIN} min each) count the reading and "
              "the live cells; the exercises begin in class and what does not fit is homework; a notebook in "
              "parts takes a session per part. "
              "`python scripts/pacing.py` computes every number on this page from the notebooks; "
              "`tests/test_pacing.py` fails when the page and the notebooks disagree."]
    return "\n".join(lines)


def notes_block(info: dict) -> str:
    """The instructor notes' generated block for one notebook: how long its live cells take."""
    lines = []
    if len(info["parts"]) > 1:
        spans = info["parts"]
        breaks = [f"after section {s['sections'][-1][0]}" for s in spans[:-1] if s["sections"]]
        lines += [f"**Sessions** (read from the notebook's part headings): "
                  + "; ".join(f"{s['label']} is {_range(s['sections'])}, with {_plural(len(s['exercises']), 'exercise')} "
                              f"({_exercise_names(s['exercises'])})" for s in spans)
                  + f". Break {' and '.join(breaks)}, where the notebook closes a part with its takeaways; a part's "
                  "exercises fit the end of its session or go home. Start each later session by asking for the "
                  "previous part's takeaways back.", ""]
    lines += [f"**Live cells** (read from the committed run, not typed): the last cell printed "
              f"{_run_words(info['run'])}."]
    slow = info["slow_cells"]
    if slow:
        lines += ["The cells that took longest in that run (nbconvert's recorded cell timings):", ""]
        lines += [f"- {c['seconds']:.1f} s: section *{c['section']}*, `{c['line']}`" for c in slow[:4]]
        if len(slow) > 4:
            lines.append(f"- and {len(slow) - 4} more of at least {SLOW_CELL_S:g} s")
    else:
        lines.append(f"No cell of that run took {SLOW_CELL_S:g} s or more (or its cell timings were not recorded).")
    return "\n".join(lines)


def blocks() -> dict[Path, dict[str, str]]:
    """``{page: {block name: generated text}}``."""
    infos = [pacing(p) for p in course.notebooks()]
    return {SYLLABUS: {"overview": overview_block(infos), **{i["name"]: syllabus_block(i) for i in infos}},
            NOTES: {i["name"]: notes_block(i) for i in infos}}


def render(text: str, generated: dict[str, str], page: str = "page") -> str:
    """``text`` with each ``<!-- pacing:begin NAME -->`` ... ``<!-- pacing:end NAME -->`` block
    replaced by ``generated[NAME]``; every name needs its markers, and every marker a name."""
    found = re.findall(r"<!-- pacing:begin (\S+) -->", text)
    missing, unknown = sorted(set(generated) - set(found)), sorted(set(found) - set(generated))
    if missing or unknown:
        raise ValueError(f"{page}: blocks without markers {missing}, markers without a block {unknown}; "
                         "add '<!-- pacing:begin NAME -->' and '<!-- pacing:end NAME -->' lines per notebook")
    for name, body in generated.items():
        pattern = re.compile(rf"(<!-- pacing:begin {re.escape(name)} -->\n).*?(<!-- pacing:end {re.escape(name)} -->)",
                             re.DOTALL)
        if not pattern.search(text):
            raise ValueError(f"{page}: block {name!r} has no '<!-- pacing:end {name} -->'")
        text = pattern.sub(lambda m: m.group(1) + body + "\n" + m.group(2), text)
    return text


def stale() -> list[str]:
    """The pages whose generated blocks disagree with the notebooks."""
    return [str(page.relative_to(ROOT)) for page, generated in blocks().items()
            if render(page.read_text(), generated, page.name) != page.read_text()]


def main(argv: list[str] | None = None) -> None:
    from oar_lite.settings import parser as command_line

    parser = command_line(__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="fail if a page disagrees with the notebooks")
    args = parser.parse_args(argv)
    if args.check:
        pages = stale()
        if pages:
            raise SystemExit(f"stale: {pages}; run `python scripts/pacing.py` and commit the pages")
        print("pacing pages agree with the notebooks")
        return
    for page, generated in blocks().items():
        page.write_text(render(page.read_text(), generated, page.name))
        print(f"wrote {page.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
