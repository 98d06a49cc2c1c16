"""What the course's graded exercises need beyond the package itself (scripts/course.py
builds and grades them; the notebooks' "Exercises" sections use them).

- `forbid`: while a re-implementation exercise is graded, the package function it re-implements
  raises, so a submission that only calls the package fails the (hidden) test.
- `predict` / `measure` / `record`: a predict-then-measure exercise records the student's
  prediction, then the measurement of a small experiment, each with the order in which it was
  made. What they print stays in the handed-in notebook: grading reads from the submitted file
  whether the prediction was entered before the measurement (a re-run always runs them in order),
  and a prediction entered after a measurement says so in its output.

    from oar_lite.course import exercises
    predicted_tau = 0.3
    exercises.predict("ex04_tau", predicted_tau)       # before the experiment
    measured_tau = ...                                 # the experiment
    exercises.measure("ex04_tau", measured_tau)
    exercises.record("ex04_tau").predicted_first       # True
"""
from __future__ import annotations

import contextlib
import itertools
import math
import numbers
import types
from dataclasses import dataclass
from typing import Iterator


def _blocked_code(function: types.FunctionType) -> types.CodeType:
    """A code object that raises, with as many free variables as ``function`` has closure cells
    (CPython only lets ``__code__`` be swapped for one with the same number)."""
    name = f"{function.__module__}.{function.__qualname__}"
    message = (f"{name} was called: this exercise asks you to compute it yourself, without the "
               f"package function it re-implements")
    free = function.__code__.co_freevars
    # The raising function is built inside an outer one that binds the same number of names,
    # so that it has matching free variables; it raises a builtin exception because its
    # globals become those of ``function``'s module.
    bind = "".join(f"    _f{i} = None\n" for i in range(len(free)))
    use = "".join(f"        _f{i}\n" for i in range(len(free)))
    source = (f"def _outer():\n{bind}    def {function.__name__}(*args, **kwargs):\n{use}"
              f"        raise RuntimeError({message!r})\n    return {function.__name__}\n")
    namespace: dict = {}
    exec(compile(source, "<oar_lite.course.exercises.forbid>", "exec"), namespace)
    return namespace["_outer"]().__code__


@contextlib.contextmanager
def forbid(*functions) -> Iterator[None]:
    """Within the block, calling any of ``functions`` raises RuntimeError ("... was called: this
    exercise asks you to compute it yourself ..."), whatever name it is called by
    (``ol.group_advantages``, ``oar_lite.grpo.group_advantages``, a name imported from it) and
    also from inside other package functions; on exit every function is restored.

    Args:
        functions: plain Python functions (``def``), e.g. ``ol.group_advantages``.

    Raises:
        TypeError: one of ``functions`` is not a plain Python function (a builtin, a class, a
            bound method), whose code cannot be swapped.
    """
    for f in functions:
        if not isinstance(f, types.FunctionType):
            raise TypeError(f"forbid() takes plain Python functions, got {f!r} ({type(f).__name__})")
    saved = [(f, f.__code__) for f in functions]
    try:
        for f, _ in saved:
            f.__code__ = _blocked_code(f)
        yield
    finally:
        for f, code in saved:
            f.__code__ = code


@dataclass
class Record:
    """One predict-then-measure exercise: the values and the order in which they were recorded
    (a counter shared by every `predict` and `measure` call of the session; None: not yet)."""

    name: str
    prediction: float | None = None
    measurement: float | None = None
    predicted_at: int | None = None
    measured_at: int | None = None

    @property
    def predicted_first(self) -> bool:
        """A prediction and a measurement were recorded, the (latest) prediction before the
        (latest) measurement."""
        return (self.predicted_at is not None and self.measured_at is not None
                and self.predicted_at < self.measured_at)


AFTER_MEASUREMENT = "after a measurement of this exercise (the grade report flags it)"
_RECORDS: dict[str, Record] = {}
_ORDER = itertools.count()


def _number(name: str, what: str, value) -> float | None:
    """``value`` as a float, None when it is still the stub (``...`` or None)."""
    if value is ... or value is None:
        print(f"{name}: no {what} recorded yet (replace ... with a number)")
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        if hasattr(value, "numel") and value.numel() == 1:          # a one-element tensor
            value = value.item()
        else:
            raise TypeError(f"{name}: the {what} must be one number, got {value!r} ({type(value).__name__})")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name}: the {what} must be a finite number, got {value}")
    return value


def predict(name: str, value) -> None:
    """Record a prediction (one number) for exercise ``name``, before its experiment runs, and
    say so. A stub (``...``) records nothing and says that; anything but one finite number is an
    error."""
    value = _number(name, "prediction", value)
    if value is not None:
        record = _RECORDS.setdefault(name, Record(name))
        record.prediction, record.predicted_at = value, next(_ORDER)
        late = record.measured_at is not None
        print(f"{name}: prediction {value:.4g} recorded" + (f" {AFTER_MEASUREMENT}" if late else ""))


def measure(name: str, value) -> None:
    """Record the measurement (one number) of exercise ``name``'s experiment and print it next
    to the prediction; like `predict`."""
    value = _number(name, "measurement", value)
    if value is not None:
        record = _RECORDS.setdefault(name, Record(name))
        record.measurement, record.measured_at = value, next(_ORDER)
        prediction = "no prediction recorded" if record.prediction is None else f"predicted {record.prediction:.4g}"
        print(f"{name}: {prediction}, measured {value:.4g}")


def record(name: str) -> Record:
    """What has been recorded for exercise ``name`` (an empty `Record` if nothing)."""
    return _RECORDS.get(name, Record(name))
