"""`oar_lite.lab.grail`: GRAIL's gradient-activation saliency against a per-token loop, its batched
form against the per-row one, its weights against their code's formula, and its registration."""
import pytest
import torch
import torch.nn.functional as F
from conftest import VOCAB, assert_untouched, mixed_state_model, padded_rows, rows_alone, span_masks, tiny_gpt2, tiny_llama

import oar_lite as ol
from oar_lite.lab import grail


def naive_saliency(model, ids, reasoning, answer):
    """The reference, one token at a time: for each reasoning token t, only the embedding at
    t - 1 is a leaf; the whole sequence runs forward (no ``logits_to_keep``, the tokens after
    the answer included), L = -sum over the answer tokens of log pi(y_k | y_<k) from the full
    logits, and s_t = ||dL/de_{t-1} * e_{t-1}||_2."""
    embeds = model.get_input_embeddings()(ids[None]).detach()
    out = []
    for t in range(reasoning.start, reasoning.stop):
        e = embeds[0, t - 1].clone().requires_grad_(True)
        x = torch.cat([embeds[:, : t - 1], e[None, None], embeds[:, t:]], dim=1)
        logp = F.log_softmax(model(inputs_embeds=x).logits[0].double(), -1)
        loss = -sum(logp[k - 1, ids[k]] for k in range(answer.start, answer.stop))
        (g,) = torch.autograd.grad(loss, e)
        out.append(float((g.double() * e.detach().double()).norm()))
    return torch.tensor(out, dtype=torch.float64)


@pytest.mark.parametrize("make", [tiny_llama, tiny_gpt2])
def test_saliency_scores_equal_the_per_token_loop(make, sequence):
    model = make()
    ids, reasoning, answer = sequence
    got = grail.saliency_scores(model, ids, reasoning, answer)
    assert got.dtype == torch.float32 and got.shape == (reasoning.stop - reasoning.start,)
    torch.testing.assert_close(got.double(), naive_saliency(model, ids, reasoning, answer), rtol=1e-5, atol=1e-9)
    assert got.min() > 0  # gradient x input of a random model: no token is exactly insensitive
    # The answer's tokens move the scores; the tokens after the answer cannot.
    later = ids.clone()
    later[answer.stop:] = (later[answer.stop:] + 1) % VOCAB
    assert torch.equal(grail.saliency_scores(model, later, reasoning, answer), got)
    other = ids.clone()
    other[answer.start] = (other[answer.start] + 1) % VOCAB
    assert not torch.allclose(grail.saliency_scores(model, other, reasoning, answer), got)


def test_saliency_scores_leave_the_model_as_it_was(sequence):
    model, snapshot = mixed_state_model()
    ids, reasoning, answer = sequence
    grail.saliency_scores(model, ids, reasoning, answer)
    grail.saliency_scores_batch(model, ids[None], torch.ones(1, len(ids), dtype=torch.long), [reasoning], [answer])
    assert_untouched(model, snapshot)


@pytest.mark.parametrize("left, right", [((0, 0, 0), (4, 0, 8)), ((4, 0, 8), (0, 0, 0)), ((2, 5, 0), (3, 0, 1))])
@pytest.mark.parametrize("make", [tiny_llama, tiny_gpt2])
def test_saliency_scores_batch_equals_per_row(left, right, make):
    model = make()
    ids, attn, reasoning, answer = padded_rows(None, left, right, answer_lengths=(3, 1, 4))
    batch = grail.saliency_scores_batch(model, ids, attn, reasoning, answer)
    alone = rows_alone(grail.saliency_scores, model, ids, attn, reasoning, answer)
    assert [b.shape for b in batch] == [a.shape for a in alone]
    for b, a in zip(batch, alone):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-8)


def test_scores_need_a_token_before_the_reasoning(llama, sequence):
    ids, _, answer = sequence
    with pytest.raises(ValueError, match="before the first reasoning token"):
        grail.saliency_scores(llama, ids, slice(0, 10), answer)
    attn = torch.ones(1, len(ids), dtype=torch.long)
    attn[0, :3] = 0
    with pytest.raises(ValueError, match="before the first reasoning token"):
        grail.saliency_scores_batch(llama, ids[None], attn, [slice(3, 10)], [answer])


