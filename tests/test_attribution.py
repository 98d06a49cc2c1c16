"""OAR-P, OAR-G and the baselines against naive references and the spec's invariants."""
import pytest
import torch
import torch.nn.functional as F
from conftest import PAD, VOCAB, tiny_gpt2, tiny_llama

import oar_lite as ol
from oar_lite.attribution import MODES


def tiny_qwen2(seed: int = 0, dtype=torch.float64):
    """A 2-layer Qwen2 (biases on q, k, v): the other model type whose last attention runs its
    queries only where P_final reads."""
    from transformers import Qwen2Config, Qwen2ForCausalLM
    torch.manual_seed(seed)
    cfg = Qwen2Config(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128, pad_token_id=PAD)
    return Qwen2ForCausalLM(cfg).to(dtype).eval()


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


@pytest.mark.parametrize("options", [{}, {"token_budget": 40}, {"token_budget": 1}, {"max_waste": 0.0},
                                     {"max_waste": 10.0, "token_budget": 10_000}])
def test_perturbation_default_and_budgets_match_naive(llama, sequence, options):
    ids, reasoning, answer = sequence
    stats = {}
    fast = ol.perturbation_scores(llama, ids, reasoning, answer, mode="answer_mean", pad_token_id=PAD, stats=stats,
                                  **options)
    naive = ol.perturbation_scores_naive(llama, ids, reasoning, answer, mode="answer_mean", pad_token_id=PAD)
    torch.testing.assert_close(fast, naive, rtol=1e-6, atol=1e-9)
    end = answer.stop - 1
    ideal = end + sum(end - t for t in range(reasoning.start, reasoning.stop))
    waste = options.get("max_waste", ol.attribution.DEFAULT_MAX_WASTE)
    assert ideal <= stats["forward_tokens"] <= end + (1 + waste) * (ideal - end)
    longest_copy = end - reasoning.start
    assert stats["max_pass_tokens"] <= max(options.get("token_budget", 4096), longest_copy, end)


def test_plan_chunks_bounds():
    end, first, stop = 60, 10, 55
    ideal = sum(end - t for t in range(first, stop))
    passes = {}
    for budget, waste, rows in [(4096, 0.1, None), (200, 0.1, None), (4096, 0.5, 4), (4096, 0.0, None),
                                (30, 1.0, None), (4096, 0.3, None), (10**6, 10.0, None)]:
        chunks = ol.plan_chunks(first, stop, end, token_budget=budget, max_waste=waste, max_rows=rows)
        assert chunks[0][0] == first and chunks[-1][1] == stop
        assert all(a[1] == b[0] and a[0] < a[1] for a, b in zip(chunks, chunks[1:] + [(stop, stop + 1)]))
        work = 0
        for a, b in chunks:
            n = b - a
            assert n == 1 or n * (end - a) <= budget
            assert rows is None or n <= rows
            work += n * (end - a)
        assert ideal <= work <= (1 + waste) * ideal
        passes[budget, waste, rows] = len(chunks)
        if waste == 0.0:
            assert all(b - a == 1 for a, b in chunks)
    # More allowed waste, fewer passes; with no limits, one pass.
    assert passes[4096, 0.0, None] > passes[4096, 0.1, None] > passes[4096, 0.3, None] > passes[10**6, 10.0, None] == 1
    # Without prefix reuse every copy is the whole sequence; only the budget splits them.
    assert ol.plan_chunks(0, 10, 20, token_budget=60, reuse_prefix=False) == [(0, 3), (3, 6), (6, 9), (9, 10)]
    with pytest.raises(ValueError, match="token_budget >= 1"):
        ol.plan_chunks(0, 10, 20, token_budget=0)


def test_default_token_budget_per_device():
    assert ol.default_token_budget("cpu") < ol.default_token_budget("cuda")
    assert ol.default_token_budget("meta") == ol.default_token_budget("cpu")


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


