"""`oar_lite.lab.scorers`: the one list of the methods the lab adds, registered on import."""
import oar_lite as ol
from oar_lite.attribution import GIVES_WEIGHTS, LIBRARY_METHODS
from oar_lite.course.oracle import ORACLES
from oar_lite.lab import baselines, scorers


def test_every_lab_method_is_registered_and_listed_once():
    assert set(scorers.LAB_METHODS) <= set(ol.SCORERS) and len(set(scorers.LAB_METHODS)) == len(scorers.LAB_METHODS)
    assert not set(scorers.LAB_METHODS) & set(LIBRARY_METHODS)
    assert {*ORACLES, *baselines.BASELINES, "entropy-top", "inverted:oracle", "shuffled:oracle-relevant",
            "inverted:oar-p", "shuffled:oar-g"} <= set(scorers.LAB_METHODS)
    assert set(ol.SCORERS) == {*LIBRARY_METHODS, *scorers.LAB_METHODS}  # conftest imports nothing else that registers


def test_entropy_top_gives_weights_and_its_controls_do_too():
    assert {"entropy-top", "inverted:entropy-top", "shuffled:entropy-top"} <= GIVES_WEIGHTS
    assert not {"entropy", "inverted:oracle", "oar-g"} & GIVES_WEIGHTS
    assert ol.SCORERS["entropy-top"] is baselines.entropy_top_weights
