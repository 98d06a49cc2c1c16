"""What the course's graded exercises need beyond the package itself (scripts/course.py
builds and grades them; the notebooks' "Exercises" sections use them).

- `forbid`: while a re-implementation exercise is graded, the package functions that compute its
  answer raise, so a submission that only calls the package fails the (hidden) test; so does a
  copy of such a function made before the check (``types.FunctionType(f.__code__, ...)``).
- `checks`: a student notebook's grader (otter's), its public checks read from the package
  (``oar_lite/course/data/checks/<notebook>.json``, written by ``make student``), so that the
  notebook's exercise section opens with two lines instead of the checks' source.
- `predict` / `measure` / `record`: a predict-then-measure exercise records the student's
  prediction, then the measurement of a small experiment, each with the order in which it was
  made. What they print stays in the handed-in notebook: grading reads from the submitted file
  whether the kernel's first prediction came before its first measurement (a re-run always runs
  them in order). A prediction entered after a measurement says so in its output; a prediction
  run again in the same kernel (Run All twice) says "re-recorded", and "changed from" when its
  value is not the one the first measurement was made against.

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
import json
import math
import numbers
import os
import sys
import types
from dataclasses import dataclass
from importlib import resources
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


def _name(function) -> str:
    return f"{function.__module__}.{function.__qualname__}"


@contextlib.contextmanager
def forbid(*functions) -> Iterator[None]:
    """Within the block, calling any of ``functions`` raises RuntimeError ("... was called: this
    exercise asks you to compute it yourself ..."), whatever name it is called by
    (``ol.group_advantages``, ``oar_lite.grpo.group_advantages``, a name imported from it) and
    also from inside other package functions; on exit every function is restored.

    A copy of one of them made before the block (``types.FunctionType(f.__code__, ...)``, which
    keeps the original code) is caught too: a profile hook (`sys.setprofile`) watches for the
    original code objects while the block runs, raises at the copy's first call and, should the
    submission catch that error, raises again when the block ends. What it cannot see: code
    rebuilt from the source (``inspect.getsource`` and ``exec``, ``importlib.reload``), which
    makes new code objects; the grade report flags submissions that use those.

    Args:
        functions: plain Python functions (``def``), e.g. ``ol.group_advantages``.

    Raises:
        TypeError: one of ``functions`` is not a plain Python function (a builtin, a class, a
            bound method), whose code cannot be swapped.
        RuntimeError: in the block, when a blocked function (or a copy of it) runs; at its end,
            when one ran and its error was caught, or when the profile hook was switched off.
    """
    for f in functions:
        if not isinstance(f, types.FunctionType):
            raise TypeError(f"forbid() takes plain Python functions, got {f!r} ({type(f).__name__})")
    saved = [(f, f.__code__) for f in functions]
    originals = {id(code): (_name(f), code) for f, code in saved}     # the code objects kept alive
    caught: list[str] = []
    previous = sys.getprofile()

    def watch(frame, event, arg):
        if event == "call" and id(frame.f_code) in originals and frame.f_code is originals[id(frame.f_code)][1]:
            name = originals[id(frame.f_code)][0]
            caught.append(name)
            raise RuntimeError(f"{name} was called through a copy of the function made before this check: "
                               f"this exercise asks you to compute it yourself, without the package function "
                               f"it re-implements")
        if previous is not None:
            previous(frame, event, arg)

    try:
        for f, _ in saved:
            f.__code__ = _blocked_code(f)
        sys.setprofile(watch)
        yield
        if caught:
            raise RuntimeError(f"{caught[0]} was called through a copy of the function made before this check "
                               "(its error was caught): this exercise asks you to compute it yourself")
        if sys.getprofile() is not watch:
            raise RuntimeError("the check's watch for copies of the package functions was switched off "
                               "(sys.setprofile) while it ran")
    finally:
        sys.setprofile(previous)
        for f, code in saved:
            f.__code__ = code


@dataclass
class Record:
    """One predict-then-measure exercise: the values and the order in which they were recorded
    (a counter shared by every `predict` and `measure` call of the session; None: not yet). The
    ``first_`` fields keep the kernel's first prediction and first measurement, which decide
    the order; the others the latest (a cell run again re-records)."""

    name: str
    prediction: float | None = None
    measurement: float | None = None
    predicted_at: int | None = None
    measured_at: int | None = None
    first_predicted_at: int | None = None
    first_measured_at: int | None = None
    measured_against: float | None = None    # the prediction in place when the first measurement was made

    @property
    def predicted_first(self) -> bool:
        """A prediction and a measurement were recorded, the kernel's first prediction before its
        first measurement (running them again in order, Run All twice, keeps it so)."""
        return (self.first_predicted_at is not None and self.first_measured_at is not None
                and self.first_predicted_at < self.first_measured_at)


AFTER_MEASUREMENT = "after a measurement of this exercise (the grade report flags it)"
RE_RECORDED = "re-recorded"
CHANGED = "changed from"
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
    say so: "recorded" the first time, "recorded after a measurement ..." when the kernel had
    measured first (the grade report flags it), "re-recorded" when the cell runs again (Run All
    twice), with "changed from X" when the value differs from the prediction the first
    measurement was made against. A stub (``...``) records nothing and says that; anything but
    one finite number is an error."""
    value = _number(name, "prediction", value)
    if value is None:
        return
    record = _RECORDS.setdefault(name, Record(name))
    again = record.first_predicted_at is not None
    record.prediction, record.predicted_at = value, next(_ORDER)
    if not again:
        record.first_predicted_at = record.predicted_at
    late = record.first_measured_at is not None and record.first_measured_at < record.first_predicted_at
    text = f"{name}: prediction {value:.4g} " + (RE_RECORDED if again else "recorded")
    if late:
        text += (f" {AFTER_MEASUREMENT}" if not again
                 else f"; the first prediction was recorded {AFTER_MEASUREMENT}")
    elif record.measured_against is not None and value != record.measured_against:
        text += f" ({CHANGED} {record.measured_against:.4g} after a measurement of this exercise)"
    print(text)


def measure(name: str, value) -> None:
    """Record the measurement (one number) of exercise ``name``'s experiment and print it next
    to the prediction; like `predict`."""
    value = _number(name, "measurement", value)
    if value is not None:
        record = _RECORDS.setdefault(name, Record(name))
        record.measurement, record.measured_at = value, next(_ORDER)
        if record.first_measured_at is None:
            record.first_measured_at, record.measured_against = record.measured_at, record.prediction
        prediction = "no prediction recorded" if record.prediction is None else f"predicted {record.prediction:.4g}"
        print(f"{name}: {prediction}, measured {value:.4g}")


def record(name: str) -> Record:
    """What has been recorded for exercise ``name`` (an empty `Record` if nothing)."""
    return _RECORDS.get(name, Record(name))


def public_checks(notebook: str) -> dict[str, str]:
    """``{question: otter test source}``: the public checks (type and shape only) of student
    notebook ``notebook`` (a file name or its stem, e.g. ``"01_grpo_basics.ipynb"``), as shipped in
    ``oar_lite/course/data/checks``. Raises FileNotFoundError for a notebook without checks."""
    stem = os.path.basename(notebook).removesuffix(".ipynb")
    path = resources.files("oar_lite.course").joinpath("data", "checks", f"{stem}.json")
    if not path.is_file():
        raise FileNotFoundError(f"no public checks for {notebook!r} in oar_lite/course/data/checks: is it a graded "
                                "notebook of the course, and is the package the one this notebook came with?")
    return json.loads(path.read_text())


def checks(notebook: str, folder: str = "exercise_checks"):
    """The grader of a student notebook: its public checks (`public_checks`) written to ``folder``
    (next to the notebook) and otter's ``Notebook`` reading them, so that ``grader.check("<name>")``
    runs them in JupyterLab, on Colab or wherever the file was downloaded. Needs otter-grader."""
    import otter

    os.makedirs(folder, exist_ok=True)
    for name, test in public_checks(notebook).items():
        with open(os.path.join(folder, f"{name}.py"), "w") as file:
            file.write(test)
    return otter.Notebook(os.path.basename(notebook), tests_dir=folder)