@pytest.mark.parametrize("make", [tiny_llama, tiny_gpt2])
def test_perturbation_runs_last_mlp_only_where_logits_are_read(make, sequence):
    """Both OAR-P paths run the last block's MLP only at the positions P_final reads (that the
    scores stay exact is checked against the naive loop above), and remove their hooks."""
    model = make()
    mlp = (model.model.layers if make is tiny_llama else model.transformer.h)[-1].mlp
    ids, reasoning, answer = sequence
    lengths = []
    hook = mlp.register_forward_hook(lambda module, args, out: lengths.append(args[0].shape[1]))
    try:
        for mode in MODES:
            keep = 1 if mode == "last" else answer.stop - answer.start
            lengths.clear()
            ol.perturbation_scores(model, ids, reasoning, answer, mode=mode, pad_token_id=PAD)
            ol.perturbation_scores_batch(model, ids[None], torch.ones_like(ids)[None], [reasoning], [answer], mode=mode,
                                         pad_token_id=PAD)
            assert lengths and set(lengths) == {keep}, (mode, lengths)
        lengths.clear()
        model(ids[None])  # outside OAR-P the MLP runs everywhere again
        assert lengths == [len(ids)]
    finally:
        hook.remove()
    assert not mlp._forward_hooks and not mlp._forward_pre_hooks


@pytest.mark.parametrize("make,attention", [(tiny_llama, "sdpa"), (tiny_llama, "eager"), (tiny_qwen2, "sdpa"),
                                            (tiny_gpt2, "sdpa")])
def test_last_attention_runs_queries_only_where_logits_are_read(make, attention, sequence):
    """On Llama-type models the whole last layer (queries, attention, output projection,
    norms, MLP) and the final norm run only at the positions P_final reads (keys and values
    everywhere), exactly: both OAR-P paths, with and without prefix reuse, equal the naive
    loop. GPT-2 keeps its attention as it is (the fallback) and stays exact too."""
    model = make()
    model.config._attn_implementation = attention
    ids, reasoning, answer = sequence
    is_gpt2 = make is tiny_gpt2
    out_proj = model.transformer.h[-1].attn.c_proj if is_gpt2 else model.model.layers[-1].self_attn.o_proj
    final_norm = model.transformer.ln_f if is_gpt2 else model.model.norm
    lengths, norm_lengths = [], []
    hook = out_proj.register_forward_hook(lambda module, args, out: lengths.append(args[0].shape[1]))
    norm_hook = final_norm.register_forward_hook(lambda module, args, out: norm_lengths.append(args[0].shape[1]))
    try:
        for mode in MODES:
            naive = ol.perturbation_scores_naive(model, ids, reasoning, answer, mode=mode, pad_token_id=PAD)
            keep = 1 if mode == "last" else answer.stop - answer.start
            lengths.clear()
            norm_lengths.clear()
            for reuse_prefix in (True, False):
                fast = ol.perturbation_scores(model, ids, reasoning, answer, mode=mode, pad_token_id=PAD,
                                              reuse_prefix=reuse_prefix)
                torch.testing.assert_close(fast, naive, rtol=1e-6, atol=1e-9)
                batched = ol.perturbation_scores_batch(model, ids[None], torch.ones_like(ids)[None], [reasoning],
                                                       [answer], mode=mode, pad_token_id=PAD, reuse_prefix=reuse_prefix)
                torch.testing.assert_close(batched[0], naive, rtol=1e-6, atol=1e-9)
            assert lengths and (max(lengths) > keep if is_gpt2 else set(lengths) == {keep}), (mode, lengths)
            assert is_gpt2 or set(norm_lengths) == {keep}, (mode, norm_lengths)
        lengths.clear()
        model(ids[None])  # outside OAR-P the attention runs everywhere again
        assert lengths == [len(ids)]
    finally:
        hook.remove()
        norm_hook.remove()
    attn = model.transformer.h[-1].attn if is_gpt2 else model.model.layers[-1].self_attn
    assert not attn._forward_hooks and not attn._forward_pre_hooks


