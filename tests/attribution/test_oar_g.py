"""OAR-G (`oar_lite.attribution.oar_g`): gradient times input of the outcome, the batched
form equal to the per-row reference."""
import pytest
import torch
import torch.nn.functional as F
from conftest import (assert_untouched, covered, mixed_state_model, padded_rows, recorded, rows_alone, span_masks,
                      tiny_gpt2, tiny_llama)

import oar_lite as ol
from oar_lite.attribution import MODES


def test_gradient_scores_shape_and_reproducible(any_model, sequence):
    ids, reasoning, answer = sequence
    for mode in MODES:
        a = ol.gradient_scores(any_model, ids, reasoning, answer, mode=mode,
                               generator=torch.Generator().manual_seed(3))
        b = ol.gradient_scores(any_model, ids, reasoning, answer, mode=mode,
                               generator=torch.Generator().manual_seed(3))
        assert a.shape == (reasoning.stop - reasoning.start,)
        assert torch.isfinite(a).all() and (a >= 0).all() and a.max() > 0
        torch.testing.assert_close(a, b)


def test_gradient_scores_leave_param_grads_and_mode(sequence):
    model = tiny_llama().train()
    model.lm_head.weight.grad = torch.full_like(model.lm_head.weight, 0.5)
    before = {n: (None if p.grad is None else p.grad.clone()) for n, p in model.named_parameters()}
    modes = [m.training for m in model.modules()]
    ids, reasoning, answer = sequence
    ol.gradient_scores(model, ids, reasoning, answer, mode="answer_mean")
    for n, p in model.named_parameters():
        if before[n] is None:
            assert p.grad is None, f"{n}.grad was written"
        else:
            torch.testing.assert_close(p.grad, before[n])
    assert [m.training for m in model.modules()] == modes


def test_kl_modes_need_noise_but_joint_does_not(llama, sequence):
    ids, reasoning, answer = sequence
    for mode in ("last", "answer_mean"):
        silent = ol.gradient_scores(llama, ids, reasoning, answer, mode=mode, noise_std=0.0)
        assert silent.abs().max() < 1e-12, "KL(P0||P) must have zero gradient at P = P0"
        noisy = ol.gradient_scores(llama, ids, reasoning, answer, mode=mode, noise_std=1e-2,
                                   generator=torch.Generator().manual_seed(0))
        assert noisy.max() > 1e3 * max(silent.max().item(), 1e-30)
    joint = ol.gradient_scores(llama, ids, reasoning, answer, mode="answer_joint", noise_std=0.0)
    assert joint.max() > 1e-6


def test_gradient_times_input_matches_finite_differences(sequence):
    """<dJ/de_t, e_t> is the directional derivative of J along e_t: check it numerically.
    (GPT-2 here: it computes in float64 throughout; Llama's RMSNorm rounds through float32.)"""
    llama = tiny_gpt2()
    ids, reasoning, answer = sequence
    scores = ol.gradient_scores(llama, ids, reasoning, answer, mode="answer_joint", noise_std=0.0)
    embeds = llama.get_input_embeddings()(ids[None]).detach()
    answer_ids = ids[answer]

    def phi(e):
        with torch.no_grad():
            logits = llama(inputs_embeds=e[:, : answer.stop - 1]).logits[0, answer.start - 1 :]
        return F.log_softmax(logits, -1).gather(-1, answer_ids[:, None]).mean()

    h = 1e-6
    for k in (0, 5, 11):
        t = reasoning.start + k
        up, down = embeds.clone(), embeds.clone()
        up[0, t] += h * embeds[0, t]
        down[0, t] -= h * embeds[0, t]
        directional = (phi(up) - phi(down)) / (2 * h)  # d phi / d eps; J = phi0 - phi
        torch.testing.assert_close(scores[k].double(), directional.abs(), rtol=1e-4, atol=1e-10)


# Batched OAR-G equals per-row OAR-G up to rounding (different matrix shapes sum in a
# different order): rtol 1e-6 in float64; in float32 1e-3 of each row's largest score,
# since the KL modes' objective is second order in the noise and amplifies the rounding.

@pytest.mark.parametrize("make,dtype,mode,padding", covered([(tiny_llama, torch.float64), (tiny_gpt2, torch.float64),
                                                               (tiny_llama, torch.float32)],
                                                              MODES, ["left", "right", "both"]))
