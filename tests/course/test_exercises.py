"""oar_lite.course.exercises: forbid() makes a package function raise, whatever name calls it, and
restores it, and catches a copy made before; predict/measure record values in order, the kernel's
first prediction and measurement deciding it."""
import functools
import sys
import types

import nbformat
import pytest
import torch

import oar_lite as ol
from oar_lite.course import exercises
from oar_lite.grpo import group_advantages


def test_forbid_blocks_every_name_and_inner_callers_then_restores():
    r = torch.tensor([1.0, 0, 0, 0])
    expected = ol.group_advantages(r, 4)
    with exercises.forbid(ol.group_advantages):
        for call in (lambda: ol.group_advantages(r, 4), lambda: group_advantages(r, 4),
                     lambda: ol.grpo.group_advantages(r, 4)):
            with pytest.raises(RuntimeError, match="group_advantages was called"):
                call()
        assert torch.equal(r * 2, r + r)                     # other code is untouched
    torch.testing.assert_close(ol.group_advantages(r, 4), expected)


def test_forbid_restores_after_an_error_and_handles_closures():
    def make(k):
        def add(x):
            return x + k
        return add

    add = make(3)
    wrapped = functools.wraps(add)(lambda x: add(x))
    with pytest.raises(ZeroDivisionError):
        with exercises.forbid(add):
            with pytest.raises(RuntimeError, match="was called"):
                wrapped(1)                                    # reached through another function
            1 / 0
    assert add(1) == 4 and wrapped(1) == 4
    with pytest.raises(TypeError, match="plain Python functions"):
        with exercises.forbid(len):
            pass


def test_a_copy_made_before_the_block_is_caught_too():
    """types.FunctionType(f.__code__, ...) keeps the original code: the profile hook catches it,
    and a submission that catches the error still fails when the block ends."""
    r = torch.tensor([1.0, 0, 0, 0])
    f = ol.group_advantages
    copy = types.FunctionType(f.__code__, f.__globals__, "copy", f.__defaults__, f.__closure__)
    copy.__kwdefaults__ = f.__kwdefaults__
    torch.testing.assert_close(copy(r, 4), f(r, 4))
    with pytest.raises(RuntimeError, match="group_advantages was called through a copy"):
        with exercises.forbid(f):
            copy(r, 4)
    with pytest.raises(RuntimeError, match="its error was caught"):
        with exercises.forbid(f):
            with pytest.raises(RuntimeError):
                copy(r, 4)
            copy(r, 4)                                        # the hook is gone after its error; the exit is not
    with pytest.raises(RuntimeError, match="switched off"):
        with exercises.forbid(f):
            sys.setprofile(None)
    assert sys.getprofile() is None
    torch.testing.assert_close(copy(r, 4), f(r, 4))             # both work again after the block


def test_predict_then_measure_records_the_order(capsys):
    name = "test_ex_order"
    assert not exercises.record(name).predicted_first
    exercises.predict(name, ...)                             # a stub records nothing
    assert exercises.record(name).prediction is None
    exercises.measure(name, 0.5)
    assert not exercises.record(name).predicted_first        # measured, never predicted
    capsys.readouterr()
    exercises.predict(name, 0.3)
    assert not exercises.record(name).predicted_first        # predicted after the measurement
    assert exercises.AFTER_MEASUREMENT in capsys.readouterr().out   # the handed-in file says so
    exercises.measure(name, torch.tensor(0.25))
    rec = exercises.record(name)
    assert not rec.predicted_first and rec.prediction == 0.3 and rec.measurement == 0.25   # the first ones decide
    exercises.predict(name, 0.3)                             # run again: still flagged in its output
    out = capsys.readouterr().out
    assert exercises.RE_RECORDED in out and exercises.AFTER_MEASUREMENT in out
    with pytest.raises(TypeError, match="one number"):
        exercises.predict(name, [1, 2])
    with pytest.raises(TypeError, match="one number"):
        exercises.predict(name, True)
    with pytest.raises(ValueError, match="finite"):
        exercises.measure(name, float("nan"))


def test_run_all_twice_is_not_measured_first(capsys):
    """Run All twice in one kernel: the second prediction runs after the first measurement, but
    the kernel's first prediction came first; it reads "re-recorded", and "changed from" only
    when its value is not the one the first measurement was made against."""
    name = "test_ex_twice"
    for _ in range(2):
        exercises.predict(name, 0.3)
        exercises.measure(name, 0.5)
    out = capsys.readouterr().out
    assert exercises.record(name).predicted_first
    assert out.count("prediction 0.3 recorded") == 1 and f"prediction 0.3 {exercises.RE_RECORDED}" in out
    assert exercises.AFTER_MEASUREMENT not in out and exercises.CHANGED not in out
    exercises.predict(name, 0.5)                             # edited to the measurement, then run again
    out = capsys.readouterr().out
    assert f"{exercises.CHANGED} 0.3" in out and exercises.AFTER_MEASUREMENT not in out
    assert exercises.record(name).predicted_first


def test_the_public_checks_ship_with_the_package(tmp_path, monkeypatch):
    """`make student` writes them (tests/test_course.py checks they are current); the student
    notebook's grader cell writes them next to the notebook and reads them with otter."""
    checks = exercises.public_checks("01_grpo_basics.ipynb")
    assert set(checks) == {"ex01_dr_grpo", "ex01_averaging", "ex01_zero_spread"} == set(exercises.public_checks("01_grpo_basics"))
    assert all("OK_FORMAT" in test and "'hidden': False" in test and "'hidden': True" not in test for test in checks.values())
    with pytest.raises(FileNotFoundError, match="no public checks"):
        exercises.public_checks("99_nothing.ipynb")
    monkeypatch.chdir(tmp_path)
    nbformat.write(nbformat.v4.new_notebook(), tmp_path / "01_grpo_basics.ipynb")     # the notebook, next to its checks
    grader = exercises.checks("01_grpo_basics.ipynb")
    assert sorted(p.name for p in (tmp_path / "exercise_checks").iterdir()) == sorted(f"{n}.py" for n in checks)
    assert type(grader).__name__ == "Notebook"