def test_last_layer_cut_finds_the_decoder_layers_by_name(sequence):
    """The last-layer cut hooks the decoder's own last layer: not another list of as many
    blocks with an ``mlp`` registered after it (which would leave the real last layer whole
    and zero a decoy's output), and also under a peft LoRA wrapper; OAR-P stays exact."""
    from peft import LoraConfig, get_peft_model

    from oar_lite.attribution import _decoder_layers

    ids, reasoning, answer = sequence
    model = tiny_llama()
    model.decoy = torch.nn.ModuleList([tiny_llama().model.layers[0] for _ in model.model.layers])  # never called
    assert _decoder_layers(model) is model.model.layers
    assert _decoder_layers(tiny_gpt2()) is not None
    lengths = []
    hook = model.model.layers[-1].mlp.register_forward_hook(lambda module, args, out: lengths.append(args[0].shape[1]))
    naive = ol.perturbation_scores_naive(model, ids, reasoning, answer, mode="last", pad_token_id=PAD)
    lengths.clear()
    torch.testing.assert_close(ol.perturbation_scores(model, ids, reasoning, answer, mode="last", pad_token_id=PAD),
                               naive, rtol=1e-6, atol=1e-9)
    hook.remove()
    assert lengths and set(lengths) == {1}
    wrapped = get_peft_model(tiny_llama(), LoraConfig(r=2, target_modules=["q_proj", "k_proj", "v_proj"]))
    assert _decoder_layers(wrapped) is wrapped.get_base_model().model.layers
    base = ol.perturbation_scores_naive(wrapped, ids, reasoning, answer, mode="last", pad_token_id=PAD)
    torch.testing.assert_close(ol.perturbation_scores(wrapped, ids, reasoning, answer, mode="last", pad_token_id=PAD),
                               base, rtol=1e-6, atol=1e-9)
    assert _decoder_layers(torch.nn.Linear(2, 2)) is None


def test_prefix_reuse_processes_fewer_tokens(llama, sequence):
    ids, reasoning, answer = sequence
    with_reuse, without = {}, {}
    ol.perturbation_scores(llama, ids, reasoning, answer, pad_token_id=PAD, batch_size=2, stats=with_reuse)
    ol.perturbation_scores(llama, ids, reasoning, answer, pad_token_id=PAD, batch_size=2,
                           reuse_prefix=False, stats=without)
    R, end = reasoning.stop - reasoning.start, answer.start
    assert without["forward_tokens"] == end + R * end
    assert with_reuse["forward_tokens"] < 0.75 * without["forward_tokens"]


def test_select_cache_fallback_equals_fast_path(llama, sequence):
    """`_select_cache` copies the selected rows of per-layer tensors (`_per_layer_copy`);
    caches it cannot read that way (older transformers, sliding-window layers) take the
    deepcopy + crop + batch_select path. A pass's keys and values (the selected rows and
    columns, then the pass's own) must be the same on both, and the source cache left as it was."""
    from oar_lite.attribution import _select_cache
    ids, _, _ = sequence
    with torch.no_grad():
        cache = llama(ids[None].repeat(3, 1), use_cache=True).past_key_values
    before = [(c.keys.clone(), c.values.clone()) for c in cache.layers]
    rows, length = torch.tensor([2, 0, 0, 1]), ids.numel() - 2
    fast = _select_cache(cache, rows, length)
    for layer in cache.layers:
        layer.is_sliding = True  # the fallback's condition; crop and batch_select do not read it
    slow = _select_cache(cache, rows, length)
    slow_repeated = _select_cache(cache, 2, length)
    for layer in cache.layers:
        layer.is_sliding = False
    assert slow is not cache and fast is not cache
    # An int b selects row 0 b times, on both paths.
    for selected, who in ((fast, rows), (slow, rows), (_select_cache(cache, 2, length), [0, 0]), (slow_repeated, [0, 0])):
        for i, (part, c) in enumerate(zip(selected.layers, cache.layers)):
            assert part.get_seq_length() == length
            new_keys = torch.randn(len(who), c.keys.shape[1], 3, c.keys.shape[-1], dtype=c.keys.dtype)
            new_values = torch.randn_like(new_keys)
            keys, values = part.update(new_keys, new_values, i)
            torch.testing.assert_close(keys, torch.cat([c.keys[who, :, :length], new_keys], dim=2), rtol=0, atol=0)
            torch.testing.assert_close(values, torch.cat([c.values[who, :, :length], new_values], dim=2),
                                       rtol=0, atol=0)
            assert part.get_seq_length() == length + 3  # the layer holds what it returned, as DynamicLayer does
    for (k, v), c in zip(before, cache.layers):
        assert c.keys.shape[2] == ids.numel()
        torch.testing.assert_close(c.keys, k, rtol=0, atol=0)
        torch.testing.assert_close(c.values, v, rtol=0, atol=0)


def test_perturbation_leaves_model_mode(sequence):
    model = tiny_llama().train()
    ids, reasoning, answer = sequence
    ol.perturbation_scores(model, ids, reasoning, answer, pad_token_id=PAD)
    assert model.training and all(m.training for m in model.modules())


