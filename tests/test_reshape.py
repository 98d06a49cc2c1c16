"""Bi-level reshaping: the spec's properties (hypothesis) and a naive reference."""
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from oar_lite import bilevel_weights
from oar_lite.reshape import normalised

scores_st = st.lists(st.floats(min_value=0, max_value=1e4, allow_nan=False, width=32), min_size=1, max_size=64)
params_st = dict(
    quantile=st.floats(0, 1),
    boost=st.floats(0, 5),
    floor=st.floats(0, 1),
)


def naive_weights(scores, quantile=0.25, boost=1.0, floor=0.1, preserve_mass=True):
    """The spec's section 6, one float at a time."""
    s = [math.log1p(x) for x in scores]
    lo, hi = min(s), max(s)
    span = (hi - lo) or 1.0
    n = [(x - lo) / span for x in s]
    tau = float(np.quantile(np.array(n), quantile))  # numpy's default is linear interpolation
    w = [max(x / (tau + 1e-8), floor) if x < tau else 1 + boost * (x - tau) / (1 - tau + 1e-8) for x in n]
    if preserve_mass:
        total = sum(w)
        w = [x * len(w) / (total + 1e-8) for x in w]
    return w


@settings(max_examples=200, deadline=None)
@given(scores=scores_st, **params_st, preserve_mass=st.booleans())
def test_matches_naive_reference(scores, quantile, boost, floor, preserve_mass):
    got = bilevel_weights(torch.tensor(scores, dtype=torch.float64), quantile=quantile, boost=boost,
                          floor=floor, preserve_mass=preserve_mass)
    want = naive_weights(scores, quantile, boost, floor, preserve_mass)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-6, atol=1e-6)


@given(value=st.floats(0, 1e6), size=st.integers(1, 50), **params_st)
def test_equal_scores_give_plain_grpo(value, size, quantile, boost, floor):
    w = bilevel_weights(torch.full((size,), value), quantile=quantile, boost=boost, floor=floor)
    torch.testing.assert_close(w, torch.ones(size))


@given(scores=scores_st)
def test_no_boost_no_quantile_is_plain_grpo(scores):
    for preserve in (True, False):
        w = bilevel_weights(torch.tensor(scores), quantile=0.0, boost=0.0, preserve_mass=preserve)
        torch.testing.assert_close(w, torch.ones(len(scores)))


@given(scores=scores_st, **params_st)
def test_bounds_before_mass_preservation(scores, quantile, boost, floor):
    w = bilevel_weights(torch.tensor(scores), quantile=quantile, boost=boost, floor=floor, preserve_mass=False)
    assert (w >= floor - 1e-6).all() and (w <= 1 + boost + 1e-5).all()


@given(scores=scores_st, **params_st, preserve_mass=st.booleans())
def test_monotone_in_score(scores, quantile, boost, floor, preserve_mass):
    ordered = torch.tensor(sorted(scores), dtype=torch.float64)
    w = bilevel_weights(ordered, quantile=quantile, boost=boost, floor=floor, preserve_mass=preserve_mass)
    assert (w.diff() >= -1e-9).all()


@given(scores=scores_st, **params_st)
def test_mass_preserved(scores, quantile, boost, floor):
    w = bilevel_weights(torch.tensor(scores), quantile=quantile, boost=boost, floor=floor)
    assert float(w.sum()) == pytest.approx(len(scores), rel=1e-4)


def test_suppress_and_boost_on_a_spread():
    w = bilevel_weights(torch.tensor([0.0, 0.5, 1.0, 2.0, 5.0, 10.0]), preserve_mass=False)
    assert w[0] == pytest.approx(0.1)  # the lowest score lands on the floor
    assert w[-1] == pytest.approx(2.0)  # 1 + boost at the top
    # tau interpolates between the 2nd and 3rd normalised scores (q=0.25 of 6): the 2nd is suppressed
    assert 0.1 < w[1] < 1 and (w[2:] >= 1).all()
    # a tie at the bottom pulls tau down to 0: nothing is suppressed
    assert (bilevel_weights(torch.tensor([0.0, 0.0, 0.0, 0.1, 1.0, 10.0]), preserve_mass=False) >= 1).all()


@pytest.mark.parametrize("bad,match", [
    ([0.1, float("nan")], "NaN or infinite"),
    ([0.1, float("inf")], "NaN or infinite"),
    ([0.1, -0.5], ">= 0"),
    ([[0.1, 0.2]], "1-D"),
])
def test_bad_scores_raise(bad, match):
    with pytest.raises(ValueError, match=match):
        bilevel_weights(torch.tensor(bad))


@pytest.mark.parametrize("kwargs", [dict(quantile=1.5), dict(boost=-1.0), dict(floor=2.0)])
def test_bad_parameters_raise(kwargs):
    with pytest.raises(ValueError):
        bilevel_weights(torch.tensor([0.1, 0.2]), **kwargs)


def test_empty_scores_give_empty_weights():
    assert bilevel_weights(torch.tensor([])).numel() == 0


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_scores(dtype):
    scores = torch.tensor([0.0, 1.0, 3.0, 0.5, 2.0, 7.0])
    reference = bilevel_weights(scores)
    w = bilevel_weights(scores.to(dtype))
    assert w.dtype == dtype
    torch.testing.assert_close(w.float(), reference, rtol=2e-2, atol=2e-2)


def test_normalised_is_the_spec_n_and_tau_and_refuses_what_it_cannot_normalise():
    n, tau = normalised(torch.tensor([0.0, math.e - 1, math.e ** 2 - 1]), 0.5)  # log1p: 0, 1, 2
    torch.testing.assert_close(n, torch.tensor([0.0, 0.5, 1.0]))
    assert float(tau) == pytest.approx(0.5)
    with pytest.raises(ValueError, match=r"non-empty \[R\] tensor, got shape \(0,\)"):
        normalised(torch.tensor([]), 0.25)
    with pytest.raises(ValueError, match=r"non-empty \[R\] tensor, got shape \(2, 2\)"):
        normalised(torch.ones(2, 2), 0.25)
    with pytest.raises(ValueError, match="quantile"):
        normalised(torch.ones(3), 1.5)
