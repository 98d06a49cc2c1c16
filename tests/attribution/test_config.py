"""`oar_lite.attribution.config`: `CreditConfig` checked once, each setting routed by name."""
import dataclasses
import math

import pytest
import torch

import oar_lite as ol
from oar_lite.attribution import CREDIT_RANGES, CreditConfig


@pytest.mark.parametrize("field, value", [("quantile", 1.5), ("quantile", math.nan), ("boost", -1.0),
                                          ("boost", math.inf), ("floor", 2.0), ("noise_std", -1e-3),
                                          ("batch_size", 0), ("batch_size", 2.5), ("token_budget", 0)])
def test_credit_config_refuses_out_of_range_values_naming_the_field(field, value):
    with pytest.raises(ValueError, match=rf"^CreditConfig\.{field}=.* is out of range: expected "):
        CreditConfig(**{field: value})


def test_credit_config_refuses_unknown_methods_listing_the_valid_ones():
    with pytest.raises(ValueError, match=r"unknown method 'shuffled:oar-x'; registered: \[.*'oar-g'.*'oracle'"):
        CreditConfig(method="shuffled:oar-x")
    with pytest.raises(ValueError, match="preserve_mass"):
        CreditConfig(preserve_mass="yes")
    assert CreditConfig(method="inverted:oar-p:answer_joint").method == "inverted:oar-p:answer_joint"
    assert set(CREDIT_RANGES) <= {f.name for f in dataclasses.fields(CreditConfig)}


def test_credit_config_routes_each_setting_by_name():
    credit = CreditConfig(method="oar-p", quantile=0.5, boost=9, batch_size=4)
    assert credit.scorer_options() == {"batch_size": 4, "token_budget": None}  # OAR-P's, not OAR-G's noise_std
    assert CreditConfig(method="oar-g", noise_std=0.0).scorer_options() == {"noise_std": 0.0}
    scores = torch.tensor([0.0, 1.0, 2.0, 4.0])
    assert torch.equal(credit.reshape(scores), ol.bilevel_weights(scores, quantile=0.5, boost=9))


@pytest.mark.parametrize("kwargs, says", [
    (dict(method="oar-p", noise_std=0.5), r"got noise_std=0\.5, which 'oar-p' does not take; it takes \['batch_size'"),
    (dict(method="oar-g", batch_size=4), r"got batch_size=4, which 'oar-g' does not take; it takes \['boost'.*'noise_std'"),
    (dict(method="oar-g:answer_mean", token_budget=4096), r"token_budget=4096, which 'oar-g:answer_mean' does not take"),
    (dict(method="entropy", noise_std=0.5), r"noise_std=0\.5, which 'entropy' does not take"),
    (dict(method="uniform", boost=9.0), r"boost=9\.0, which 'uniform' does not take; it takes no settings"),
    (dict(method="uniform", quantile=0.5, preserve_mass=False), r"quantile=0\.5, preserve_mass=False.*drop quantile, "
                                                                r"preserve_mass \(it would have no effect\)"),
    (dict(method=None), r"CreditConfig\.method=None: expected a method name"),
    (dict(boost=None), r"CreditConfig\.boost=None is out of range: expected a finite number >= 0$"),
])
def test_credit_config_refuses_a_setting_its_method_does_not_take(kwargs, says):
    with pytest.raises(ValueError, match=says):
        CreditConfig(**kwargs)


def test_each_method_takes_its_own_settings():
    assert ol.attribution.credit_settings("uniform") == set()  # plain GRPO gives its weights: no reshaping
    assert ol.attribution.credit_settings("inverted:oar-p:last") == {"quantile", "boost", "floor", "preserve_mass",
                                                                     "batch_size", "token_budget"}
    assert ol.attribution.credit_settings("entropy-top") == {"quantile"}  # a scorer that gives weights: its own
    assert CreditConfig(method="uniform", batch_size=64, noise_std=1e-3).method == "uniform"  # the defaults: fine


def test_scorer_context_is_what_every_scorer_may_read():
    assert ol.attribution.CONTEXT_FIELDS == ("pad_token_id", "generator", "tokenizer", "sampled_cache", "stats")
    declared = {name: set(ol.attribution.declared_options(name)) for name in ol.SCORERS}
    assert "pad_token_id" in declared["oar-p"] and "generator" in declared["oar-g"] and "tokenizer" in declared["oracle"]
    assert declared["oar-p"] - set(ol.attribution.CONTEXT_FIELDS) == {"batch_size", "token_budget", "max_waste",
                                                                       "reuse_prefix"}
    assert ol.attribution.takes("oar-g") >= {"noise_std", "sampled_cache", "reuse_prefix"}  # the batched form's too
