"""`oar_lite.lab.baselines`: entropy against full logits, Captum's peer, TRL's entropy-top, ARCA's
adapter residual."""
import pytest
import torch
import torch.nn.functional as F
from conftest import PAD, tiny_llama

import oar_lite as ol
from oar_lite.lab import baselines


def test_entropy_scores_match_full_logits(llama, sequence):
    ids, reasoning, answer = sequence
    with torch.no_grad():
        logp = F.log_softmax(llama(ids[None]).logits[0], -1)
    expected = -(logp.exp() * logp).sum(-1)[reasoning.start - 1 : reasoning.stop - 1]
    torch.testing.assert_close(baselines.entropy_scores(llama, ids, reasoning, answer), expected.float(), rtol=1e-5, atol=1e-7)


def test_captum_peer_scores_every_reasoning_token(chars):
    model = tiny_llama(dtype=torch.float32)
    text = "12+34:2+4+0=06 1+3+0=04 A=46"  # one token per character
    ids = torch.tensor(chars(text).input_ids)
    assert len(ids) == len(text)
    reasoning, answer = slice(6, text.index("A=")), slice(len(text) - 2, len(text))
    scores = ol.token_scores("captum-ig:last", model, ids, reasoning, answer, pad_token_id=PAD, n_steps=4)
    assert scores.shape == (reasoning.stop - 6,) and torch.isfinite(scores).all() and scores.max() > 0
    with pytest.raises(ValueError, match="answer_mean"):
        ol.token_scores("captum-ig:answer_mean", model, ids, reasoning, answer, pad_token_id=PAD)


# ------------------------------------------------- entropy-top: TRL's top_entropy_quantile

def _naive_top_mask(scores: list[float], quantile: float) -> list[float]:
    """The reference: the threshold by hand (sorted values, linear interpolation at position
    quantile * (n - 1), numpy's and torch's default), 1 at or above it."""
    ordered = sorted(scores)
    pos = quantile * (len(ordered) - 1)
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    threshold = ordered[low] + (pos - low) * (ordered[high] - ordered[low])
    return [1.0 if s >= threshold else 0.0 for s in scores]


