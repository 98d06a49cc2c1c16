"""`oar_lite.attribution.registry`: scorers by name, the options each declares, the P_final
mode a method runs in."""
import pytest
import torch

import oar_lite.lab  # noqa: F401  (registers the lab's baselines and controls, used here as examples)
from oar_lite.attribution import registry
from oar_lite.attribution.registry import (BATCHED, SCORERS, declared_options, default_mode, mode_of, parse_method,
                                           register_scorer)


def _ramp(model, input_ids, reasoning, answer, *, mode="last", noise_std=None):
    return torch.arange(reasoning.stop - reasoning.start, dtype=torch.float32)


def _ramp_batch(model, input_ids, attention_mask, reasoning, answer, *, mode="last", batch_size=None):
    return [torch.arange(r.stop - r.start, dtype=torch.float32) for r in reasoning]


@pytest.fixture
def ramp():
    """The scorer ``ramp`` registered with a batched form, removed again after the test."""
    register_scorer("ramp", _ramp, batched=_ramp_batch)
    yield "ramp"
    SCORERS.pop("ramp", None)
    BATCHED.pop("ramp", None)


def test_the_core_scorers_are_registered_with_their_batched_forms():
    assert {"uniform", "random", "entropy", "oar-p", "oar-g", "captum-ig"} <= set(SCORERS)
    assert set(BATCHED) >= {"oar-p", "oar-g"} and "entropy" not in BATCHED


def test_a_scorer_declares_its_options_by_keyword_only_parameters(ramp):
    assert declared_options(ramp) == ("noise_std",)  # the mode is not an option
    assert declared_options(ramp, batched=True) == ("batch_size",)
    assert default_mode(ramp) == "last" and default_mode("uniform") is None
    assert mode_of("ramp") == "last" and mode_of("inverted:ramp:answer_mean") == "answer_mean"
    assert mode_of("entropy") is None


def test_registering_again_without_a_batched_form_drops_the_old_one(ramp):
    register_scorer(ramp, _ramp)
    assert SCORERS[ramp] is _ramp and ramp not in BATCHED  # a stale batched form would score the new scorer's rows


@pytest.mark.parametrize("name, match", [("a:b", "cannot contain ':'"), ("inverted", "control prefix"),
                                         ("shuffled", "control prefix")])
def test_register_scorer_refuses_names_the_method_syntax_reserves(name, match):
    with pytest.raises(ValueError, match=match):
        register_scorer(name, _ramp)
    assert name not in SCORERS


@pytest.mark.parametrize("method, match", [("oar-x", r"unknown method 'oar-x'; expected one of \[.*'oar-g'"),
                                           ("entropy:last", "takes no P_final mode"),
                                           ("oar-p:middle", "middle")])
def test_parse_method_says_what_was_wrong_and_what_is_expected(method, match):
    with pytest.raises(ValueError, match=match):
        parse_method(method)


def test_parse_method_splits_name_and_mode():
    assert parse_method("oar-p:answer_joint") == ("oar-p", "answer_joint")
    assert parse_method("oar-g") == ("oar-g", None)
    assert registry.parse_method("shuffled:oar-p") == ("oar-p", None)


def test_a_method_is_parsed_once_into_a_typed_value(ramp):
    from oar_lite.attribution import CreditConfig
    from oar_lite.attribution.registry import Method, method_of

    m = method_of("inverted:oar-p:last")
    assert m == Method(("inverted",), "oar-p", "last") and str(m) == "inverted:oar-p:last"
    assert method_of("inverted:oar-p:last") is m and method_of(m) is m  # kept, and passed on as it is
    assert method_of("oar-g").run_mode == default_mode("oar-g") and method_of("oar-g").mode is None
    credit = CreditConfig(method="shuffled:oar-g:answer_joint")
    assert credit.parsed == Method(("shuffled",), "oar-g", "answer_joint") and credit.parsed is credit.parsed
    assert parse_method(credit.parsed) == ("oar-g", "answer_joint") and mode_of(credit.parsed) == "answer_joint"
    with pytest.raises(ValueError, match="must be a str"):
        method_of(["oar-g"])
    assert method_of("ramp:answer_mean").name == "ramp"
    SCORERS.pop("ramp")  # unregistered after it was parsed: the kept value does not outlive it
    with pytest.raises(ValueError, match="unknown method 'ramp'"):
        method_of("ramp:answer_mean")
