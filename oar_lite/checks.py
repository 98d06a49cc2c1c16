"""Range checks for numeric settings, one helper so every config says the same, e.g.
``TrainConfig.max_grad_norm=0 is out of range: expected a finite number > 0``."""
from __future__ import annotations

import math
import numbers


def describe_range(*, integer: bool = False, low=None, high=None, low_open: bool = False, high_open: bool = False,
                   optional: bool = False) -> str:
    """The allowed range in words, e.g. ``"an integer >= 1"`` or ``"a finite number in (0, 1]"``."""
    kind = "an integer" if integer else "a finite number"
    if low is not None and high is not None:
        text = f"{kind} in {'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
    elif low is not None:
        text = f"{kind} {'>' if low_open else '>='} {low:g}"
    elif high is not None:
        text = f"{kind} {'<' if high_open else '<='} {high:g}"
    else:
        text = kind
    return text + (" or None" if optional else "")


def check_number(owner: str, name: str, value, *, integer: bool = False, low=None, high=None,
                 low_open: bool = False, high_open: bool = False, optional: bool = False):
    """``value`` if it is a real number (an integer if ``integer``; finite otherwise; never a
    bool) in range, else a ValueError naming ``owner.name`` (``name`` alone when ``owner`` is
    empty), the value and the range. ``optional`` lets ``None`` through."""
    if value is None and optional:
        return value
    expected = describe_range(integer=integer, low=low, high=high, low_open=low_open, high_open=high_open,
                              optional=optional)
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
    if ok and integer:
        ok = isinstance(value, numbers.Integral)
    if ok and not integer:
        try:
            ok = math.isfinite(value)
        except OverflowError:  # an int too large for a float
            ok = False
    if ok and low is not None:
        ok = value > low if low_open else value >= low
    if ok and high is not None:
        ok = value < high if high_open else value <= high
    if not ok:
        raise ValueError(f"{owner + '.' if owner else ''}{name}={value!r} is out of range: expected {expected}")
    return value
