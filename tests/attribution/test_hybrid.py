"""OAR-P and OAR-G on models whose cache cannot be cut back or row-selected (a hybrid
Mamba/attention model): the scorers run their passes without prefix reuse, say so once with
the cost, and give the scores of each row alone; on an attention model that fallback gives
the weights of the reuse path."""
import pytest
import torch
from conftest import PAD, padded_rows, rows_alone, span_masks, tiny_hybrid, tiny_llama

import oar_lite as ol
from oar_lite.attribution import kv, oar_g, oar_p


@pytest.fixture
def told(monkeypatch):
    """A fresh record of the one-time warnings (each test sees its own)."""
    fresh = set()
    monkeypatch.setattr(kv, "_TOLD_NO_REUSE", fresh)
    return fresh


def test_prefix_reusable_tells_attention_caches_from_recurrent_ones():
    ids = torch.randint(3, 40, (2, 6), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        attention = tiny_llama()(input_ids=ids, use_cache=True).past_key_values
        hybrid = tiny_hybrid()(input_ids=ids, use_cache=True).past_key_values
    assert kv.prefix_reusable(attention)
    assert [type(layer).__name__ for layer in hybrid.layers] == ["LinearAttentionLayer", "DynamicLayer", "DummyLayer"]
    assert not kv.prefix_reusable(hybrid)


@pytest.mark.parametrize("mode", ol.MODES)
def test_hybrid_model_scores_equal_each_row_alone_and_warn_once(told, mode):
    """Left and right padding, rows sharing no prefix length: the batched scorers, which cannot
    reuse the prefix here, give each row's scores alone (the naive loop for OAR-P)."""
    model = tiny_hybrid()
    ids, attn, reasoning, answer = padded_rows(None, left=[3, 0, 5], right=[0, 4, 1])
    with pytest.warns(UserWarning, match=r"OAR-P: NemotronHForCausalLM's cache holds a recurrent.*forward tokens "
                                         r"instead of about \d+ \(\d+\.\dx\)"):
        batched = ol.perturbation_scores_batch(model, ids, attn, reasoning, answer, mode=mode, pad_token_id=PAD)
    alone = rows_alone(ol.perturbation_scores_naive, model, ids, attn, reasoning, answer, mode=mode, pad_token_id=PAD)
    for b, a in zip(batched, alone):
        torch.testing.assert_close(b, a, rtol=1e-6, atol=1e-9)
    assert max(float(a.max()) for a in alone) > 0  # the scores are not all zero: the check can fail
    with pytest.warns(UserWarning, match=r"OAR-G: NemotronHForCausalLM"):
        batched = ol.gradient_scores_batch(model, ids, attn, reasoning, answer, mode=mode,
                                           generator=torch.Generator().manual_seed(4))
    alone = rows_alone(ol.gradient_scores, model, ids, attn, reasoning, answer, mode=mode,
                       generator=torch.Generator().manual_seed(4))
    for b, a in zip(batched, alone):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-12)
    assert told == {("OAR-P", "NemotronHForCausalLM"), ("OAR-G", "NemotronHForCausalLM")}
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said once per scorer and model class
        ol.perturbation_scores_batch(model, ids, attn, reasoning, answer, mode=mode, pad_token_id=PAD)


@pytest.mark.parametrize("method", ["oar-p", "oar-g"])
def test_fallback_without_prefix_reuse_gives_the_reuse_paths_weights(told, monkeypatch, method):
    """On an attention-only model (whose cache can be reused) the path taken when a cache
    cannot be cut back gives the weights of the prefix-reusing path."""
    model = tiny_llama()
    ids, attn, reasoning, answer = padded_rows(None, left=[3, 0, 5], right=[0, 4, 1])
    reasoning_mask, answer_mask = span_masks(attn, reasoning, answer)

    def weights(**kw):
        return ol.token_weights(model, ids, attn, reasoning_mask, answer_mask, method=method, pad_token_id=PAD,
                                generator=torch.Generator().manual_seed(2), **kw)

    stats_reuse, stats_fallback = {}, {}
    reused = weights(**({"stats": stats_reuse} if method == "oar-p" else {}))
    assert not told  # an attention cache: no fallback
    monkeypatch.setattr(oar_p, "prefix_reusable", lambda cache: False)
    monkeypatch.setattr(oar_g, "prefix_reusable", lambda cache: False)
    with pytest.warns(UserWarning, match=f"{method.upper()}: LlamaForCausalLM"):
        fallback = weights(**({"stats": stats_fallback} if method == "oar-p" else {}))
    torch.testing.assert_close(fallback, reused, rtol=1e-6, atol=1e-9)
    assert (reused[reasoning_mask] - 1).abs().max() > 0.05  # OAR reshaped: the comparison can fail
    if method == "oar-p":  # the fallback ran every copy from the first column: more tokens
        assert stats_fallback["forward_tokens"] > stats_reuse["forward_tokens"]
