"""How the lab's records name paths and commands (provenance): a path inside the folder the
``RUNS`` environment variable names as ``$RUNS/...`` (`portable`), a command as one shell line
with its paths so written (`command_line`), the convention of benchmarks/RESULTS.md, so that a
shipped record names no folder of one machine."""
from __future__ import annotations

import os
import shlex


def portable(path: str | os.PathLike) -> str:
    """``path`` as provenance records it: a path inside the folder the ``RUNS`` environment
    variable names (where runs are written, outside the checkout) as ``$RUNS/...``, the
    convention of benchmarks/RESULTS.md, so a shipped record names no folder of one machine;
    any other path as given (relative ones are relative to the checkout, where commands run)."""
    text = os.fspath(path)
    runs = os.environ.get("RUNS", "").rstrip("/")
    if runs and (text == runs or text.startswith(runs + "/")):
        return "$RUNS" + text[len(runs):]
    return text


def command_line(words: list[str]) -> str:
    """``words`` as one shell line, quoted (`shlex.join`) and each path `portable`: ``$RUNS`` is
    left unquoted so that the line, pasted into a shell, expands it."""
    def word(text: str) -> str:
        flag, eq, value = text.partition("=") if text.startswith("--") else ("", "", text)
        kept = portable(value)
        if kept == value:
            return shlex.quote(text)
        rest = kept[len("$RUNS"):]
        return flag + eq + "$RUNS" + (shlex.quote(rest) if rest else "")

    return " ".join(word(w) for w in words)
