"""How large the notebooks run: the environment variable ``OAR_LITE_SIZE``, read in one place.

``make test`` sets it to ``"test"`` (the fast suite: notebooks skip their slowest cells),
``make grade`` to ``"grading"`` (smaller runs of the same cells); unset, a notebook runs at
full size. Any other value is refused: a typo must not silently run the full size.
"""
from __future__ import annotations

import os
from typing import Mapping

VARIABLE = "OAR_LITE_SIZE"
SIZES = ("full", "test", "grading")
"""The sizes a notebook knows; ``"full"`` is what an unset (or empty) variable means."""


def run_size(environ: Mapping[str, str] = os.environ) -> str:
    """The size ``OAR_LITE_SIZE`` asks for, one of `SIZES`; ValueError for any other value."""
    value = environ.get(VARIABLE, "").strip() or "full"
    if value not in SIZES:
        raise ValueError(f"{VARIABLE}={environ[VARIABLE]!r} is not a size; expected one of {list(SIZES)} "
                         f"(or unset for the full size)")
    return value