def test_eval_mode_reaches_every_submodule_and_restores_each():
    """A model in eval mode with one submodule left in train mode (as after a user's
    ``model.layers[0].train()``) is all eval inside the block, and each module gets its own
    mode back after; an all-eval model is left alone (``eval()`` not called)."""
    model = tiny_llama().eval()
    model.model.layers[0].train()
    modes = [m.training for m in model.modules()]
    with ol.attribution.eval_mode(model):
        assert not any(m.training for m in model.modules())
    assert [m.training for m in model.modules()] == modes
    model.eval()
    model.eval = None  # calling it would raise
    with ol.attribution.eval_mode(model):
        assert not any(m.training for m in model.modules())


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


def _padded_rows(model_dtype_rows, left, right, seed=3, answer_lengths=(3, 3, 3)):
    """Three random rows with ``left`` / ``right`` padding each; spans into the padded rows."""
    g = torch.Generator().manual_seed(seed)
    lengths = [26, 30, 22]
    T = max(n + l + r for n, l, r in zip(lengths, left, right))
    ids = torch.full((3, T), PAD)
    attn = torch.zeros((3, T), dtype=torch.long)
    reasoning, answer = [], []
    for i, (n, p) in enumerate(zip(lengths, left)):
        ids[i, p:p + n] = torch.randint(3, VOCAB, (n,), generator=g)
        attn[i, p:p + n] = 1
        reasoning.append(slice(p + 4 + i, p + n - 6))
        answer.append(slice(p + n - 1 - answer_lengths[i], p + n - 1))
    return ids, attn, reasoning, answer


def _per_row(model, ids, attn, reasoning, answer, **kw):
    """OAR-G row by row, padding stripped, one generator for all rows (the per-row loop)."""
    out = []
    for i in range(ids.shape[0]):
        valid = ol.mask_to_span(attn[i].bool())
        off = valid.start
        out.append(ol.gradient_scores(model, ids[i, valid], slice(reasoning[i].start - off, reasoning[i].stop - off),
                                      slice(answer[i].start - off, answer[i].stop - off), **kw))
    return out


# Batched OAR-G equals per-row OAR-G up to rounding (different matrix shapes sum in a
# different order): rtol 1e-6 in float64; in float32 1e-3 of each row's largest score,
# since the KL modes' objective is second order in the noise and amplifies the rounding.
@pytest.mark.parametrize("padding", ["left", "right", "both"])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("make,dtype", [(tiny_llama, torch.float64), (tiny_gpt2, torch.float64),
                                        (tiny_llama, torch.float32)])
def test_gradient_scores_batch_equals_per_row(padding, mode, make, dtype):
    model = make(dtype=dtype)
    left = {"left": [2, 0, 5], "right": [0, 0, 0], "both": [2, 0, 5]}[padding]
    right = {"left": [3, 0, 8], "right": [4, 0, 8], "both": [3, 2, 1]}[padding]
    ids, attn, reasoning, answer = _padded_rows(model, left, right)
    if padding == "left":  # every row ends at the last column
        shift = [ids.shape[1] - int(attn[i].nonzero()[-1]) - 1 for i in range(3)]
        ids = torch.stack([row.roll(s) for row, s in zip(ids, shift)])
        attn = torch.stack([row.roll(s) for row, s in zip(attn, shift)])
        reasoning = [slice(r.start + s, r.stop + s) for r, s in zip(reasoning, shift)]
        answer = [slice(a.start + s, a.stop + s) for a, s in zip(answer, shift)]
    kw = dict(mode=mode, noise_std=1e-3)
    alone = _per_row(model, ids, attn, reasoning, answer, generator=torch.Generator().manual_seed(0), **kw)
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
    ids, attn, reasoning, answer = _padded_rows(llama, [2, 0, 5], [3, 2, 1])
    run = lambda seed: ol.gradient_scores_batch(llama, ids, attn, reasoning, answer,  # noqa: E731
                                                generator=torch.Generator().manual_seed(seed))
    for a, b, c in zip(run(1), run(1), run(2)):
        assert torch.equal(a, b)
        assert not torch.allclose(a, c)


