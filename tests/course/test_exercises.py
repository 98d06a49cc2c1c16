"""oar_lite.course.exercises: forbid() makes a package function raise, whatever name calls it, and
restores it; predict/measure record values in order."""
import functools

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
    assert rec.predicted_first and rec.prediction == 0.3 and rec.measurement == 0.25
    with pytest.raises(TypeError, match="one number"):
        exercises.predict(name, [1, 2])
    with pytest.raises(TypeError, match="one number"):
        exercises.predict(name, True)
    with pytest.raises(ValueError, match="finite"):
        exercises.measure(name, float("nan"))
