"""KV-cache plumbing (continue from a cache; cut, repeat and shift its rows and columns) and
`last_layer_at_end`, which runs the last decoder layer only where P_final reads, for the
model types of `ARCHITECTURES`; other models run unchanged."""
from __future__ import annotations

import contextlib
import copy
import functools
import inspect
import operator
import sys

import torch
import torch.nn.functional as F


@functools.lru_cache(maxsize=None)
def cache_argument(model_class: type) -> str:
    """The forward argument of ``model_class`` that takes a KV cache: ``cache`` (newer
    transformers) or ``past_key_values``; looked up once per class, not per pass."""
    return "cache" if "cache" in inspect.signature(model_class.forward).parameters else "past_key_values"


def cache_kwargs(model, cache) -> dict:
    """Forward keywords that continue from ``cache`` (and keep the new keys and values), or,
    for ``cache=None``, that keep no cache."""
    if cache is None:
        return {"use_cache": False}
    base = model.get_base_model() if hasattr(model, "get_base_model") else model  # peft's PeftModel
    return {cache_argument(type(base)): cache, "use_cache": True}


def select_cache(cache, rows: torch.Tensor | int, length: int):
    """A new KV cache with the rows ``rows`` (repeats allowed; an int b: row 0 b times, as a
    view that the pass's own update copies once) of ``cache``, cut to its first ``length``
    columns; ``cache`` itself is left as it is."""
    # One copy of the selected columns; the pass appends to new tensors. (Gathering the rows
    # straight into the tensor the pass's update returns, an index_select into a strided
    # slice, measured 2.5x slower than this gather plus the cache's concatenation.)
    selected = per_layer_copy(cache, lambda t: t[:1, :, :length].expand(rows, -1, -1, -1) if isinstance(rows, int)
                               else t[:, :, :length].index_select(0, rows))
    if selected is not None:
        return selected
    cache = copy.deepcopy(cache)  # older transformers (no per-layer tensors), sliding-window layers
    cache.crop(length - cache.get_seq_length())  # a negative argument removes tokens in every transformers version
    cache.batch_select_indices(torch.zeros(rows, dtype=torch.long) if isinstance(rows, int) else rows)
    return cache


def per_layer_copy(cache, transform):
    """A copy of ``cache`` whose layers hold ``transform(t)`` of their keys and values (``cache``
    is left as it is); None if its layers hold no per-layer tensors (older transformers) or
    slide (sliding-window layers)."""
    layers = getattr(cache, "layers", None)
    if not layers or not all(getattr(layer, "keys", None) is not None and not getattr(layer, "is_sliding", False)
                             for layer in layers):
        return None
    copied = copy.copy(cache)
    copied.layers = [copy.copy(layer) for layer in layers]
    for part in copied.layers:
        part.keys, part.values = transform(part.keys), transform(part.values)
    return copied


def check_sampled_cache(cache, need: int) -> None:
    """Raises ValueError unless the sampling's ``cache`` holds at least ``need`` columns."""
    if cache.get_seq_length() < need:
        raise ValueError(f"sampled_cache holds {cache.get_seq_length()} columns, but the clean pass needs its first "
                         f"{need}: it must be the cache of a forward over these rows (at least their first T - 1 "
                         f"columns)")


def frame_cache(cache, shifts: list[int], length: int, rows: list[int]):
    """A KV cache of frame columns ``0..length-1`` of the rows ``rows`` of ``cache``, each row
    shifted: frame column f of row ``rows[j]`` is ``cache``'s column ``f + shifts[j]`` (columns
    before a row's first token hold other columns' values, which the frame's mask hides).
    None where `per_layer_copy` cannot read ``cache``.

    Raises:
        ValueError: ``cache`` does not reach a column the frame needs.
    """
    check_sampled_cache(cache, length + max(shifts))
    columns = (torch.arange(length)[None] + torch.tensor(shifts)[:, None]).clamp(min=0)  # [len(rows), length]
    who = torch.tensor(rows)

    def framed(t):  # [N, h, have, d] -> [len(rows), h, length, d]
        index = columns.to(t.device)[:, None, :, None].expand(len(rows), t.shape[1], length, t.shape[-1])
        return t.index_select(0, who.to(t.device)).gather(2, index)
    return per_layer_copy(cache, framed)


def cache_rows(cache, rows: list[int]):
    """A KV cache of the rows ``rows`` of ``cache``; None where `per_layer_copy` cannot read it."""
    who = torch.tensor(rows)
    return per_layer_copy(cache, lambda t: t.index_select(0, who.to(t.device)))


class PrefixKV:
    """Stands in for the KV cache (or its absence, ``cache=None``) in one attention call:
    ``update`` puts the given keys and values ``[b, h, n, d]`` before the call's own, then
    passes both on to ``cache``."""

    def __init__(self, cache, keys: torch.Tensor, values: torch.Tensor):
        self.cache, self.keys, self.values = cache, keys, values

    def update(self, keys, values, *args, **kwargs):
        keys, values = torch.cat([self.keys, keys], dim=-2), torch.cat([self.values, values], dim=-2)
        return (keys, values) if self.cache is None else self.cache.update(keys, values, *args, **kwargs)