def test_gradient_scores_batch_leaves_grads_requires_grad_and_modes():
    model = tiny_llama().train()
    model.model.layers[0].mlp.eval()  # a mixed state, to check every module's own flag is restored
    model.lm_head.weight.grad = torch.full_like(model.lm_head.weight, 0.5)
    model.model.embed_tokens.weight.requires_grad_(False)
    before = {n: (p.requires_grad, None if p.grad is None else p.grad.clone()) for n, p in model.named_parameters()}
    modes = [m.training for m in model.modules()]
    ids, attn, reasoning, answer = _padded_rows(model, [2, 0, 5], [3, 2, 1])
    for reuse_prefix in (True, False):
        ol.gradient_scores_batch(model, ids, attn, reasoning, answer, reuse_prefix=reuse_prefix)
    for n, p in model.named_parameters():
        requires_grad, grad = before[n]
        assert p.requires_grad == requires_grad, f"{n}.requires_grad changed"
        if grad is None:
            assert p.grad is None, f"{n}.grad was written"
        else:
            assert torch.equal(p.grad, grad), f"{n}.grad changed"
    assert [m.training for m in model.modules()] == modes


def test_token_weights_oar_g_runs_rows_in_one_pass(llama):
    """token_weights("oar-g") scores all rows in one batched pass: the LM head sees them all
    at once, and the scores equal gradient_scores_batch's with the same generator."""
    ids, attn, reasoning, answer = _padded_rows(llama, [2, 0, 5], [3, 2, 1])
    rm, am = torch.zeros_like(attn, dtype=torch.bool), torch.zeros_like(attn, dtype=torch.bool)
    for i, (r, a) in enumerate(zip(reasoning, answer)):
        rm[i, r], am[i, a] = True, True
    am[1] = False  # a row without an answer is not scored
    batch_sizes = []
    hook = llama.lm_head.register_forward_hook(lambda m, i, o: batch_sizes.append(o.shape[0]))
    try:
        _, scores = ol.token_weights(llama, ids, attn, rm, am, method="oar-g:last", return_scores=True,
                                     generator=torch.Generator().manual_seed(4))
    finally:
        hook.remove()
    assert set(batch_sizes) == {2} and len(batch_sizes) <= 3  # prompt prefix, clean pass, noisy pass
    assert scores[1] is None
    expected = ol.gradient_scores_batch(llama, ids[[0, 2]], attn[[0, 2]], [reasoning[0], reasoning[2]],
                                        [answer[0], answer[2]], mode="last", generator=torch.Generator().manual_seed(4))
    for got, want in zip([scores[0], scores[2]], expected):
        assert torch.equal(got, want)


def test_gradient_scores_batch_bad_input(llama):
    ids, attn, reasoning, answer = _padded_rows(llama, [0, 0, 0], [0, 0, 0])
    with pytest.raises(ValueError, match="one reasoning and one answer span per row"):
        ol.gradient_scores_batch(llama, ids, attn, reasoning[:2], answer)
    with pytest.raises(ValueError, match="must start at or after"):
        ol.gradient_scores_batch(llama, ids, attn, reasoning, [slice(5, 7)] * 3)
    with pytest.raises(ValueError, match=r"\[B, T\]"):
        ol.gradient_scores_batch(llama, ids[0], attn[0], reasoning, answer)


def _perturbation_per_row(model, ids, attn, reasoning, answer, **kw):
    """OAR-P row by row, padding stripped (the per-row path)."""
    out = []
    for i in range(ids.shape[0]):
        valid = ol.mask_to_span(attn[i].bool())
        off = valid.start
        out.append(ol.perturbation_scores(model, ids[i, valid], slice(reasoning[i].start - off, reasoning[i].stop - off),
                                          slice(answer[i].start - off, answer[i].stop - off), pad_token_id=PAD, **kw))
    return out


def _left_aligned_to_end(ids, attn, reasoning, answer):
    """The same rows moved right so that each ends at the last column (left padding only)."""
    shift = [ids.shape[1] - int(attn[i].nonzero()[-1]) - 1 for i in range(ids.shape[0])]
    return (torch.stack([row.roll(s) for row, s in zip(ids, shift)]),
            torch.stack([row.roll(s) for row, s in zip(attn, shift)]),
            [slice(r.start + s, r.stop + s) for r, s in zip(reasoning, shift)],
            [slice(a.start + s, a.stop + s) for a, s in zip(answer, shift)])


