"""`oar_lite.attribution.scoring` and `registry`: one calling convention by method name, the
batched entry point trainers call, and a scorer registered from outside."""
import pytest
import torch
from conftest import PAD, VOCAB

import oar_lite as ol
from oar_lite.course import toy
from oar_lite.attribution import CreditConfig
from oar_lite.train import TrainConfig


def test_token_scores_dispatch_and_mode_suffix(llama, sequence):
    ids, reasoning, answer = sequence
    via_name = ol.token_scores("oar-p:answer_joint", llama, ids, reasoning, answer, pad_token_id=PAD)
    with pytest.raises(TypeError, match=r"\['noise_std'\].*'oar-p:answer_joint' does not take.*batch_size"):
        ol.token_scores("oar-p:answer_joint", llama, ids, reasoning, answer, pad_token_id=PAD, noise_std=1e-3)
    direct = ol.perturbation_scores(llama, ids, reasoning, answer, mode="answer_joint", pad_token_id=PAD)
    torch.testing.assert_close(via_name, direct)
    assert torch.equal(ol.token_scores("uniform", llama, ids, reasoning, answer), torch.ones(17))


def _left_pad(rows, pad=PAD):
    T = max(len(r) for r in rows)
    ids = torch.full((len(rows), T), pad)
    mask = torch.zeros(len(rows), T, dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, T - len(r):] = r
        mask[i, T - len(r):] = 1
    return ids, mask


@pytest.mark.parametrize("method", ["oar-p", "oar-g", "oar-p:answer_mean", "entropy"])
def test_token_weights_left_padding_equals_row_alone(llama, method):
    g = torch.Generator().manual_seed(5)
    rows = [torch.randint(3, VOCAB, (n,), generator=g) for n in (30, 22, 26)]
    spans = [(slice(5, 22), slice(24, 27)), (slice(4, 16), slice(17, 19)), (slice(3, 20), slice(21, 24))]
    ids, mask = _left_pad(rows)
    T = ids.shape[1]
    reasoning_mask = torch.zeros_like(mask, dtype=torch.bool)
    answer_mask = torch.zeros_like(mask, dtype=torch.bool)
    for i, (r, (rs, ans)) in enumerate(zip(rows, spans)):
        off = T - len(r)
        reasoning_mask[i, rs.start + off : rs.stop + off] = True
        answer_mask[i, ans.start + off : ans.stop + off] = True
    opts = dict(pad_token_id=PAD, generator=None)
    torch.manual_seed(0)
    weights, scores = ol.token_weights(llama, ids, mask, reasoning_mask, answer_mask, method=method,
                                       return_scores=True, **opts)
    assert weights.shape == ids.shape
    assert torch.equal(weights[~reasoning_mask], torch.ones(int((~reasoning_mask).sum())))
    for i, (r, (rs, ans)) in enumerate(zip(rows, spans)):
        torch.manual_seed(0) if i == 0 else None
        alone = ol.token_scores(method, llama, r, rs, ans, **opts)
        if method.startswith("oar-g"):  # noise differs per call; compare with the same generator
            a = ol.token_scores(method, llama, r, rs, ans, generator=torch.Generator().manual_seed(9))
            b = ol.token_weights(llama, ids[i : i + 1], mask[i : i + 1], reasoning_mask[i : i + 1], answer_mask[i : i + 1],
                                 method=method, return_scores=True, generator=torch.Generator().manual_seed(9))[1][0]
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-12)
        else:
            torch.testing.assert_close(scores[i], alone, rtol=1e-6, atol=1e-9)
        expected_w = ol.bilevel_weights(scores[i])
        torch.testing.assert_close(weights[i][reasoning_mask[i]], expected_w)
        assert abs(float(weights[i][reasoning_mask[i]].sum()) - (rs.stop - rs.start)) < 1e-3


def test_token_weights_rows_without_answer_and_uniform(llama):
    ids = torch.randint(3, VOCAB, (2, 20), generator=torch.Generator().manual_seed(2))
    mask = torch.ones_like(ids)
    reasoning_mask = torch.zeros(2, 20, dtype=torch.bool)
    answer_mask = torch.zeros(2, 20, dtype=torch.bool)
    reasoning_mask[:, 3:15] = True
    answer_mask[0, 16:18] = True  # row 1 has no parseable answer
    w = ol.token_weights(llama, ids, mask, reasoning_mask, answer_mask, method="oar-p", pad_token_id=PAD)
    assert torch.equal(w[1], torch.ones(20))
    assert not torch.allclose(w[0], torch.ones(20))
    u = ol.token_weights(llama, ids, mask, reasoning_mask, answer_mask, method="uniform")
    assert torch.equal(u, torch.ones(2, 20))


def test_register_scorer_plugs_into_token_weights(llama, scorer_registry):
    def position_scores(model, input_ids, reasoning, answer):
        return torch.arange(reasoning.stop - reasoning.start, dtype=torch.float32)

    ol.register_scorer("position", position_scores)
    ids = torch.randint(3, VOCAB, (1, 12))
    rm = torch.zeros(1, 12, dtype=torch.bool); rm[0, 2:8] = True
    am = torch.zeros(1, 12, dtype=torch.bool); am[0, 9:10] = True
    w = ol.token_weights(llama, ids, torch.ones_like(ids), rm, am, method="position", preserve_mass=False)
    assert (w[0, 2:8].diff() >= 0).all() and w[0, 7] == pytest.approx(2.0)


