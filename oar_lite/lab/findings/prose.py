"""Prose from data: the sentences live in Jinja2 templates beside the modules that compute their
numbers (``oar_lite/lab/findings/<topic>.md.j2``), and a module supplies only numbers and
verdicts. A branch on a verdict is written in the template (``{% if x.diff_ci | reads == "above"
%}...{% else %}...{% endif %}``), so a teacher reads both wordings side by side and rewords a
sentence without touching Python.

A template is a set of macros, one per piece a notebook shows (a table, a reading, a paragraph);
`render` calls one with the numbers. A blank line in a template is a paragraph break and every
other line end is soft: `render` joins a paragraph's lines into one (a table row, a list item and
a heading each start a line of their own), so the rendered markdown reads the same whatever the
template's line breaks, and a branch may sit on lines of its own. The filters
the templates use: ``num`` (a number in a format spec: ``x | num("+.3f")``), ``ci`` (an interval:
``pair | ci(".2f")`` is ``"0.78 to 1.49"``), ``reads`` (the one verdict rule, `stats.versus`:
``"above"``, ``"below"`` or ``"includes"``), ``span`` (seeds as ranges: ``"0-14, 201-205"``), ``inline`` (a macro's output
used inside a sentence), ``first_upper`` (a phrase opening a sentence).
Shared wordings (an interval's side of 0, a method's display name) are macros of
``common.md.j2``, which each template imports.
"""
from __future__ import annotations

import re
from importlib import resources
from typing import Sequence

import jinja2
import jinja2.ext

from .. import stats

TEMPLATES = resources.files(__package__)
"""The folder holding the templates (package data: a clone, a wheel and Colab read the same files)."""


def num(value: float, spec: str = "") -> str:
    """``format(value, spec)``; a missing number (undefined in the template), None and NaN are refused."""
    if isinstance(value, jinja2.Undefined):
        str(value)  # raises jinja2.UndefinedError, naming what is missing
    if value is None or (isinstance(value, float) and not value == value):
        raise ValueError(f"a template was given {value!r} to print as a number")
    return format(value, spec)


def ci(pair: Sequence[float], spec: str = "", sep: str = " to ") -> str:
    """An interval ``(low, high)`` as ``"low to high"``, both in ``spec``."""
    if len(pair) != 2:
        raise ValueError(f"an interval has two ends, got {pair!r}")
    return f"{num(pair[0], spec)}{sep}{num(pair[1], spec)}"


def reads(interval, no_effect: float = 0.0) -> str:
    """Where a 95% interval lies against ``no_effect`` (0 for a difference, 1 for a speed-up), by
    the one verdict rule (`stats.versus`): ``"above"``, ``"below"`` or ``"includes"``. A change
    dict (``{"low", "high", ...}``) is read by its ends."""
    if isinstance(interval, dict):
        interval = (interval["low"], interval["high"])
    return stats.versus(interval, no_effect=no_effect)


def span(seeds: Sequence[int]) -> str:
    """Sorted seeds with runs of 3 or more consecutive ones written as ranges: ``"0-14, 201-205"``."""
    runs: list[list[int]] = []
    for s in sorted(seeds):
        if runs and s == runs[-1][-1] + 1:
            runs[-1].append(s)
        else:
            runs.append([s])
    return ", ".join(f"{r[0]}-{r[-1]}" if len(r) >= 3 else ", ".join(map(str, r)) for r in runs)


PARAGRAPH = "\x00"
"""What a blank line of a template renders to: a paragraph break (`unwrap`). Every other line end is soft."""


class BlankLineIsAParagraph(jinja2.ext.Extension):
    """A blank line of the template source is a paragraph break; any other line end, those of lines
    that hold only a tag included, is soft (`unwrap` joins the lines), so a branch may sit on lines of
    its own without breaking the paragraph around it. No blank line inside a tag."""

    def preprocess(self, source: str, name: str | None, filename: str | None = None) -> str:
        return "\n".join("{{ PARAGRAPH }}" if not line.strip() else line for line in source.split("\n"))


ENVIRONMENT = jinja2.Environment(
    loader=jinja2.FileSystemLoader(str(TEMPLATES)), undefined=jinja2.StrictUndefined, autoescape=False,
    lstrip_blocks=True, keep_trailing_newline=False, extensions=[BlankLineIsAParagraph])
"""Every template's environment: a missing number is an error (`jinja2.StrictUndefined`), never a blank."""
def inline(text: str) -> str:
    """A macro's output used inside a sentence: its paragraph breaks dropped, its ends trimmed."""
    return str(text).replace(PARAGRAPH, " ").strip()


def first_upper(text: str) -> str:
    """A phrase opening a sentence: its first letter upper case, the rest as written ("OAR-G" stays)."""
    text = str(text)
    return text[:1].upper() + text[1:]


ENVIRONMENT.filters.update(num=num, ci=ci, reads=reads, span=span, inline=inline, first_upper=first_upper)
ENVIRONMENT.globals.update(inf=float("inf"), PARAGRAPH=PARAGRAPH)

_LINE_START = re.compile(r"^\s*(?:\||[-*] |#|> |\d+\. )")


def unwrap(text: str) -> str:
    """Markdown from a rendered template: paragraphs (split at `PARAGRAPH`) separated by one blank
    line, each paragraph's lines joined into one, except that a table row, a list item, a heading and
    a quote start a line of their own (a list item's wrapped lines join it; a heading is a line by itself). Runs of spaces inside a
    line become one and a space before closing punctuation goes (a branch in the middle of a sentence
    leaves no gap)."""
    blocks = []
    for block in text.split(PARAGRAPH):
        lines: list[str] = []
        for raw in block.splitlines():
            line = raw.strip()
            if not line:
                continue
            if line.startswith("|"):
                lines.append(line)
            elif lines and not _LINE_START.match(line) and not lines[-1].startswith(("|", "#")):
                lines[-1] = f"{lines[-1]} {line}"
            else:
                lines.append(line)
        lines = [line if line.startswith("|") else re.sub(r" +([,.;:)])", r"\1", re.sub(r" {2,}", " ", line))
                 for line in lines]
        if lines:
            blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def render(template: str, macro: str, **values) -> str:
    """The markdown of ``macro`` in ``template`` (a file of this folder) filled with ``values``,
    its paragraphs joined (`unwrap`). KeyError names the macros the template has when ``macro``
    is not one of them."""
    module = ENVIRONMENT.get_template(template).module
    found = getattr(module, macro, None)
    if not callable(found):
        names = sorted(n for n in dir(module) if not n.startswith("_") and callable(getattr(module, n)))
        raise KeyError(f"{template} has no macro {macro!r}; it has {names}")
    return unwrap(str(found(**values)))