# Batched OAR-P equals per-row OAR-P up to rounding (padding, masked columns and other batch
# shapes sum in a different order): rtol 1e-6 in float64; in float32 1e-6 absolute, since a
# score is a difference of log-probabilities of size about log(V), each rounded to about
# 1e-7 of that size, whatever the score's own size (tiny on a random model).
@pytest.mark.parametrize("padding", ["left", "right", "both"])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("make,dtype", [(tiny_llama, torch.float64), (tiny_gpt2, torch.float64),
                                        (tiny_qwen2, torch.float64), (tiny_llama, torch.float32)])
def test_perturbation_scores_batch_equals_per_row(padding, mode, make, dtype):
    model = make(dtype=dtype)
    left = {"left": [2, 0, 5], "right": [0, 0, 0], "both": [2, 0, 5]}[padding]
    right = {"left": [3, 0, 8], "right": [4, 0, 8], "both": [3, 2, 1]}[padding]
    ids, attn, reasoning, answer = _padded_rows(model, left, right, answer_lengths=(3, 1, 4))
    if padding == "left":
        ids, attn, reasoning, answer = _left_aligned_to_end(ids, attn, reasoning, answer)
    alone = _perturbation_per_row(model, ids, attn, reasoning, answer, mode=mode)
    options_to_try = [{}, {"token_budget": 60, "batch_size": 2}]
    if make is tiny_llama and dtype == torch.float64:  # the other schedules, where the tests stay fast
        options_to_try += [{"token_budget": 1}, {"max_waste": 0.0}, {"reuse_prefix": False}]
    for options in options_to_try:
        batched = ol.perturbation_scores_batch(model, ids, attn, reasoning, answer, mode=mode, pad_token_id=PAD,
                                               **options)
        for a, b in zip(alone, batched):
            assert b.shape == a.shape and b.dtype == torch.float32 and (b >= 0).all()
            assert mode == "answer_joint" or a.max() > 0
            if dtype == torch.float64:
                torch.testing.assert_close(b, a, rtol=1e-6, atol=1e-9 * max(float(a.max()), 1e-6))
            else:
                assert float((b - a).abs().max()) <= 1e-6, options


@pytest.mark.parametrize("options", [{}, {"token_budget": 60}, {"token_budget": 1}, {"batch_size": 3},
                                     {"max_waste": 0.0}, {"max_waste": 0.5}])
def test_perturbation_scores_batch_work_and_pass_bounds(llama, options):
    """The copies run at most (1 + max_waste) x the ideal tokens (each from its own position),
    on top of the clean passes, and no pass holds more than the budget (cache included)."""
    ids, attn, reasoning, answer = _padded_rows(llama, [2, 0, 5], [3, 2, 1], answer_lengths=(3, 1, 4))
    stats = {}
    ol.perturbation_scores_batch(llama, ids, attn, reasoning, answer, mode="answer_mean", pad_token_id=PAD,
                                 stats=stats, **options)
    ends = [a.stop - 1 for a in answer]  # answer_mean reads up to the last answer token, exclusive
    ideal = sum(e - t for r, e in zip(reasoning, ends) for t in range(r.start, r.stop))
    lengths = [e - int(attn[i].nonzero()[0]) for i, e in enumerate(ends)]  # each row's x[:end]
    budget = options.get("token_budget", ol.attribution.default_token_budget("cpu"))
    clean_max = len(lengths) * max(lengths)  # the clean passes, left-padded to their group's longest row
    assert ideal + sum(lengths) <= stats["forward_tokens"]
    assert stats["forward_tokens"] <= clean_max + (1 + options.get("max_waste", ol.attribution.DEFAULT_MAX_WASTE)) * ideal
    assert stats["max_pass_held_tokens"] <= max(budget, max(lengths))
    rows = sum(r.stop - r.start for r in reasoning)
    if "batch_size" in options:
        assert stats["forward_passes"] >= rows / options["batch_size"]
    if options == {}:  # the default packs the three rows' copies into shared passes: fewer than row by row
        per_row = []
        for i in range(3):
            per_row.append({})
            _perturbation_per_row(llama, ids[i:i + 1], attn[i:i + 1], reasoning[i:i + 1], answer[i:i + 1],
                                  mode="answer_mean", stats=per_row[-1])
        assert stats["forward_passes"] <= sum(s["forward_passes"] for s in per_row) / 2