def test_gradient_scores_batch_equals_per_row(padding, mode, make, dtype):
    model = make(dtype=dtype)
    left = {"left": [2, 0, 5], "right": [0, 0, 0], "both": [2, 0, 5]}[padding]
    right = {"left": [3, 0, 8], "right": [4, 0, 8], "both": [3, 2, 1]}[padding]
    ids, attn, reasoning, answer = padded_rows(model, left, right)
    if padding == "left":  # every row ends at the last column
        shift = [ids.shape[1] - int(attn[i].nonzero()[-1]) - 1 for i in range(3)]
        ids = torch.stack([row.roll(s) for row, s in zip(ids, shift)])
        attn = torch.stack([row.roll(s) for row, s in zip(attn, shift)])
        reasoning = [slice(r.start + s, r.stop + s) for r, s in zip(reasoning, shift)]
        answer = [slice(a.start + s, a.stop + s) for a, s in zip(answer, shift)]
    kw = dict(mode=mode, noise_std=1e-3)
    alone = rows_alone(ol.gradient_scores, model, ids, attn, reasoning, answer, generator=torch.Generator().manual_seed(0), **kw)
    for reuse_prefix in (True, False):
        batched = ol.gradient_scores_batch(model, ids, attn, reasoning, answer, reuse_prefix=reuse_prefix,
                                           generator=torch.Generator().manual_seed(0), **kw)
        for a, b in zip(alone, batched):
            assert b.shape == a.shape and b.dtype == torch.float32 and a.max() > 0
            if dtype == torch.float64:
                torch.testing.assert_close(b, a, rtol=1e-6, atol=1e-9 * float(a.max()))
            else:
                assert float((b - a).abs().max()) <= 1e-3 * float(a.max())


def test_gradient_scores_batch_reproducible_and_noise_matters(llama):
    ids, attn, reasoning, answer = padded_rows(llama, [2, 0, 5], [3, 2, 1])
    run = lambda seed: ol.gradient_scores_batch(llama, ids, attn, reasoning, answer,  # noqa: E731
                                                generator=torch.Generator().manual_seed(seed))
    for a, b, c in zip(run(1), run(1), run(2)):
        assert torch.equal(a, b)
        assert not torch.allclose(a, c)


def test_gradient_scores_batch_leaves_grads_requires_grad_and_modes():
    model, before = mixed_state_model()
    ids, attn, reasoning, answer = padded_rows(model, [2, 0, 5], [3, 2, 1])
    for reuse_prefix in (True, False):
        ol.gradient_scores_batch(model, ids, attn, reasoning, answer, reuse_prefix=reuse_prefix)
    assert_untouched(model, before)


def test_token_weights_oar_g_runs_rows_in_one_pass(llama):
    """token_weights("oar-g") scores all rows in one batched pass: the LM head sees them all
    at once, and the scores equal gradient_scores_batch's with the same generator."""
    ids, attn, reasoning, answer = padded_rows(llama, [2, 0, 5], [3, 2, 1])
    rm, am = span_masks(attn, reasoning, answer)
    am[1] = False  # a row without an answer is not scored
    with recorded(llama.lm_head, lambda args, out: out.shape[0]) as batch_sizes:
        _, scores = ol.token_weights(llama, ids, attn, rm, am, method="oar-g:last", return_scores=True,
                                     generator=torch.Generator().manual_seed(4))
    assert set(batch_sizes) == {2} and len(batch_sizes) <= 3  # prompt prefix, clean pass, noisy pass
    assert scores[1] is None
    expected = ol.gradient_scores_batch(llama, ids[[0, 2]], attn[[0, 2]], [reasoning[0], reasoning[2]],
                                        [answer[0], answer[2]], mode="last", generator=torch.Generator().manual_seed(4))
    for got, want in zip([scores[0], scores[2]], expected):
        assert torch.equal(got, want)


def test_gradient_scores_batch_bad_input(llama):
    ids, attn, reasoning, answer = padded_rows(llama, [0, 0, 0], [0, 0, 0])
    with pytest.raises(ValueError, match="one reasoning and one answer span per row"):
        ol.gradient_scores_batch(llama, ids, attn, reasoning[:2], answer)
    with pytest.raises(ValueError, match="must start at or after"):
        ol.gradient_scores_batch(llama, ids, attn, reasoning, [slice(5, 7)] * 3)
    with pytest.raises(ValueError, match=r"\[B, T\]"):
        ol.gradient_scores_batch(llama, ids[0], attn[0], reasoning, answer)
