"""How far from uniform the reshaped weights are (`oar_lite.lab.uniformity`): against the
weights they describe, a naive reference for tau, and the train hook's record."""
import math

import numpy as np
import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

from oar_lite import CreditConfig, bilevel_weights
from oar_lite.lab.uniformity import step_metrics, summarize_uniformity, weight_uniformity

scores_st = st.lists(st.floats(min_value=0, max_value=1e4, allow_nan=False, width=32), min_size=1, max_size=64)


@settings(max_examples=100, deadline=None)
@given(scores=scores_st, quantile=st.floats(0, 1), boost=st.floats(0, 5), floor=st.floats(0, 1))
@example(scores=[0.0, 1.0, 1.401298464324817e-45], quantile=1.0, boost=0.0, floor=0.0)  # a tiny score is not clamped
def test_uniformity_matches_the_weights_it_describes(scores, quantile, boost, floor):
    s = torch.tensor(scores, dtype=torch.float64)
    w = bilevel_weights(s, quantile=quantile, boost=boost, floor=floor)
    raw = bilevel_weights(s, quantile=quantile, boost=boost, floor=floor, preserve_mass=False)
    (row,) = weight_uniformity([s], [w], quantile=quantile, floor=floor)
    n = len(scores)
    assert row["tokens"] == n
    total, squares = float(w.sum()), float((w * w).sum())
    assert row["effective_share"] == pytest.approx(total * total / (n * squares), rel=1e-9)
    assert 1 / n - 1e-9 <= row["effective_share"] <= 1 + 1e-9
    assert row["weight_std"] == pytest.approx(float(w.std(unbiased=False)), abs=1e-9)
    assert row["tau"] == pytest.approx(float(np.quantile(naive_n(scores), quantile)), abs=1e-9)
    if floor < 1:  # a clamped token's raw weight is the floor, and only a clamped one's (n < tau)
        at_floor = sum(1 for x, r in zip(naive_n(scores), raw.tolist()) if x < row["tau"] and r <= floor)
        assert row["at_floor"] == pytest.approx(at_floor / n)


def naive_n(scores):
    s = [math.log1p(x) for x in scores]
    span = (max(s) - min(s)) or 1.0
    return [(x - min(s)) / span for x in s]


def test_uniformity_of_plain_and_of_one_hot_credit():
    (flat,) = weight_uniformity([torch.ones(6)], [torch.ones(6)])
    assert flat["effective_share"] == 1.0 and flat["at_floor"] == 0 and flat["weight_std"] == 0
    # A quarter or more of the tokens at the lowest score: tau = 0, nothing suppressed, the
    # filler keeps weight 1 before mass preservation (notebook 04's "tau = 0.00" case).
    s = torch.tensor([0.0, 0.0, 0.0, 0.0, 5.0])
    (row,) = weight_uniformity([s], [bilevel_weights(s)])
    assert row["tau"] == 0 and row["at_floor"] == 0 and row["suppressed"] == pytest.approx(0.8)
    # Distinct scores: the lowest is clamped to the floor.
    s = torch.tensor([0.0, 1.0, 2.0, 3.0, 4.0, 50.0])
    (row,) = weight_uniformity([s], [bilevel_weights(s)])
    assert row["tau"] > 0 and row["at_floor"] == pytest.approx(1 / 6)


def test_uniformity_skips_rows_without_an_answer_and_checks_shapes():
    assert weight_uniformity([None, torch.ones(3)], [torch.ones(4), torch.ones(3)])[0]["tokens"] == 3
    with pytest.raises(ValueError, match="one each"):
        weight_uniformity([torch.ones(3)], [])
    with pytest.raises(ValueError, match="differ"):
        weight_uniformity([torch.ones(3)], [torch.ones(4)])


def test_summary_weighs_the_floor_by_tokens_and_the_rest_by_completion():
    rows = [{"tokens": 2, "tau": 0.0, "at_floor": 0.0, "effective_share": 1.0},
            {"tokens": 6, "tau": 0.123456, "at_floor": 0.5, "effective_share": 0.5}]
    assert summarize_uniformity(rows) == {"tau_mean": pytest.approx(0.061728), "tau_zero_share": 0.5,
                                          "at_floor": pytest.approx(3 / 8), "effective_share": 0.75,
                                          "taus": [0.0, 0.1235]}
    assert summarize_uniformity([]) == {"tau_mean": None, "tau_zero_share": None, "at_floor": None,
                                        "effective_share": None, "taus": []}


def test_step_metrics_summarise_the_scored_rows_reasoning_weights():
    """The train hook reads each row's weights on its reasoning mask, skips unscored rows and
    takes tau and the floor from the credit settings."""
    s = torch.tensor([0.0, 1.0, 2.0, 3.0, 4.0, 50.0])
    credit = CreditConfig("oar-g", quantile=0.5, floor=0.3)
    w = bilevel_weights(s, quantile=0.5, floor=0.3)
    weights = torch.ones(2, 8)
    weights[0, 1:7] = w
    mask = torch.zeros(2, 8, dtype=torch.bool)
    mask[0, 1:7] = True
    mask[1, 2:5] = True
    out = step_metrics([s, None], weights, mask, credit)
    (row,) = weight_uniformity([s], [w], quantile=0.5, floor=0.3)
    assert out == {"tau_mean": row["tau"], "tau_zero_share": 0.0, "weight_at_floor": row["at_floor"],
                   "taus": [round(row["tau"], 4)]}
    assert out["weight_at_floor"] > 0 and out["taus"] != [round(weight_uniformity([s], [w])[0]["tau"], 4)]