def test_perturbation_scores_batch_leaves_grads_requires_grad_and_modes():
    model = tiny_llama().train()
    model.model.layers[0].mlp.eval()  # a mixed state, to check every module's own flag is restored
    model.lm_head.weight.grad = torch.full_like(model.lm_head.weight, 0.5)
    model.model.embed_tokens.weight.requires_grad_(False)
    before = {n: (p.requires_grad, None if p.grad is None else p.grad.clone()) for n, p in model.named_parameters()}
    weights = {n: p.detach().clone() for n, p in model.named_parameters()}
    modes = [m.training for m in model.modules()]
    ids, attn, reasoning, answer = _padded_rows(model, [2, 0, 5], [3, 2, 1])
    for reuse_prefix in (True, False):
        ol.perturbation_scores_batch(model, ids, attn, reasoning, answer, pad_token_id=PAD, reuse_prefix=reuse_prefix)
    for n, p in model.named_parameters():
        requires_grad, grad = before[n]
        assert p.requires_grad == requires_grad, f"{n}.requires_grad changed"
        assert torch.equal(p.detach(), weights[n]), f"{n} changed"
        if grad is None:
            assert p.grad is None, f"{n}.grad was written"
        else:
            assert torch.equal(p.grad, grad), f"{n}.grad changed"
    assert [m.training for m in model.modules()] == modes


def test_token_weights_oar_p_packs_rows_into_shared_passes(llama):
    """token_weights("oar-p") scores the rows with perturbation_scores_batch: passes mix the
    copies of several rows, rows without an answer are skipped, and the scores equal the
    batched function's (and so the per-row ones, by the test above)."""
    ids, attn, reasoning, answer = _padded_rows(llama, [2, 0, 5], [3, 2, 1])
    ids = torch.cat([ids, ids[:1]])
    attn = torch.cat([attn, attn[:1]])
    reasoning, answer = reasoning + reasoning[:1], answer + answer[:1]
    rm, am = torch.zeros_like(attn, dtype=torch.bool), torch.zeros_like(attn, dtype=torch.bool)
    for i, (r, a) in enumerate(zip(reasoning, answer)):
        rm[i, r], am[i, a] = True, True
    am[1] = False  # a row without an answer is not scored
    batch_sizes = []
    hook = llama.lm_head.register_forward_hook(lambda m, i, o: batch_sizes.append(o.shape[0]))
    try:
        _, scores = ol.token_weights(llama, ids, attn, rm, am, method="oar-p:answer_joint", return_scores=True,
                                     pad_token_id=PAD)
    finally:
        hook.remove()
    scored = [0, 2, 3]
    copies = sum(reasoning[i].stop - reasoning[i].start for i in scored)
    assert scores[1] is None
    assert sum(batch_sizes) == len(scored) + copies  # clean rows + one copy per reasoning token
    per_row_passes = sum(len(ol.plan_chunks(r.start, r.stop, a.stop - 1, token_budget=4096)) + 1
                         for r, a in zip([reasoning[i] for i in scored], [answer[i] for i in scored]))
    assert len(batch_sizes) <= per_row_passes / 2
    expected = ol.perturbation_scores_batch(llama, ids[scored], attn[scored], [reasoning[i] for i in scored],
                                            [answer[i] for i in scored], mode="answer_joint", pad_token_id=PAD)
    for i, want in zip(scored, expected):
        assert torch.equal(scores[i], want)
    torch.testing.assert_close(scores[3], scores[0])  # the same row twice, in different passes


def test_perturbation_scores_batch_bad_input(llama):
    ids, attn, reasoning, answer = _padded_rows(llama, [0, 0, 0], [0, 0, 0])
    with pytest.raises(ValueError, match="one reasoning and one answer span per row"):
        ol.perturbation_scores_batch(llama, ids, attn, reasoning[:2], answer, pad_token_id=PAD)
    with pytest.raises(ValueError, match="must start at or after"):
        ol.perturbation_scores_batch(llama, ids, attn, reasoning, [slice(5, 7)] * 3, pad_token_id=PAD)
    with pytest.raises(ValueError, match="pad_token_id is required"):
        ol.perturbation_scores_batch(llama, ids, attn, reasoning, answer, pad_token_id=None)
    with pytest.raises(ValueError, match="token_budget must be >= 1"):
        ol.perturbation_scores_batch(llama, ids, attn, reasoning, answer, pad_token_id=PAD, token_budget=0)
    with pytest.raises(ValueError, match="no attended tokens"):
        ol.perturbation_scores_batch(llama, ids, torch.zeros_like(attn), reasoning, answer, pad_token_id=PAD)


