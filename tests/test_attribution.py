"""OAR-P, OAR-G and the baselines against naive references and the spec's invariants."""
import pytest
import torch
import torch.nn.functional as F
from conftest import PAD, VOCAB, tiny_gpt2, tiny_llama

import oar_lite as ol
from oar_lite.attribution import MODES


# ------------------------------------------------------------------ OAR-P

@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("batch_size,reuse_prefix", [(1, True), (4, True), (64, True), (5, False)])
def test_perturbation_matches_naive_loop(any_model, sequence, mode, batch_size, reuse_prefix):
    ids, reasoning, answer = sequence
    fast = ol.perturbation_scores(any_model, ids, reasoning, answer, mode=mode, pad_token_id=PAD,
                                  batch_size=batch_size, reuse_prefix=reuse_prefix)
    naive = ol.perturbation_scores_naive(any_model, ids, reasoning, answer, mode=mode, pad_token_id=PAD)
    assert fast.shape == (reasoning.stop - reasoning.start,)
    torch.testing.assert_close(fast, naive, rtol=1e-6, atol=1e-9)
    assert (fast >= 0).all() and fast.max() > 0


def test_perturbation_naive_is_a_real_counterfactual(llama, sequence):
    """Independent check of the reference itself for one position, written from the spec."""
    ids, reasoning, answer = sequence
    t = reasoning.start + 3
    perturbed = ids.clone()
    perturbed[t] = PAD
    with torch.no_grad():
        p = F.log_softmax(llama(ids[None, : answer.start]).logits[0, -1], -1)
        q = F.log_softmax(llama(perturbed[None, : answer.start]).logits[0, -1], -1)
    kl = F.kl_div(q, p, log_target=True, reduction="sum")  # KL(P || Q)
    scores = ol.perturbation_scores(llama, ids, reasoning, answer, mode="last", pad_token_id=PAD)
    torch.testing.assert_close(scores[3], kl.float(), rtol=1e-5, atol=1e-9)


def test_perturbation_computes_lm_head_only_where_needed(llama, sequence):
    ids, reasoning, answer = sequence
    shapes = []
    hook = llama.lm_head.register_forward_hook(lambda m, i, o: shapes.append(tuple(o.shape)))
    try:
        ol.perturbation_scores(llama, ids, reasoning, answer, mode="answer_mean", pad_token_id=PAD, batch_size=8)
    finally:
        hook.remove()
    A = answer.stop - answer.start
    assert shapes, "the LM head was never called"
    assert all(s[1] <= A for s in shapes), f"LM head computed on more positions than P_final needs: {shapes}"
    assert max(s[0] for s in shapes) <= 8, "perturbed batch not chunked to batch_size"


def test_prefix_reuse_processes_fewer_tokens(llama, sequence):
    ids, reasoning, answer = sequence
    with_reuse, without = {}, {}
    ol.perturbation_scores(llama, ids, reasoning, answer, pad_token_id=PAD, batch_size=2, stats=with_reuse)
    ol.perturbation_scores(llama, ids, reasoning, answer, pad_token_id=PAD, batch_size=2,
                           reuse_prefix=False, stats=without)
    R, end = reasoning.stop - reasoning.start, answer.start
    assert without["forward_tokens"] == end + R * end
    assert with_reuse["forward_tokens"] < 0.75 * without["forward_tokens"]


def test_perturbation_leaves_model_mode(sequence):
    model = tiny_llama().train()
    ids, reasoning, answer = sequence
    ol.perturbation_scores(model, ids, reasoning, answer, pad_token_id=PAD)
    assert model.training and all(m.training for m in model.modules())


# ------------------------------------------------------------------ OAR-G

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


# ------------------------------------------------------------------ baselines and the one interface

def test_entropy_scores_match_full_logits(llama, sequence):
    ids, reasoning, answer = sequence
    with torch.no_grad():
        logp = F.log_softmax(llama(ids[None]).logits[0], -1)
    expected = -(logp.exp() * logp).sum(-1)[reasoning.start - 1 : reasoning.stop - 1]
    torch.testing.assert_close(ol.entropy_scores(llama, ids, reasoning, answer), expected.float(), rtol=1e-5, atol=1e-7)


def test_token_scores_dispatch_and_mode_suffix(llama, sequence):
    ids, reasoning, answer = sequence
    via_name = ol.token_scores("oar-p:answer_joint", llama, ids, reasoning, answer, pad_token_id=PAD, noise_std=1e-3)
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


def test_register_scorer_plugs_into_token_weights(llama):
    def position_scores(model, input_ids, reasoning, answer):
        return torch.arange(reasoning.stop - reasoning.start, dtype=torch.float32)

    ol.register_scorer("position", position_scores)
    try:
        ids = torch.randint(3, VOCAB, (1, 12))
        rm = torch.zeros(1, 12, dtype=torch.bool); rm[0, 2:8] = True
        am = torch.zeros(1, 12, dtype=torch.bool); am[0, 9:10] = True
        w = ol.token_weights(llama, ids, torch.ones_like(ids), rm, am, method="position", preserve_mass=False)
        assert (w[0, 2:8].diff() >= 0).all() and w[0, 7] == pytest.approx(2.0)
    finally:
        ol.SCORERS.pop("position")


# ------------------------------------------------------------------ bad input

@pytest.mark.parametrize("reasoning,answer,match", [
    (slice(5, 5), slice(24, 27), "empty or out of range"),
    (slice(5, 22), slice(24, 40), "empty or out of range"),
    (slice(5, 22), slice(10, 12), "must start at or after"),
    (slice(-3, 22), slice(24, 27), "empty or out of range"),
    ((5, 22), slice(24, 27), "must be a slice"),
])
def test_bad_spans_raise(llama, sequence, reasoning, answer, match):
    ids, _, _ = sequence
    with pytest.raises(ValueError, match=match):
        ol.perturbation_scores(llama, ids, reasoning, answer, pad_token_id=PAD)
    with pytest.raises(ValueError, match=match):
        ol.gradient_scores(llama, ids, reasoning, answer)


def test_bad_mode_method_and_shapes(llama, sequence):
    ids, reasoning, answer = sequence
    with pytest.raises(ValueError, match="unknown P_final mode"):
        ol.perturbation_scores(llama, ids, reasoning, answer, mode="first", pad_token_id=PAD)
    with pytest.raises(ValueError, match="unknown method"):
        ol.token_scores("oar-x", llama, ids, reasoning, answer)
    with pytest.raises(ValueError, match="takes no P_final mode"):
        ol.parse_method("entropy:last")
    with pytest.raises(ValueError, match=r"1-D tensor \[T\]"):
        ol.perturbation_scores(llama, ids[None], reasoning, answer, pad_token_id=PAD)
    bad = torch.zeros(1, 30, dtype=torch.bool); bad[0, [3, 5]] = True
    ok = torch.zeros(1, 30, dtype=torch.bool); ok[0, 24:27] = True
    with pytest.raises(ValueError, match="contiguous"):
        ol.token_weights(llama, ids[None], torch.ones(1, 30), bad, ok, method="oar-p", pad_token_id=PAD)
