"""`oar_lite.attribution.controls`: control prefixes parsed by the library, applied as registered
(the lab's ``inverted`` and ``shuffled`` are tested in tests/lab/test_controls.py)."""
import pytest
import torch

import oar_lite as ol
from oar_lite.attribution import controls


@pytest.fixture
def negated(monkeypatch):
    """A control registered for one test: the scores' negation plus their maximum (a reversal)."""
    monkeypatch.setitem(controls.CONTROLS, "negated", lambda s, ids, generator: s.max() - s)


def test_a_registered_control_parses_as_a_prefix_and_nests(negated):
    assert controls.split_controls("negated:oar-p:last") == (("negated",), "oar-p:last")
    assert controls.split_controls("negated:negated:oar-g") == (("negated", "negated"), "oar-g")
    assert ol.parse_method("negated:oar-p:answer_mean") == ("oar-p", "answer_mean")
    with pytest.raises(ValueError, match="is a control"):
        ol.parse_method("negated")
    with pytest.raises(ValueError, match="control prefix"):
        ol.register_scorer("negated", lambda *a: None)


def test_an_unregistered_prefix_is_an_unknown_method():
    assert "negated" not in controls.CONTROLS
    assert controls.split_controls("negated:oar-p") == ((), "negated:oar-p")
    with pytest.raises(ValueError, match="unknown method 'negated'"):
        ol.parse_method("negated:oar-p")
    with pytest.raises(ValueError, match="must be a str"):
        controls.split_controls(3)


def test_controls_apply_innermost_first(negated, monkeypatch):
    monkeypatch.setitem(controls.CONTROLS, "shifted", lambda s, ids, generator: s + 1)
    s, ids = torch.tensor([0.0, 1.0, 3.0]), torch.arange(3)
    assert controls.apply_controls(("negated", "shifted"), s, ids).tolist() == [3.0, 2.0, 0.0]  # (4) - (s + 1)
    assert controls.apply_controls(("shifted", "negated"), s, ids).tolist() == [4.0, 3.0, 1.0]  # (3 - s) + 1
    assert controls.apply_controls((), s, ids) is s