@pytest.mark.parametrize("quantile", [0.0, 0.2, 0.5, 0.8, 0.95, 1.0])
def test_top_quantile_weights_match_the_naive_reference(quantile):
    g = torch.Generator().manual_seed(3)
    for n in (1, 2, 7, 40):
        scores = torch.rand(n, generator=g, dtype=torch.float64) * 3
        scores[: n // 3] = scores[0]  # ties: TRL keeps every token at the threshold
        got = baselines.top_quantile_weights(scores, quantile=quantile)
        assert got.dtype == torch.float32 and got.shape == (n,)
        assert got.tolist() == _naive_top_mask(scores.tolist(), quantile), (n, quantile)
    # quantile 1 keeps only the highest score (TRL's rho = 0); quantile 0 keeps all (rho = 1)
    s = torch.tensor([0.1, 0.9, 0.3, 0.9, 0.2])
    assert baselines.top_quantile_weights(s, quantile=1.0).tolist() == [0, 1, 0, 1, 0]
    assert baselines.top_quantile_weights(s, quantile=0.0).tolist() == [1] * 5


def test_top_quantile_weights_equal_trls_high_entropy_mask():
    """Against TRL's own `GRPOTrainer.get_high_entropy_mask` on one process (its gather is
    the identity there), with TRL's rho = 1 - quantile: the same tokens kept, weights 0/1."""
    trl = pytest.importorskip("trl")

    class OneProcess:
        def pad_across_processes(self, x, dim=0, pad_index=0):
            return x

        def gather(self, x):
            return x

    trainer = type("T", (), {"accelerator": OneProcess()})()
    g = torch.Generator().manual_seed(5)
    for rho in (0.2, 0.5, 0.9):
        entropies = torch.rand(1, 23, generator=g) * 4
        mask = torch.ones_like(entropies)
        trl_mask = trl.GRPOTrainer.get_high_entropy_mask(trainer, entropies, mask, 1 - rho)
        ours = baselines.top_quantile_weights(entropies[0], quantile=1 - rho)
        assert ours.tolist() == trl_mask[0].float().tolist(), rho


def test_top_quantile_weights_refuse_bad_input():
    with pytest.raises(ValueError, match="quantile must be a number in \\[0, 1\\]"):
        baselines.top_quantile_weights(torch.ones(3), quantile=1.5)
    with pytest.raises(ValueError, match="1-D tensor"):
        baselines.top_quantile_weights(torch.ones(2, 3), quantile=0.5)
    with pytest.raises(ValueError, match="NaN or infinite"):
        baselines.top_quantile_weights(torch.tensor([1.0, float("nan")]), quantile=0.5)
    assert baselines.top_quantile_weights(torch.ones(0), quantile=0.5).numel() == 0


def test_entropy_top_weights_are_the_mask_of_the_entropies(llama, sequence):
    """``method="entropy-top"``: the entropy scores with their own weighting, TRL's mask (not
    bilevel, not rescaled); 1 outside the reasoning; ``inverted:`` keeps the lowest-entropy
    tokens instead (the mask of the inverted scores); a reshaping setting but the quantile is refused."""
    ids, reasoning, answer = sequence
    entropies = baselines.entropy_scores(llama, ids, reasoning, answer)
    assert ol.token_scores("entropy-top", llama, ids, reasoning, answer).tolist() == entropies.tolist()
    masks = {name: torch.zeros(1, len(ids), dtype=torch.bool) for name in ("reasoning", "answer")}
    masks["reasoning"][0, reasoning] = True
    masks["answer"][0, answer] = True
    for quantile in (0.8, 0.5):
        w = ol.token_weights(llama, ids[None], torch.ones(1, len(ids), dtype=torch.long), masks["reasoning"],
                             masks["answer"], method="entropy-top", quantile=quantile)
        expected = torch.tensor(_naive_top_mask(entropies.tolist(), quantile))
        assert w[0, reasoning].tolist() == expected.tolist()
        assert w[0, : reasoning.start].eq(1).all() and w[0, reasoning.stop :].eq(1).all()
        assert w[0, reasoning].sum() < reasoning.stop - reasoning.start  # not mass-preserving, as TRL
        low = ol.token_weights(llama, ids[None], torch.ones(1, len(ids), dtype=torch.long), masks["reasoning"],
                               masks["answer"], method="inverted:entropy-top", quantile=quantile)[0, reasoning]
        kept = entropies[low.bool()]
        assert kept.max() <= entropies[~low.bool()].min() + 1e-6 if (~low.bool()).any() else True
    mask = torch.tensor([0.0, 0.0, 1.0, 0.0, 1.0])
    assert ol.CreditConfig(method="entropy-top", quantile=0.8).reshape(mask).tolist() == (  # its own weighting
        baselines.top_quantile_weights(mask, quantile=0.8).tolist())
    assert ol.CreditConfig(method="entropy").reshape(torch.tensor([0.0, 1.0, 2.0, 3.0, 4.0])).min() > 0  # bilevel
    for refused in ({"boost": 9.0}, {"floor": 0.0}, {"preserve_mass": False}):  # they would act on nothing
        with pytest.raises(ValueError, match=r"'entropy-top' does not take; it takes \['quantile'\]: drop"):
            ol.CreditConfig(method="entropy-top", **refused)


# ------------------------------------------------- adapter-residual: ARCA's signal

def test_adapter_residual_scores_match_the_base_model_directly(sequence):
    """ARCA's ||h_adapted - h_base||: the peft model with its adapter against a copy of the
    model before wrapping (an independent base forward), at the states that produced each
    reasoning token; all 0 for a fresh adapter (B = 0); refused without an adapter."""
    import copy

    peft = pytest.importorskip("peft")
    ids, reasoning, answer = sequence
    base = tiny_llama()
    reference = copy.deepcopy(base)
    config = peft.LoraConfig(r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    model = peft.get_peft_model(base, config)
    with torch.no_grad():
        adapted = model(input_ids=ids[None], output_hidden_states=True).hidden_states[-1][0]
        plain = reference(input_ids=ids[None], output_hidden_states=True).hidden_states[-1][0]
    expected = (adapted - plain).norm(dim=-1)[reasoning.start - 1 : reasoning.stop - 1]
    got = ol.token_scores("adapter-residual", model, ids, reasoning, answer)
    assert got.shape == (reasoning.stop - reasoning.start,) and expected.max() > 1e-3
    torch.testing.assert_close(got, expected.float(), rtol=1e-5, atol=1e-7)
    fresh = peft.get_peft_model(tiny_llama(), peft.LoraConfig(r=4, target_modules=["q_proj", "v_proj"]))
    assert ol.token_scores("adapter-residual", fresh, ids, reasoning, answer).abs().max() == 0
    with pytest.raises(ValueError, match="LoRA adapter"):
        ol.token_scores("adapter-residual", reference, ids, reasoning, answer)
    with pytest.raises(ValueError, match="reasoning.start >= 1"):
        baselines.adapter_residual_scores(model, ids, slice(0, 3), answer)
