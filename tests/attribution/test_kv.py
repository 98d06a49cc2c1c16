"""`oar_lite.attribution.kv`: the last decoder layer's MLP runs only where P_final reads, looked up
by architecture; cache selection; continuing from the sampling's cache."""
import pytest
import torch
from conftest import PAD, covered, recorded, tiny_gpt2, tiny_llama, tiny_qwen2

import oar_lite as ol
from oar_lite.attribution import MODES



def positions(args, out) -> int:
    """How many positions a layer ran on (for `recorded`)."""
    return args[0].shape[1]


@pytest.mark.parametrize("make", [tiny_llama, tiny_gpt2])
def test_perturbation_runs_last_mlp_only_where_logits_are_read(make, sequence):
    """Both OAR-P paths run the last block's MLP only at the positions P_final reads (that the
    scores stay exact is checked against the naive loop above), and remove their hooks."""
    model = make()
    mlp = (model.model.layers if make is tiny_llama else model.transformer.h)[-1].mlp
    ids, reasoning, answer = sequence
    with recorded(mlp, positions) as lengths:
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
    assert not mlp._forward_hooks and not mlp._forward_pre_hooks


@pytest.mark.parametrize("make,attention", [(tiny_llama, "sdpa"), (tiny_llama, "eager"), (tiny_qwen2, "sdpa"),
                                            (tiny_gpt2, "sdpa")])
def test_last_mlp_cut_is_exact_on_each_architecture(make, attention, sequence):
    """With the last MLP cut (`last_layer_at_end`), both OAR-P paths, with and without prefix
    reuse, equal the naive loop on every architecture of `ARCHITECTURES` and attention
    implementation, and the hooks are gone afterwards."""
    model = make()
    model.config._attn_implementation = attention
    ids, reasoning, answer = sequence
    for mode in MODES:
        naive = ol.perturbation_scores_naive(model, ids, reasoning, answer, mode=mode, pad_token_id=PAD)
        for reuse_prefix in (True, False):
            fast = ol.perturbation_scores(model, ids, reasoning, answer, mode=mode, pad_token_id=PAD,
                                          reuse_prefix=reuse_prefix)
            torch.testing.assert_close(fast, naive, rtol=1e-6, atol=1e-9)
    block = (model.transformer.h if make is tiny_gpt2 else model.model.layers)[-1]
    assert not any(m._forward_hooks or m._forward_pre_hooks for m in block.modules())


def test_last_layer_cut_finds_the_decoder_layers_by_architecture(sequence):
    """The last-layer cut hooks the decoder's own last layer, found where the model type keeps
    it (`ARCHITECTURES`): not another list of as many blocks with an ``mlp`` registered after it
    (which would leave the real last layer whole and zero a decoy's output), also under a peft
    LoRA wrapper; OAR-P stays exact. Other model types are left as they are."""
    from peft import LoraConfig, get_peft_model

    from oar_lite.attribution.kv import decoder_layers

    ids, reasoning, answer = sequence
    model = tiny_llama()
    model.decoy = torch.nn.ModuleList([tiny_llama().model.layers[0] for _ in model.model.layers])  # never called
    assert decoder_layers(model) is model.model.layers
    assert decoder_layers(tiny_gpt2()) is not None
    naive = ol.perturbation_scores_naive(model, ids, reasoning, answer, mode="last", pad_token_id=PAD)
    with recorded(model.model.layers[-1].mlp, positions) as lengths:
        torch.testing.assert_close(ol.perturbation_scores(model, ids, reasoning, answer, mode="last", pad_token_id=PAD),
                                   naive, rtol=1e-6, atol=1e-9)
    assert lengths and set(lengths) == {1}
    wrapped = get_peft_model(tiny_llama(), LoraConfig(r=2, target_modules=["q_proj", "k_proj", "v_proj"]))
    assert decoder_layers(wrapped) is wrapped.get_base_model().model.layers
    base = ol.perturbation_scores_naive(wrapped, ids, reasoning, answer, mode="last", pad_token_id=PAD)
    torch.testing.assert_close(ol.perturbation_scores(wrapped, ids, reasoning, answer, mode="last", pad_token_id=PAD),
                               base, rtol=1e-6, atol=1e-9)
    assert decoder_layers(torch.nn.Linear(2, 2)) is None
    unknown = tiny_llama()
    unknown.config.model_type = "mistral"  # not in ARCHITECTURES: runs unchanged
    assert decoder_layers(unknown) is None


def test_select_cache_fallback_equals_fast_path(llama, sequence):
    """`_select_cache` copies the selected rows of per-layer tensors (`_per_layer_copy`);
    caches it cannot read that way (older transformers, sliding-window layers) take the
    deepcopy + crop + batch_select path. A pass's keys and values (the selected rows and
    columns, then the pass's own) must be the same on both, and the source cache left as it was."""
    from oar_lite.attribution.kv import select_cache
    ids, _, _ = sequence
    with torch.no_grad():
        cache = llama(ids[None].repeat(3, 1), use_cache=True).past_key_values
    before = [(c.keys.clone(), c.values.clone()) for c in cache.layers]
    rows, length = torch.tensor([2, 0, 0, 1]), ids.numel() - 2
    fast = select_cache(cache, rows, length)
    for layer in cache.layers:
        layer.is_sliding = True  # the fallback's condition; crop and batch_select do not read it
    slow = select_cache(cache, rows, length)
    for layer in cache.layers:
        layer.is_sliding = False
    assert slow is not cache and fast is not cache
    for selected, who in ((fast, rows), (slow, rows)):
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


@pytest.mark.parametrize("mode,method", covered(MODES, ["oar-p", "oar-g"]))
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
    other_rows = ol.attribution.kv.cache_rows(ro.cache, [(i + 2) % B for i in range(B)])  # other prompts' rows
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
