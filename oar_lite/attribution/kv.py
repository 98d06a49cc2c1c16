"""KV-cache plumbing (continue from a cache; cut, repeat and shift its rows and columns) and
`last_layer_at_end`, which runs the last decoder layer's MLP only where P_final reads, for
the model types of `ARCHITECTURES`; other models run unchanged."""
from __future__ import annotations

import contextlib
import copy
import functools
import inspect
import operator
import warnings

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


def prefix_reusable(cache) -> bool:
    """Whether a pass can continue from ``cache`` cut back to an earlier column, its rows
    selected (`select_cache`, `cache_rows`): True when every layer holds keys and values per
    column (attention) or nothing; False when a layer holds a recurrent or convolution state
    (Mamba and linear-attention layers, transformers' ``LinearAttentionLayer``; older
    transformers' hybrid caches), which sums up all columns and cannot be cut back."""
    layers = getattr(cache, "layers", None)
    if layers is None:  # older transformers: the cache is one object
        return not hasattr(cache, "conv_states") and all(
            callable(getattr(cache, name, None)) for name in ("crop", "batch_select_indices"))
    return all(hasattr(layer, "keys") and not hasattr(layer, "conv_states") for layer in layers)


_TOLD_NO_REUSE: set = set()


def tell_no_prefix_reuse(model, scorer: str, tokens: int, with_reuse: int) -> None:
    """Warn, once per scorer and model class, that ``scorer`` ran its passes from the first
    column because the model's cache cannot be cut back (`prefix_reusable`), with the cost on
    this batch: ``tokens`` run instead of about ``with_reuse``."""
    key = (scorer, type(model).__name__)
    if key in _TOLD_NO_REUSE:
        return
    _TOLD_NO_REUSE.add(key)
    warnings.warn(f"{scorer}: {type(model).__name__}'s cache holds a recurrent or convolution state (Mamba or "
                  f"linear-attention layers), which cannot be cut back to an earlier column nor have its rows selected, so {scorer} runs its "
                  f"passes without reusing the prefix: on this batch {tokens} forward tokens instead of about "
                  f"{with_reuse} ({tokens / max(with_reuse, 1):.1f}x). Said once per model class.", stacklevel=3)


def select_cache(cache, rows: torch.Tensor, length: int):
    """A new KV cache with the rows ``rows`` (repeats allowed) of ``cache``, cut to its first
    ``length`` columns; ``cache`` itself is left as it is."""
    # One copy of the selected columns; the pass appends to new tensors. (Gathering the rows
    # straight into the tensor the pass's update returns, an index_select into a strided
    # slice, measured 2.5x slower than this gather plus the cache's concatenation.)
    selected = per_layer_copy(cache, lambda t: t[:, :, :length].index_select(0, rows))
    if selected is not None:
        return selected
    cache = copy.deepcopy(cache)  # older transformers (no per-layer tensors), sliding-window layers
    cache.crop(length - cache.get_seq_length())  # a negative argument removes tokens in every transformers version
    cache.batch_select_indices(rows)
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


ARCHITECTURES = {"llama": "model.layers", "qwen2": "model.layers", "gpt2": "transformer.h"}
"""By ``config.model_type``: where the decoder layers are (from the base model)."""


def decoder_layers(model) -> torch.nn.ModuleList | None:
    """The decoder layers of the model's type in `ARCHITECTURES` (under a peft wrapper too);
    None for other model types."""
    core = model.get_base_model() if hasattr(model, "get_base_model") else model  # peft's PeftModel
    path = ARCHITECTURES.get(getattr(getattr(core, "config", None), "model_type", None))
    try:
        return operator.attrgetter(path)(core)
    except (AttributeError, TypeError):  # another model type, or one of these built otherwise
        return None


@contextlib.contextmanager
def last_layer_at_end(model, keep: int):
    """Within the block, the last decoder layer's MLP runs only at the last ``keep`` positions
    of each forward pass, the ones ``logits_to_keep`` reads (zeros elsewhere). Exact for those
    logits: the layer's output elsewhere only feeds per-position norms and logits not
    computed, and its attention (keys and values, cached or attended to) still runs at every
    position. Models of other types than `ARCHITECTURES` run unchanged."""
    layers = decoder_layers(model)
    mlp = getattr(layers[-1], "mlp", None) if layers else None
    handles = []
    if mlp is not None:
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
