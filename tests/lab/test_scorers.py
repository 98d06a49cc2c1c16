"""`oar_lite.lab.scorers`: the one list of the methods the lab adds, registered on import."""
import oar_lite as ol
from oar_lite.attribution import LIBRARY_METHODS, WEIGHTINGS
from oar_lite.course.oracle import ORACLES
from oar_lite.lab import baselines, grail, scorers


def test_every_lab_method_is_registered_and_listed_once():
    assert set(scorers.LAB_METHODS) <= set(ol.SCORERS) and len(set(scorers.LAB_METHODS)) == len(scorers.LAB_METHODS)
    assert not set(scorers.LAB_METHODS) & set(LIBRARY_METHODS)
    assert {*ORACLES, *baselines.BASELINES, "entropy-top", "inverted:oracle", "shuffled:oracle-relevant",
            "inverted:oar-p", "shuffled:oar-g"} <= set(scorers.LAB_METHODS)
    assert set(ol.SCORERS) == {*LIBRARY_METHODS, *scorers.LAB_METHODS}  # conftest imports nothing else that registers


def test_entropy_top_gives_weights_and_its_controls_do_too():
    """entropy-top and grail: their scores, then their own weighting, their controls' too (a
    control acts on the scores, before the weighting)."""
    assert WEIGHTINGS["entropy-top"] is WEIGHTINGS["inverted:entropy-top"] is baselines.top_quantile_weights
    assert WEIGHTINGS["grail"] is WEIGHTINGS["shuffled:grail"] is grail.saliency_weights
    assert not {"entropy", "inverted:oracle", "oar-g"} & set(WEIGHTINGS)
    assert ol.SCORERS["entropy-top"] is ol.SCORERS["entropy"] is baselines.entropy_scores
    assert ol.SCORERS["grail"] is grail.saliency_scores and "grail" in scorers.LAB_METHODS
