"""Prose that cannot go stale: no measured number is typed into a notebook's markdown.

Measured values (timings, speed-ups, accuracies, scores) change whenever a notebook is re-run, so
they may appear only in cell outputs, including markdown that code renders from the run's own
values (``IPython.display.Markdown``). This test reads every markdown cell of every notebook,
drops what is not prose (fenced code, inline code, LaTeX maths, link targets, HTML tags) and fails
on any of these patterns:

- TIMING: a number followed by a time unit: ``12 s``, ``1.5 min``, ``3 minutes``, ``40 ms``,
  ``2 h``, and the clock form ``1 min 09 s``;
- SPEED-UP: a decimal number followed by ``x`` or ``×``: ``0.86x``, ``1.73 ×``;
- PERCENT: a number followed by ``%``: ``12.5%``, ``38 %``;
- SCORE: a decimal number (``0.80``, ``.93``, ``1.02``) in a sentence that names a metric
  (accuracy, AUC, reward, Spearman, ρ, correlation, precision, agreement, ratio, ``±``),
  the way a hand-copied result reads ("AUC: OAR-P 0.80"). The values 0.0, 0.5 and 1.0 are
  exempt: in a metric's sentence they are its definition (chance, perfect), not a result.

Integers that are settings (``12 steps``, ``2 seeds``, ``G = 8``) and decimals that are not
next to a metric (``quantile 0.25``) are not measurements and pass.
"""
from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))

NUMBER = r"(?<![\w.])\d+(?:\.\d+)?"
PATTERNS = {
    "TIMING": re.compile(
        NUMBER + r"\s*(?:ms|s|sec|secs|seconds?|min|mins|minutes?|h|hrs?|hours?)\b(?![-\w])", re.IGNORECASE
    ),
    "SPEED-UP": re.compile(r"(?<![\w.])\d*\.\d+\s*(?:x|×)(?![\w])"),
    "PERCENT": re.compile(NUMBER + r"\s*%"),
}
METRIC_WORDS = re.compile(r"accura|\bauc\b|reward|spearman|ρ|\\rho|correlat|precision|agreement|ratio|±",
                          re.IGNORECASE)
DECIMAL = re.compile(r"(?<![\w.])\d*\.\d+(?![\w.])")
DEFINITIONS = {0.0, 0.5, 1.0}
SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z*(`-])|\n\s*\n|\n\s*[-*|]")


def prose(markdown: str) -> str:
    """The markdown with what is not prose removed (code, maths, URLs, HTML tags)."""
    text = re.sub(r"```.*?```", " ", markdown, flags=re.DOTALL)
    text = re.sub(r"`[^`]*`", " ", text)
    text = re.sub(r"\$\$.*?\$\$", " ", text, flags=re.DOTALL)
    text = re.sub(r"\$[^$]*\$", " ", text)
    text = re.sub(r"\]\([^)]*\)", "]", text)
    text = re.sub(r"https?://\S+", " ", text)
    return re.sub(r"<[^>]+>", " ", text)


def stale_numbers(markdown: str) -> list[tuple[str, str]]:
    """[(pattern name, matched text in its context)] for every hand-typed measurement."""
    text = prose(markdown)
    found = []
    for name, pattern in PATTERNS.items():
        found += [(name, text[max(0, m.start() - 30): m.end() + 10]) for m in pattern.finditer(text)]
    for sentence in SENTENCE.split(text):
        if METRIC_WORDS.search(sentence):
            found += [("SCORE", sentence.strip()[:120]) for m in DECIMAL.finditer(sentence)
                      if float(m.group(0)) not in DEFINITIONS][:1]
    return found


@pytest.mark.parametrize("text, kind", [
    ("The run took 12 s on 2 cores.", "TIMING"),
    ("about 1 min 09 s", "TIMING"),
    ("(5 minutes)", "TIMING"),
    ("OAR-G costs 1.73x GRPO", "SPEED-UP"),
    ("answers 12.5% of the problems", "PERCENT"),
    ("AUC pivotal vs neutral: OAR-P 0.80, OAR-G 0.64", "SCORE"),
    ("accuracy goes from 0.59 to about 0.75", "SCORE"),
])
def test_the_scan_catches_hand_typed_measurements(text, kind):
    assert kind in {name for name, _ in stale_numbers(text)}


@pytest.mark.parametrize("text", [
    "Train for 12 steps with 2 seeds and G = 8 completions per prompt.",
    "The default quantile 0.25 suppresses the lowest quarter.",
    "Timing printed by `print(f'{t:.1f} s')` and maths $0.5 s$ are not prose.",
    "See [the paper](https://arxiv.org/abs/2601.07408) and notebook 05.",
    "The reward is 1 if the answer is right, else 0.",
    "ROC-AUC (1.0: every pivotal token scores above every neutral one; 0.5: chance).",
])
def test_the_scan_lets_settings_and_code_pass(text):
    assert stale_numbers(text) == []


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_hand_typed_measurements_in_markdown(path):
    nb = nbformat.read(path, as_version=4)
    problems = [(i, name, where) for i, cell in enumerate(nb.cells) if cell.cell_type == "markdown"
                for name, where in stale_numbers(cell.source)]
    assert not problems, (
        f"{path.name}: measured numbers typed into markdown (print them, or render them with "
        "IPython.display.Markdown from the run's values):\n"
        + "\n".join(f"  cell {i}: {name}: ...{where}..." for i, name, where in problems))