def _sampled_rows(model, chars, seed=0):
    """Rows sampled from left-padded prompts of different lengths, with the sampling's KV
    cache, and reasoning / answer spans put by hand on rows with enough completion tokens
    (OAR-P does not read what the tokens mean)."""
    ro = ol.sample_completions(model, chars, ["12+5=", "7+30=4,", "1="], group_size=2, max_new_tokens=14,
                               seed=seed, keep_cache=True)
    P = ro.prompt_length
    reasoning_mask, answer_mask = torch.zeros_like(ro.attention_mask, dtype=torch.bool), torch.zeros_like(
        ro.attention_mask, dtype=torch.bool)
    for row in range(len(ro)):
        n = int(ro.completion_mask[row].sum())
        if n >= 6:
            reasoning_mask[row, P:P + n - 3] = True
            answer_mask[row, P + n - 2:P + n] = True
    return ro, reasoning_mask, answer_mask


@pytest.mark.parametrize("method", ["oar-p", "oar-g"])
@pytest.mark.parametrize("mode", MODES)
def test_sampled_cache_gives_the_clean_pass_scores(method, mode, chars):
    """With the sampling's KV cache OAR-P runs only the read positions of its clean pass
    (fewer tokens) and OAR-G its clean pass from the first read column, both taking the
    prompt's keys and values from the cache; the scores equal those computed without it, up
    to rounding (the sampling computed the cache token by token: rtol 1e-9 in float64, 1e-6
    for OAR-G, whose KL modes amplify rounding); a cache of other rows changes them, so the
    cache is read."""
    model = tiny_llama()
    ro, rm, am = _sampled_rows(model, chars)
    assert ro.cache is not None and ro.cache.get_seq_length() == ro.input_ids.shape[1] - 1
    assert am.any(dim=1).sum() >= 3 and len({int(m.sum()) for m in ro.attention_mask}) > 1
    results = {}
    B = len(ro)
    other_rows = ol.attribution._cache_rows(ro.cache, [(i + 2) % B for i in range(B)])  # other prompts' rows
    for name, cache in (("full", None), ("sampled", ro.cache), ("other", other_rows)):
        stats, options = {}, {}
        if method == "oar-p":
            options["stats"] = stats
        else:
            options["generator"] = torch.Generator().manual_seed(0)
        results[name] = (ol.token_weights(model, ro.input_ids, ro.attention_mask, rm, am, method=f"{method}:{mode}",
                                          pad_token_id=PAD, return_scores=True, sampled_cache=cache, **options)[1],
                         stats)
    (full, full_stats), (sampled, sampled_stats), (other, _) = results.values()
    scored = [i for i, s in enumerate(full) if s is not None]
    for i in scored:
        assert full[i].max() > 0
        torch.testing.assert_close(sampled[i], full[i], rtol=1e-9 if method == "oar-p" else 1e-6,
                                   atol=1e-12 * float(full[i].max()))
    assert any(not torch.allclose(other[i], full[i], rtol=1e-3) for i in scored)
    if method == "oar-p":
        assert sampled_stats["forward_tokens"] < full_stats["forward_tokens"]
        assert sampled_stats["forward_passes"] == full_stats["forward_passes"]


def test_sampled_cache_too_short_is_refused(chars):
    model = tiny_llama()
    ro, rm, am = _sampled_rows(model, chars)
    ro.cache.crop(-(ro.input_ids.shape[1] - 4))  # only 3 columns left
    for method in ("oar-p", "oar-g"):
        with pytest.raises(ValueError, match="sampled_cache holds 3 columns"):
            ol.token_weights(model, ro.input_ids, ro.attention_mask, rm, am, method=method, pad_token_id=PAD,
                             sampled_cache=ro.cache)


def test_uses_sampled_cache():
    assert ol.attribution.uses_sampled_cache("oar-p") and ol.attribution.uses_sampled_cache("inverted:oar-p:last")
    assert ol.attribution.uses_sampled_cache("oar-g:answer_mean")
    assert not ol.attribution.uses_sampled_cache("uniform") and not ol.attribution.uses_sampled_cache("entropy")


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