def test_the_methods_that_continue_from_the_sampled_cache_declare_it():
    """`oar_lite.train` keeps the sampling's KV cache for a method that takes ``sampled_cache``."""
    takes = ol.attribution.takes
    assert "sampled_cache" in takes("oar-p") and "sampled_cache" in takes("inverted:oar-p:last")
    assert "sampled_cache" in takes("oar-g:answer_mean")
    assert "sampled_cache" not in takes("uniform") and "sampled_cache" not in takes("entropy")


def _toy_batch():
    tok = toy.build_tokenizer()
    rows = [toy.example(tok, "473+258:", "3+8+0=11 hmm 7+5+1=14 4+2+1=07 A=741"),
            toy.example(tok, "12+35:", "2+5+0=07 1+3+0=04 A=47")]
    T = max(len(r["input_ids"]) for r in rows)
    ids = torch.zeros(len(rows), T, dtype=torch.long)
    attn, rm, am = (torch.zeros(len(rows), T, dtype=torch.bool) for _ in range(3))
    for k, r in enumerate(rows):  # left-padded
        off = T - len(r["input_ids"])
        ids[k, off:] = r["input_ids"]
        attn[k, off:] = True
        rm[k, r["reasoning"].start + off : r["reasoning"].stop + off] = True
        am[k, r["answer"].start + off : r["answer"].stop + off] = True
    return ids, attn.long(), rm, am


@pytest.mark.parametrize("method", ["oar-p:answer_mean", "oar-g", "shuffled:oar-g", "oracle"])
def test_token_weights_takes_a_credit_config_or_its_keywords(method):
    model, _ = toy.load_model()
    ids, attn, rm, am = _toy_batch()
    credit = CreditConfig(method=method, quantile=0.5, boost=3.0, floor=0.2)
    run = lambda **kw: ol.token_weights(model, ids, attn, rm, am, pad_token_id=0,
                                        generator=torch.Generator().manual_seed(0), **kw)
    by_config = run(credit=credit)
    assert torch.equal(by_config, run(method=method, quantile=0.5, boost=3.0, floor=0.2))
    assert torch.equal(by_config, run(credit=CreditConfig(method=method), quantile=0.5, boost=3.0, floor=0.2))
    assert not torch.equal(by_config, run(credit=credit, boost=0.0))  # a keyword replaces the config's field
    with pytest.raises(ValueError, match=r"CreditConfig\.quantile=2"):
        run(method=method, quantile=2)


def test_a_scorer_gets_the_credit_settings_it_names(scorer_registry):
    """A scorer's parameter named like a CreditConfig field receives that field: a new scorer
    setting is one CreditConfig field, with nothing to thread through the trainers."""
    seen = {}

    def probe(model, input_ids, reasoning, answer, *, token_budget=None, noise_std=None):
        seen.update(token_budget=token_budget, noise_std=noise_std)
        return torch.arange(reasoning.stop - reasoning.start, dtype=torch.float32)

    ol.register_scorer("probe", probe)
    ids, attn, rm, am = _toy_batch()
    ol.token_weights(None, ids, attn, rm, am, credit=CreditConfig("probe", token_budget=123, noise_std=0.5))
    assert seen == {"token_budget": 123, "noise_std": 0.5}
    config = TrainConfig(credit=CreditConfig("probe", token_budget=7))
    assert config.credit.token_budget == 7 and config.credit.scorer_options() == {"token_budget": 7, "noise_std": 1e-3}
    with pytest.raises(ValueError, match=r"batch_size=8, which 'probe' does not take; it takes \[.*'token_budget'"):
        CreditConfig("probe", batch_size=8)  # a setting it does not declare


@pytest.mark.parametrize("method", ["oar-p", "oar-g"])
def test_reasoning_mask_with_holes_leaves_them_at_one_and_out_of_the_mass(llama, method):
    """A hole in the reasoning mask (a tool's output inside the reasoning, `oar_lite.trl`):
    its tokens keep weight 1; the others are reshaped from their own scores alone (the scores
    the scorer gives over the whole span, the hole's dropped), and their mass is their count."""
    g = torch.Generator().manual_seed(7)
    ids = torch.randint(3, VOCAB, (2, 30), generator=g)
    mask = torch.ones_like(ids)
    span, hole = slice(4, 22), slice(9, 14)
    full = torch.zeros(2, 30, dtype=torch.bool)
    full[:, span] = True
    holed = full.clone()
    holed[:, hole] = False
    answer = torch.zeros(2, 30, dtype=torch.bool)
    answer[:, 24:27] = True
    opts = dict(method=method, pad_token_id=PAD, return_scores=True)
    _, whole = ol.token_weights(llama, ids, mask, full, answer, generator=torch.Generator().manual_seed(1), **opts)
    weights, own = ol.token_weights(llama, ids, mask, holed, answer, generator=torch.Generator().manual_seed(1), **opts)
    kept = holed[0, span]
    for row in range(2):
        assert torch.equal(weights[row, hole], torch.ones(hole.stop - hole.start))
        torch.testing.assert_close(own[row], whole[row][kept])
        torch.testing.assert_close(weights[row][holed[row]], ol.bilevel_weights(own[row]))
        assert float(weights[row][holed[row]].sum()) == pytest.approx(int(kept.sum()), abs=1e-3)
        assert (weights[row][holed[row]] - 1).abs().max() > 0.05  # reshaped: the checks can fail
