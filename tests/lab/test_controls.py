"""`oar_lite.lab.controls`: inverted and shuffled credit, on any method."""
import pytest
import torch
from conftest import toy_scores

import oar_lite as ol
from oar_lite.course import toy
from oar_lite.lab import controls


def test_controls_are_registered_as_methods_of_their_own():
    assert ol.method_of("inverted:oar-p:answer_mean") == ol.attribution.Method("inverted:oar-p", "answer_mean")
    assert ol.method_of("shuffled:oracle").name == "shuffled:oracle"
    for bad, match in (("inverted", "unknown method"), ("inverted:nope", "unknown method"),
                       ("shuffled:oracle:last", "no P_final mode"), ("inverted:uniform", "unknown method"),
                       ("shuffled:inverted:oracle", "unknown method")):  # no control of plain GRPO, no nesting
        with pytest.raises(ValueError, match=match):
            ol.method_of(bad)
    from oar_lite.attribution import CreditConfig
    from oar_lite.train import TrainConfig
    assert TrainConfig(credit=CreditConfig("inverted:oar-p:answer_mean")).credit.method == "inverted:oar-p:answer_mean"
    with pytest.raises(ValueError, match="unknown method"):
        TrainConfig(credit=CreditConfig("shuffled:oar-x"))
    # a control takes what its method takes: OAR-P's batch size, the reshaping; its weights flag too
    assert ol.attribution.credit_settings("inverted:oar-p") == ol.attribution.credit_settings("oar-p")
    assert ol.attribution.credit_settings("inverted:entropy-top") == {"quantile"}


def test_a_control_of_a_users_method_is_one_call(scorer_registry):
    def ramp(model, input_ids, reasoning, answer, *, noise_std=1.0):
        return torch.arange(reasoning.stop - reasoning.start, dtype=torch.float32) * noise_std

    ol.register_scorer("ramp", ramp)
    ol.register_scorer("inverted:ramp", **controls.controlled("inverted", "ramp"))
    ids = torch.arange(10)
    scores = ol.token_scores("inverted:ramp", None, ids, slice(2, 7), slice(8, 10), noise_std=2.0)
    assert scores.tolist() == controls.inverted(torch.arange(5.0) * 2).tolist()


def test_inverted_reverses_the_ranking(tok):
    ex = toy.example(tok, "473+258:", "3+8+0=11 hmm 7+5+1=14 4+2+1=07 A=741")
    base = torch.tensor([0.0, 0.5, 2.0, 0.1, 7.0])
    inv = controls.inverted(base)
    assert torch.equal(torch.argsort(inv, stable=True), torch.argsort(-base, stable=True))
    n = lambda s: (torch.log1p(s) - torch.log1p(s).min()) / (torch.log1p(s).max() - torch.log1p(s).min())
    assert torch.allclose(n(inv), 1 - n(base), atol=1e-6)
    s, i = toy_scores("oracle", ex), toy_scores("inverted:oracle", ex)
    assert torch.equal(i, 1 - s)
    # any scorer: ranks of OAR-P reversed on a model's scores
    model = toy.load_model()[0]
    p = ol.token_scores("oar-p:answer_mean", model, ex["input_ids"], ex["reasoning"], ex["answer"], pad_token_id=0)
    q = ol.token_scores("inverted:oar-p:answer_mean", model, ex["input_ids"], ex["reasoning"], ex["answer"], pad_token_id=0)
    assert int(q.argmax()) == int(p.argmin()) and int(q.argmin()) == int(p.argmax())


def test_shuffled_is_a_seeded_permutation(tok):
    ex = toy.example(tok, "473+258:", "3+8+0=12 7+5+1=13 4+2+1=08 A=832")
    s, sh = toy_scores("oracle", ex), toy_scores("shuffled:oracle", ex)
    assert torch.equal(torch.sort(s).values, torch.sort(sh).values) and not torch.equal(s, sh)
    assert torch.equal(sh, toy_scores("shuffled:oracle", ex))  # seeded by the row
    g1, g2 = torch.Generator().manual_seed(1), torch.Generator().manual_seed(1)
    assert torch.equal(toy_scores("shuffled:oracle", ex, generator=g1), toy_scores("shuffled:oracle", ex, generator=g2))


@pytest.mark.parametrize("control", ["inverted", "shuffled"])
def test_controls_act_on_batched_oar_g(tok, control):
    """token_weights scores OAR-G for all rows in one pass; a control in front of it must still act."""
    model, _ = toy.load_model()
    ex = toy.example(tok, "473+258:", "3+8+0=11 hmm 7+5+1=14 4+2+1=07 A=741")
    ids = ex["input_ids"][None]
    attn = torch.ones_like(ids)
    rm, am = torch.zeros_like(ids, dtype=torch.bool), torch.zeros_like(ids, dtype=torch.bool)
    rm[0, ex["reasoning"]] = True
    am[0, ex["answer"]] = True
    run = lambda m: ol.token_weights(model, ids, attn, rm, am, method=m, return_scores=True,
                                     generator=torch.Generator().manual_seed(0))[1][0]
    base, controlled = run("oar-g"), run(f"{control}:oar-g")
    if control == "inverted":
        assert torch.allclose(controlled, controls.inverted(base), atol=1e-6)
    else:
        assert torch.equal(torch.sort(controlled).values, torch.sort(base).values) and not torch.equal(controlled, base)
