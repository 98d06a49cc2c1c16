"""The README's "What we measured" block, between `MARKERS`, written from the shipped data
(``readme.md.j2``: the toy world's bullets of `conclusion`, the SmolLM2 bullet of `smollm2`);
``python -m oar_lite.lab.findings --write-readme README.md`` rewrites it and a test fails when the
README and the data disagree."""
from __future__ import annotations

import re
from pathlib import Path

from . import conclusion, prose, smollm2

MARKERS = ("<!-- findings:start -->", "<!-- findings:end -->")
TEMPLATE = "readme.md.j2"


def block(credit: dict | None = None, learning: dict | None = None) -> str:
    """The bullets, from `conclusion.numbers` and `smollm2.finale` (default: the shipped data)."""
    return prose.render(TEMPLATE, "block", credit=conclusion.numbers() if credit is None else credit,
                        learning=smollm2.finale() if learning is None else learning)


def _split(text: str, path: Path) -> re.Match:
    start, end = MARKERS
    m = re.search(re.escape(start) + r"\n(.*?)\n" + re.escape(end), text, re.S)
    if m is None:
        raise ValueError(f"{path} has no block between {start} and {end}")
    return m


def check(path: Path) -> str | None:
    """None when the README's block equals `block`, else what differs."""
    m = _split(path.read_text(), path)
    want = block()
    return None if m.group(1) == want else f"README block:\n{m.group(1)}\n\nshipped data says:\n{want}"


def write(path: Path) -> None:
    """Rewrite the README's block from the shipped data."""
    text = path.read_text()
    m = _split(text, path)
    path.write_text(text[:m.start(1)] + block() + text[m.end(1):])