def their_weights(scores: torch.Tensor) -> torch.Tensor:
    """Their ``compute_grail_weights``, phase 2, transcribed for one row without padding (mask all
    ones, no fallback), with ``qwen3_grail.yaml``'s settings (grail_std 0.5, grail_mean 1.0,
    w_min 0.5, w_max 5.0), in float32 as their code runs."""
    scores = scores.float()[None]
    float_mask = torch.ones_like(scores)
    log_scores = torch.log(scores + 1e-8)
    valid_counts = float_mask.sum(dim=-1, keepdim=True).clamp(min=1.0)
    mean_log_scores = (log_scores * float_mask).sum(dim=-1, keepdim=True) / valid_counts
    variance = ((log_scores - mean_log_scores) ** 2) * float_mask
    std_log_scores = torch.sqrt(variance.sum(dim=-1, keepdim=True) / valid_counts + 1e-8)
    z_scores = (log_scores - mean_log_scores) / std_log_scores
    return (1.0 + z_scores * 0.5).clamp(0.5, 5.0)[0]


def test_saliency_weights_follow_their_code():
    g = torch.Generator().manual_seed(0)
    for n in (1, 2, 5, 64):
        scores = torch.rand(n, generator=g, dtype=torch.float64) ** 4 * 10  # spread over decades, some near 0
        got = grail.saliency_weights(scores)
        assert got.dtype == torch.float32 and got.shape == (n,)
        torch.testing.assert_close(got, their_weights(scores), rtol=1e-5, atol=1e-6)
        assert got.min() >= 0.5 and got.max() <= 5.0
        order = torch.argsort(scores)
        assert (got[order].diff() >= 0).all()  # monotone in the saliency
    assert grail.saliency_weights(torch.full((7,), 3.0)).tolist() == [1.0] * 7  # equal scores: grail_mean
    assert grail.saliency_weights(torch.tensor([2.0])).tolist() == [1.0]
    assert grail.saliency_weights(torch.tensor([1.0, 100.0]), grail_std=10.0).tolist() == [0.5, 5.0]  # clamped
    assert grail.saliency_weights(torch.empty(0)).shape == (0,)


@pytest.mark.parametrize("bad, kwargs, says", [
    (torch.ones(2, 3), {}, "1-D tensor"), (torch.tensor([1.0, float("nan")]), {}, "finite"),
    (torch.tensor([1.0, -1.0]), {}, ">= 0"), (torch.ones(3), {"grail_std": 0.0}, "grail_std must be > 0"),
    (torch.ones(3), {"grail_w_min": 2.0, "grail_w_max": 1.0}, "grail_w_min"),
])
def test_saliency_weights_refuse_bad_input(bad, kwargs, says):
    with pytest.raises(ValueError, match=says):
        grail.saliency_weights(bad, **kwargs)


def test_grail_is_a_lab_method_with_its_own_weighting(llama):
    ids, attn, reasoning, answer = padded_rows(None, (0, 2, 4), (4, 2, 0))
    rm, am = span_masks(attn, reasoning, answer)
    weights, scores = ol.token_weights(llama, ids, attn, rm, am, method="grail", return_scores=True)
    alone = rows_alone(grail.saliency_scores, llama, ids, attn, reasoning, answer)
    for i, r in enumerate(reasoning):
        torch.testing.assert_close(scores[i], alone[i], rtol=1e-5, atol=1e-8)
        torch.testing.assert_close(weights[i, r], grail.saliency_weights(scores[i]))
        outside = torch.ones(ids.shape[1], dtype=torch.bool)
        outside[r] = False
        assert (weights[i, outside] == 1).all()
    assert ol.CreditConfig(method="grail").reshape(scores[0]).tolist() == grail.saliency_weights(scores[0]).tolist()
    # OAR's reshaping settings do not reach GRAIL's weighting: refused, not accepted without effect
    for setting in ({"quantile": 0.5}, {"boost": 2.0}, {"floor": 0.0}, {"preserve_mass": False}):
        with pytest.raises(ValueError, match="does not take"):
            ol.CreditConfig(method="grail", **setting)
    with pytest.raises(ValueError, match="does not take"):
        ol.CreditConfig(method="entropy-top", boost=2.0)  # TRL's mask declares only the quantile
    assert ol.CreditConfig(method="entropy-top", quantile=0.8).quantile == 0.8