ARCHITECTURES = {"llama": ("model.layers", True), "qwen2": ("model.layers", True), "gpt2": ("transformer.h", False)}
"""By ``config.model_type``: where the decoder layers are (from the base model), and whether a
layer is input norm, attention (keys ``k_proj`` + rotary by ``rotate_half``, values
``v_proj``), residual, norm, MLP, residual, so `layer_at_end` can run it whole at the end
(else its MLP alone runs there)."""


def layer_at_end(model, block, keep: int) -> list:
    """A hook on ``block`` (the last decoder layer) that runs the whole layer only at the
    last ``keep`` positions: the keys and values of the other positions are computed here
    (``input_layernorm``, ``k_proj`` / ``v_proj``, rotary) and put before the layer's own
    (`PrefixKV`), so the layer returns ``[b, keep, d]`` and the final norm runs there too.
    ``[]`` (nothing changed) for other attention implementations or sliding-window layers."""
    attn, config = getattr(block, "self_attn", None), model.config
    rotate_half = getattr(sys.modules.get(type(attn).__module__), "rotate_half", None)
    if (rotate_half is None
            or getattr(config, "_attn_implementation", None) not in ("sdpa", "eager")
            or getattr(attn, "sliding_window", None) is not None
            or not all(hasattr(attn, name) for name in ("k_proj", "v_proj", "head_dim", "layer_idx"))
            or not hasattr(block, "input_layernorm")):
        return []

    def before(module, args, kwargs):
        x = args[0] if args else kwargs.get("hidden_states")
        cos, sin = kwargs.get("position_embeddings") or (None, None)
        name = next((n for n in ("cache", "past_key_values") if n in kwargs), None)
        rest = x.shape[1] - keep if x is not None and x.dim() == 3 else 0
        if len(args) > 1 or rest <= 0 or cos is None or name is None:
            return None
        shape = (x.shape[0], rest, -1, attn.head_dim)
        normed = module.input_layernorm(x[:, :rest])
        keys = attn.k_proj(normed).view(shape).transpose(1, 2)
        values = attn.v_proj(normed).view(shape).transpose(1, 2)
        c, s = cos[:, :rest].unsqueeze(1), sin[:, :rest].unsqueeze(1)
        keys = keys * c + rotate_half(keys) * s  # the model's apply_rotary_pos_emb, keys only
        cache, mask = kwargs[name], kwargs.get("attention_mask")
        past = cache.get_seq_length(attn.layer_idx) if cache is not None else 0
        if mask is not None:
            mask = mask[..., -keep:, :]
        elif keep > 1:  # no mask means causal: query i of the last keep sees keys up to its own position
            total = past + rest + keep
            mask = (torch.arange(total, device=x.device) <= torch.arange(total - keep, total, device=x.device)[:, None])
            if config._attn_implementation == "eager":  # eager adds the mask
                mask = torch.zeros(mask.shape, dtype=x.dtype, device=x.device).masked_fill(~mask, torch.finfo(x.dtype).min)
            mask = mask[None, None]
        short = {"hidden_states": x[:, rest:], "position_embeddings": (cos[:, rest:], sin[:, rest:]),
                 "attention_mask": mask, name: PrefixKV(cache, keys, values)}
        if torch.is_tensor(kwargs.get("position_ids")):
            short["position_ids"] = kwargs["position_ids"][..., rest:]
        return (), {**kwargs, **short}

    return [block.register_forward_pre_hook(before, with_kwargs=True)]


def decoder_layers(model) -> tuple[torch.nn.ModuleList, bool] | None:
    """``(layers, whole_layer)`` of the model's type in `ARCHITECTURES` (under a peft wrapper
    too); None for other model types."""
    core = model.get_base_model() if hasattr(model, "get_base_model") else model  # peft's PeftModel
    path, whole = ARCHITECTURES.get(getattr(getattr(core, "config", None), "model_type", None), (None, False))
    try:
        return operator.attrgetter(path)(core), whole
    except (AttributeError, TypeError):  # another model type, or one of these built otherwise
        return None


@contextlib.contextmanager
def last_layer_at_end(model, keep: int):
    """Within the block, the last decoder layer runs only at the last ``keep`` positions of
    each forward pass, the ones ``logits_to_keep`` reads: the whole layer and the final norm
    where `ARCHITECTURES` allows it (`layer_at_end`: its output is ``[b, keep, d]``), else
    its MLP (zeros elsewhere). Exact for those logits: the layer's output elsewhere only
    feeds per-position norms and logits not computed, and the keys and values (cached or
    attended to) are still computed at every position. Models of other types run unchanged."""
    layers, whole = decoder_layers(model) or ([None], False)
    mlp = getattr(layers[-1], "mlp", None)
    handles = layer_at_end(model, layers[-1], keep) if mlp is not None and whole else []
    if mlp is not None and not handles:  # the MLP alone, zero-padded back to full length
        lengths = []  # per call: the positions cut away (0: left as it was)

        def before(module, args):
            x = args[0]
            lengths.append(x.shape[1] - keep if x.dim() == 3 and x.shape[1] > keep else 0)
            return (x[:, -keep:].contiguous(), *args[1:]) if lengths[-1] else None

        handles = [mlp.register_forward_pre_hook(before),
                   mlp.register_forward_hook(lambda module, args, out: F.pad(out, (0, 0, lengths.pop(), 0)))]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()
