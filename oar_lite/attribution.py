"""Token importance for credit assignment: OAR-P, OAR-G and baselines (spec sections 3-5;
notebooks 02 and 03 build them step by step).

Every scorer shares one calling convention (as Captum's attribution methods do)::

    scorer(model, input_ids [T], reasoning, answer, **options) -> scores [R]

``input_ids`` is one unpadded sequence (prompt + completion), ``reasoning`` and ``answer``
half-open `slice`s into it, R the reasoning length; a larger score means the token moves the
final answer more. `SCORERS` holds them by name. A method name may add a P_final mode
(``"oar-p:answer_joint"``, one of `MODES`, spec section 3) and control prefixes
(``"inverted:"``, ``"shuffled:"``, `oar_lite.oracle`). `token_weights` is the batched entry
point the trainers call, `CreditConfig` its settings.
"""
from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import inspect
import sys
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F

from .checks import check_number
from .oracle import (CONTROLS, apply_controls, oracle_scores, pivotal_oracle_scores, relevance_oracle_scores,
                     split_controls)
from .reshape import bilevel_weights

MODES = ("last", "answer_mean", "answer_joint")


# ----------------------------------------------------------------------------- checks

def _check_sequence(input_ids: torch.Tensor, reasoning: slice, answer: slice) -> None:
    if not torch.is_tensor(input_ids) or input_ids.dim() != 1:
        shape = tuple(input_ids.shape) if torch.is_tensor(input_ids) else type(input_ids).__name__
        raise ValueError(f"input_ids must be a 1-D tensor [T] (one unpadded sequence), got {shape}")
    T = input_ids.numel()
    for name, span in (("reasoning", reasoning), ("answer", answer)):
        if not isinstance(span, slice) or span.step not in (None, 1):
            raise ValueError(f"{name} must be a slice(start, stop) with unit step, got {span!r}")
        if span.start is None or span.stop is None:
            raise ValueError(f"{name} must have explicit start and stop, got {span!r}")
        if not 0 <= span.start < span.stop <= T:
            raise ValueError(f"{name} span {span.start}:{span.stop} is empty or out of range for a sequence of {T} tokens")
    if answer.start < reasoning.stop:
        raise ValueError(f"answer ({answer.start}:{answer.stop}) must start at or after the end of "
                         f"reasoning ({reasoning.start}:{reasoning.stop})")
    if answer.start < 1:
        raise ValueError("answer must not start at position 0: P_final is predicted from the tokens before it")


def _check_mode(mode: str) -> None:
    if mode not in MODES:
        raise ValueError(f"unknown P_final mode {mode!r}; expected one of {MODES}")


@contextlib.contextmanager
def eval_mode(model: torch.nn.Module):
    """Put every submodule in eval mode (no dropout) and restore each one's mode after."""
    modes = [(m, m.training) for m in model.modules()]
    if any(training for _, training in modes):  # eval() walks every module: skip it when it would change nothing
        model.eval()
    try:
        yield model
    finally:
        for m, training in modes:
            if m.training != training:
                m.training = training


# ----------------------------------------------------------------------------- P_final

def _outcome_span(answer: slice, mode: str) -> tuple[int, int]:
    """(end, keep): the model reads ``x[:end]`` and P_final needs its last ``keep`` logits."""
    if mode == "last":
        return answer.start, 1
    return answer.stop - 1, answer.stop - answer.start


def _upcast(x: torch.Tensor) -> torch.Tensor:
    """At least float32 (half-precision logits lose small KL values), float64 kept."""
    return x.to(torch.promote_types(x.dtype, torch.float32))


def _outcome(logits: torch.Tensor, answer_ids: torch.Tensor, mode: str) -> torch.Tensor:
    """P_final from ``logits [b, keep, V]`` (as `_outcome_span` says) and ``answer_ids [A]``:
    ``[b, V]`` log-probabilities (``last``, ``answer_mean``) or ``[b]`` phi (``answer_joint``)."""
    logits = _upcast(logits)
    if mode == "last":
        return F.log_softmax(logits[:, -1], dim=-1)
    if mode == "answer_mean":
        return F.log_softmax(logits.mean(dim=1), dim=-1)
    logp = F.log_softmax(logits, dim=-1)
    return logp.gather(-1, answer_ids.expand(logits.shape[0], -1).unsqueeze(-1)).squeeze(-1).mean(dim=1)


def _divergence(clean: torch.Tensor, changed: torch.Tensor, mode: str) -> torch.Tensor:
    """``[b]`` KL(P || P~) from log-probs ``[1 or b, V]``, or ``phi - phi~`` for ``answer_joint``."""
    if mode == "answer_joint":
        return clean - changed
    return (clean.exp() * (clean - changed)).sum(-1)


@functools.lru_cache(maxsize=None)
def _cache_kwarg(model_class: type) -> str:
    """The forward argument of ``model_class`` that takes a KV cache: ``cache`` (newer
    transformers) or ``past_key_values``; looked up once per class, not per pass."""
    return "cache" if "cache" in inspect.signature(model_class.forward).parameters else "past_key_values"


def _cache_kwargs(model, cache) -> dict:
    """Forward keywords that continue from ``cache`` (and keep the new keys and values), or,
    for ``cache=None``, that keep no cache."""
    if cache is None:
        return {"use_cache": False}
    base = model.get_base_model() if hasattr(model, "get_base_model") else model  # peft's PeftModel
    return {_cache_kwarg(type(base)): cache, "use_cache": True}


def _output_cache(out):
    """The KV cache a forward pass returned (``out.cache``, or the older ``past_key_values``)."""
    cache = getattr(out, "cache", None)
    return out.past_key_values if cache is None else cache


def _final_logits(model, *, input_ids=None, inputs_embeds=None, keep: int, cache=None) -> torch.Tensor:
    """``[b, keep, V]``: the last ``keep`` logits, the LM head applied to those positions only."""
    out = model(input_ids=input_ids, inputs_embeds=inputs_embeds, logits_to_keep=keep, **_cache_kwargs(model, cache))
    return out.logits[:, -keep:]


def final_outcome(model, input_ids: torch.Tensor, answer: slice, *, mode: str = "last") -> torch.Tensor:
    """P_final of one sequence (no grad): ``[V]`` log-probs, or a 0-d phi for ``answer_joint``."""
    _check_mode(mode)
    end, keep = _outcome_span(answer, mode)
    with torch.no_grad(), eval_mode(model):
        logits = _final_logits(model, input_ids=input_ids[None, :end], keep=keep)
    return _outcome(logits, input_ids[answer], mode)[0]


# ----------------------------------------------------------------------------- OAR-P

DEFAULT_TOKEN_BUDGET = {"cpu": 4096, "cuda": 65536}
"""Tokens per OAR-P forward pass by device type (perturbed copies x their length); others: the CPU's."""

DEFAULT_MAX_WASTE = 0.15
"""OAR-P's default extra token work, as a fraction of the ideal (each copy starting at its own
position). More waste buys fewer, larger passes: on one sequence of a small model, where a
forward pass costs mostly its fixed overhead, 0.15 takes 10-17% less time than 0.1; on SmolLM2,
where a pass costs its tokens, and in training's batched passes, bound by the token budget, the
two take the same time (benchmarks/RESULTS.md, "OAR-P implementations" and "Step cost")."""


def default_token_budget(device: torch.device | str) -> int:
    """OAR-P's tokens per forward pass on ``device``: small on a CPU, where a pass of a few
    thousand tokens already runs at full speed per token and larger ones only add memory;
    large on a GPU, whose parallelism needs big batches (`DEFAULT_TOKEN_BUDGET`)."""
    return DEFAULT_TOKEN_BUDGET.get(torch.device(device).type, DEFAULT_TOKEN_BUDGET["cpu"])


def _largest_fitting(fits, low: int, high: int) -> int:
    """The largest ``x`` in ``[low, high]`` with ``fits(x)``, by bisection: ``fits`` must hold
    at ``low`` and, once false, stay false for larger ``x``."""
    while low < high:
        mid = (low + high + 1) // 2
        if fits(mid):
            low = mid
        else:
            high = mid - 1
    return low


def plan_chunks(first: int, stop: int, end: int, *, token_budget: int, max_waste: float = DEFAULT_MAX_WASTE,
                max_rows: int | None = None, reuse_prefix: bool = True) -> list[tuple[int, int]]:
    """How OAR-P groups the perturbed copies of positions ``first..stop-1`` into forward passes.

    With prefix reuse a chunk of b consecutive positions from t0 continues from the clean KV
    cache of ``x[:t0]`` and wastes ``b (b - 1) / 2`` tokens wherever it lies, so the fewest
    passes for a given waste come from chunks of one size: the largest whose chunks waste
    at most ``max_waste`` times the ideal count (every copy from its own position). A chunk
    is also cut to ``token_budget`` tokens (``b * (end - t0)``) and ``max_rows`` copies; one
    copy longer than the budget still runs, alone.

    Returns:
        ``[(start, stop), ...]`` half-open ranges of consecutive positions, in order.
    """
    if token_budget < 1 or max_waste < 0 or (max_rows is not None and max_rows < 1):
        raise ValueError(f"expected token_budget >= 1, max_waste >= 0 and max_rows >= 1 or None, got "
                         f"{token_budget}, {max_waste}, {max_rows}")
    if not 0 <= first < stop <= end:
        raise ValueError(f"expected 0 <= first < stop <= end, got {first}, {stop}, {end}")
    ideal = sum(end - t for t in range(first, stop))

    def chunks_of(size: int) -> tuple[list[tuple[int, int]], int]:
        chunks, start, waste = [], first, 0
        while start < stop:
            length = end - start if reuse_prefix else end  # tokens each copy of this chunk runs
            b = max(1, min(size, stop - start, token_budget // length, max_rows or size))
            chunks.append((start, start + b))
            waste += b * (b - 1) // 2 if reuse_prefix else 0
            start += b
        return chunks, waste

    # The waste grows with the size; size 1 wastes nothing, so it always fits.
    return chunks_of(_largest_fitting(lambda size: chunks_of(size)[1] <= max_waste * ideal, 1, stop - first))[0]


def perturbation_scores(
    model,
    input_ids: torch.Tensor,
    reasoning: slice,
    answer: slice,
    *,
    mode: str = "last",
    pad_token_id: int,
    batch_size: int | None = None,
    token_budget: int | None = None,
    max_waste: float = DEFAULT_MAX_WASTE,
    reuse_prefix: bool = True,
    stats: dict | None = None,
) -> torch.Tensor:
    """OAR-P (spec section 4) of one sequence: how much P_final (section 3) changes when each
    reasoning token in turn is replaced by ``pad_token_id`` (attention kept on it).

    The R perturbed copies run in chunks of consecutive positions (`plan_chunks`), each
    continuing from the clean prefix's KV cache, at most ``1 + max_waste`` times the ideal
    token count; the last layer runs only where P_final reads (`_last_layer_at_end`).
    `perturbation_scores_naive` is the reference, `perturbation_scores_batch` the padded-batch form.

    Args:
        model: a causal LM (``transformers``-style, accepting ``logits_to_keep``).
        input_ids: ``[T]`` one sequence, prompt + completion, no padding.
        reasoning, answer: half-open spans into ``input_ids``; reasoning ends at or
            before the answer starts.
        mode: one of `MODES`.
        pad_token_id: the replacement token.
        batch_size: at most this many copies per pass (None: the token budget decides).
        token_budget: at most this many tokens per pass, which bounds the memory; None:
            `default_token_budget` of the model's device.
        max_waste: extra token work allowed, as a fraction of the ideal (0: one copy per pass).
        reuse_prefix: continue from the clean prefix's KV cache (False: every copy from 0).
        stats: if a dict, receives ``forward_tokens`` (cached prefixes excluded),
            ``forward_passes`` and ``max_pass_tokens``.

    Returns:
        ``[R]`` float32 scores, >= 0.

    Raises:
        ValueError: bad spans, mode, ``batch_size`` or a missing ``pad_token_id``.
    """
    _check_sequence(input_ids, reasoning, answer)
    _check_mode(mode)
    if batch_size is not None and batch_size < 1:
        raise ValueError(f"batch_size must be >= 1 or None, got {batch_size}")
    if pad_token_id is None:
        raise ValueError("pad_token_id is required: the token that replaces each reasoning token")
    if token_budget is None:
        token_budget = default_token_budget(next(model.parameters()).device)
    end, keep = _outcome_span(answer, mode)
    chunks = plan_chunks(reasoning.start, reasoning.stop, end, token_budget=token_budget, max_waste=max_waste,
                         max_rows=batch_size, reuse_prefix=reuse_prefix)
    answer_ids = input_ids[answer]
    scores = []
    with torch.no_grad(), eval_mode(model), _last_layer_at_end(model, keep):
        out = model(input_ids=input_ids[None, :end], use_cache=reuse_prefix, logits_to_keep=keep)
        clean = _outcome(out.logits[:, -keep:], answer_ids, mode)
        clean_cache = _output_cache(out) if reuse_prefix else None
        tokens, passes, widest = end, 1, end
        for first, stop in chunks:
            b = stop - first
            start = first if reuse_prefix else 0
            cache = _select_cache(clean_cache, b, start) if start > 0 else None
            variants = input_ids[start:end].repeat(b, 1)
            variants[torch.arange(b), torch.arange(first - start, stop - start)] = pad_token_id
            logits = _final_logits(model, input_ids=variants, keep=keep, cache=cache)
            scores.append(_divergence(clean, _outcome(logits, answer_ids, mode), mode))
            tokens, passes, widest = tokens + b * (end - start), passes + 1, max(widest, b * (end - start))
    if stats is not None:
        stats.update(forward_tokens=tokens, forward_passes=passes, max_pass_tokens=widest)
    return torch.cat(scores).float().clamp(min=0)


def perturbation_scores_naive(
    model, input_ids: torch.Tensor, reasoning: slice, answer: slice, *, mode: str = "last", pad_token_id: int
) -> torch.Tensor:
    """Reference OAR-P, slow and memory-hungry on purpose (one full forward pass per reasoning
    token, full logits, no cache): what `perturbation_scores` is tested against. Same
    arguments and result ``[R]``."""
    _check_sequence(input_ids, reasoning, answer)
    _check_mode(mode)
    answer_ids = input_ids[answer]

    def outcome(ids: torch.Tensor) -> torch.Tensor:
        logits = model(input_ids=ids[None]).logits  # [1, T, V]: everything, like the paper's code
        if mode == "last":
            return F.log_softmax(_upcast(logits[0, answer.start - 1]), -1)
        kept = _upcast(logits[0, answer.start - 1 : answer.stop - 1])
        if mode == "answer_mean":
            return F.log_softmax(kept.mean(0), -1)
        return F.log_softmax(kept, -1).gather(-1, answer_ids[:, None]).squeeze(-1).mean()

    with torch.no_grad(), eval_mode(model):
        clean = outcome(input_ids)
        scores = []
        for t in range(reasoning.start, reasoning.stop):
            perturbed = input_ids.clone()
            perturbed[t] = pad_token_id
            changed = outcome(perturbed)
            if mode == "answer_joint":
                scores.append(torch.clamp(clean - changed, min=0))
            else:
                scores.append((clean.exp() * (clean - changed)).sum().clamp(min=0))
    return torch.stack(scores).float()


def _padded_rows_spans(input_ids: torch.Tensor, attention_mask: torch.Tensor, reasoning: list[slice],
                       answer: list[slice]) -> list[tuple[slice, slice, slice]]:
    """Check a padded batch; per row ``(attended, reasoning, answer)``, the spans relative to
    the row's first attended column."""
    if input_ids.dim() != 2 or attention_mask.shape != input_ids.shape:
        raise ValueError(f"input_ids and attention_mask must both be [B, T], got {tuple(input_ids.shape)} and "
                         f"{tuple(attention_mask.shape)}")
    B = input_ids.shape[0]
    if not (len(reasoning) == len(answer) == B):
        raise ValueError(f"expected one reasoning and one answer span per row ({B}), got {len(reasoning)} and {len(answer)}")
    rows = []
    for i in range(B):
        valid = mask_to_span(attention_mask[i].bool(), f"attention_mask row {i}")
        if valid is None:
            raise ValueError(f"row {i} has no attended tokens")
        off = valid.start
        r, a = slice(reasoning[i].start - off, reasoning[i].stop - off), slice(answer[i].start - off, answer[i].stop - off)
        _check_sequence(input_ids[i, valid], r, a)
        rows.append((valid, r, a))
    return rows


def _outcome_rows(logits: torch.Tensor, answer_ids: torch.Tensor, keep: torch.Tensor, mode: str) -> torch.Tensor:
    """`_outcome` of rows whose answers differ in length: ``logits [b, K, V]`` the last K
    logits of each row (K the longest ``keep``), ``answer_ids [b, K]`` each row's answer
    right-aligned, ``keep [b, K]`` bool, True on each row's last ``keep`` columns."""
    logits = _upcast(logits)
    if mode == "last":
        return F.log_softmax(logits[:, -1], dim=-1)
    weight = keep.to(logits.dtype)
    if mode == "answer_mean":
        return F.log_softmax((logits * weight[..., None]).sum(1) / weight.sum(1, keepdim=True), dim=-1)
    logp = F.log_softmax(logits, dim=-1).gather(-1, answer_ids.unsqueeze(-1)).squeeze(-1)
    return (logp * weight).sum(1) / weight.sum(1)


def _select_cache(cache, rows: torch.Tensor | int, length: int):
    """A new KV cache with the rows ``rows`` (repeats allowed; an int b: row 0 b times, as a
    view that the pass's own update copies once) of ``cache``, cut to its first ``length``
    columns; ``cache`` itself is left as it is."""
    # One copy of the selected columns; the pass appends to new tensors. (Gathering the rows
    # straight into the tensor the pass's update returns, an index_select into a strided
    # slice, measured 2.5x slower than this gather plus the cache's concatenation.)
    selected = _per_layer_copy(cache, lambda t: t[:1, :, :length].expand(rows, -1, -1, -1) if isinstance(rows, int)
                               else t[:, :, :length].index_select(0, rows))
    if selected is not None:
        return selected
    cache = copy.deepcopy(cache)  # older transformers (no per-layer tensors), sliding-window layers
    cache.crop(length - cache.get_seq_length())  # a negative argument removes tokens in every transformers version
    cache.batch_select_indices(torch.zeros(rows, dtype=torch.long) if isinstance(rows, int) else rows)
    return cache


def _per_layer_copy(cache, transform):
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


def _check_sampled_cache(cache, need: int) -> None:
    """Raises ValueError unless the sampling's ``cache`` holds at least ``need`` columns."""
    if cache.get_seq_length() < need:
        raise ValueError(f"sampled_cache holds {cache.get_seq_length()} columns, but the clean pass needs its first "
                         f"{need}: it must be the cache of a forward over these rows (at least their first T - 1 "
                         f"columns)")


def _frame_cache(cache, shifts: list[int], length: int, rows: list[int]):
    """A KV cache of frame columns ``0..length-1`` of the rows ``rows`` of ``cache``, each row
    shifted: frame column f of row ``rows[j]`` is ``cache``'s column ``f + shifts[j]`` (columns
    before a row's first token hold other columns' values, which the frame's mask hides).
    None where `_per_layer_copy` cannot read ``cache``.

    Raises:
        ValueError: ``cache`` does not reach a column the frame needs.
    """
    _check_sampled_cache(cache, length + max(shifts))
    columns = (torch.arange(length)[None] + torch.tensor(shifts)[:, None]).clamp(min=0)  # [len(rows), length]
    who = torch.tensor(rows)

    def framed(t):  # [N, h, have, d] -> [len(rows), h, length, d]
        index = columns.to(t.device)[:, None, :, None].expand(len(rows), t.shape[1], length, t.shape[-1])
        return t.index_select(0, who.to(t.device)).gather(2, index)
    return _per_layer_copy(cache, framed)


def _cache_rows(cache, rows: list[int]):
    """A KV cache of the rows ``rows`` of ``cache``; None where `_per_layer_copy` cannot read it."""
    who = torch.tensor(rows)
    return _per_layer_copy(cache, lambda t: t.index_select(0, who.to(t.device)))


class _PrefixKV:
    """Stands in for the KV cache (or its absence, ``cache=None``) in one attention call:
    ``update`` puts the given keys and values ``[b, h, n, d]`` before the call's own, then
    passes both on to ``cache``."""

    def __init__(self, cache, keys: torch.Tensor, values: torch.Tensor):
        self.cache, self.keys, self.values = cache, keys, values

    def update(self, keys, values, *args, **kwargs):
        keys, values = torch.cat([self.keys, keys], dim=-2), torch.cat([self.values, values], dim=-2)
        return (keys, values) if self.cache is None else self.cache.update(keys, values, *args, **kwargs)


_QUERIES_AT_END = ("llama", "qwen2")
"""Model types whose decoder layer is input norm, attention (keys ``k_proj`` + rotary by
``rotate_half``, values ``v_proj``), residual, norm, MLP, residual, as `_layer_at_end`
recomputes its keys and values."""


def _layer_at_end(model, block, keep: int) -> list:
    """A hook on ``block`` (the last decoder layer) that runs the whole layer only at the
    last ``keep`` positions: the keys and values of the other positions are computed here
    (``input_layernorm``, ``k_proj`` / ``v_proj``, rotary) and put before the layer's own
    (`_PrefixKV`), so the layer returns ``[b, keep, d]`` and the final norm runs there too.
    ``[]`` (nothing changed) for other model types, attention implementations or
    sliding-window layers."""
    attn, config = getattr(block, "self_attn", None), model.config
    rotate_half = getattr(sys.modules.get(type(attn).__module__), "rotate_half", None)
    if (getattr(config, "model_type", None) not in _QUERIES_AT_END or rotate_half is None
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
                 "attention_mask": mask, name: _PrefixKV(cache, keys, values)}
        if torch.is_tensor(kwargs.get("position_ids")):
            short["position_ids"] = kwargs["position_ids"][..., rest:]
        return (), {**kwargs, **short}

    return [block.register_forward_pre_hook(before, with_kwargs=True)]


def _decoder_layers(model) -> torch.nn.ModuleList | None:
    """The decoder's layers, found by name where transformers puts them (``layers`` on
    Llama-family models, ``h`` on GPT-2) in the base model (under a peft wrapper too), and
    only if there are ``config.num_hidden_layers`` of them; else None."""
    core = model.get_base_model() if hasattr(model, "get_base_model") else model  # peft's PeftModel
    decoder = getattr(core, "base_model", core)
    n_layers = getattr(getattr(core, "config", None), "num_hidden_layers", None)
    for name in ("layers", "h"):
        layers = getattr(decoder, name, None)
        if isinstance(layers, torch.nn.ModuleList) and n_layers and len(layers) == n_layers:
            return layers
    return None


@contextlib.contextmanager
def _last_layer_at_end(model, keep: int):
    """Within the block, the last decoder layer runs only at the last ``keep`` positions of
    each forward pass, the ones ``logits_to_keep`` reads: for the model types of
    `_QUERIES_AT_END` the whole layer and the final norm (`_layer_at_end`: its output is
    ``[b, keep, d]``), for others its MLP (zeros elsewhere). Exact for those logits: the
    layer's output elsewhere only feeds per-position norms and logits not computed, and the
    keys and values (cached or attended to) are still computed at every position. Models
    whose decoder layers `_decoder_layers` does not find, or whose last layer has no
    ``mlp``, run unchanged."""
    layers = _decoder_layers(model)
    mlp = getattr(layers[-1], "mlp", None) if layers is not None else None
    handles = _layer_at_end(model, layers[-1], keep) if mlp is not None else []
    if mlp is not None and not handles:  # other model types: the MLP alone, zero-padded back to full length
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


def _plan_passes(columns: list[int], end: int, *, per_pass: int, max_waste: float,
                 reuse_prefix: bool) -> list[tuple[int, int]]:
    """Groups the perturbed copies at sorted frame ``columns`` (frame ending at ``end``) into
    passes of at most ``per_pass`` consecutive copies. A pass continues from the clean cache
    cut at its first copy's column s, so a copy at column c wastes ``c - s`` tokens; the
    planner takes the fewest passes whose waste stays within ``max_waste`` of the ideal
    count, and of those spans of columns the narrowest (least waste).

    Returns:
        ``[(lo, hi), ...]`` half-open index ranges into ``columns``, in order.
    """
    n = len(columns)
    ideal = sum(end - c for c in columns)

    def greedy(span: int) -> tuple[list[tuple[int, int]], int]:
        passes, waste, i = [], 0, 0
        while i < n:
            j = i + 1
            while j < n and j - i < per_pass and (not reuse_prefix or columns[j] < columns[i] + span):
                j += 1
            passes.append((i, j))
            waste += sum(columns[i:j]) - (j - i) * columns[i] if reuse_prefix else 0
            i = j
        return passes, waste

    # span 1 (copies of one column) wastes nothing, so it always fits; narrower spans never need fewer passes
    widest = _largest_fitting(lambda span: greedy(span)[1] <= max_waste * ideal, 1, end)
    fewest = len(greedy(widest)[0])
    narrowed = _largest_fitting(lambda cut: len(greedy(widest + 1 - cut)[0]) <= fewest, 1, widest)
    return greedy(widest + 1 - narrowed)[0]


def perturbation_scores_batch(
    model,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    reasoning: list[slice],
    answer: list[slice],
    *,
    mode: str = "last",
    pad_token_id: int | None = None,
    batch_size: int | None = None,
    token_budget: int | None = None,
    max_waste: float = DEFAULT_MAX_WASTE,
    reuse_prefix: bool = True,
    sampled_cache=None,
    stats: dict | None = None,
) -> list[torch.Tensor]:
    """OAR-P (spec section 4) for every row of a padded batch, the perturbed copies of
    several rows sharing forward passes: the scores `perturbation_scores` gives each row.

    Rows are right-aligned on the last token P_final reads (own position ids), so a copy at
    frame column c runs columns c..end. Each group of rows whose clean pass fits
    ``token_budget`` runs that pass once and keeps its KV cache; `_plan_passes` packs the
    group's copies, sorted by column, into passes continuing from that cache, within
    ``max_waste`` of the ideal token count and ``token_budget`` tokens held per pass.

    Equal to the per-row scores up to rounding (padding and batch shapes change the order
    of sums; tested at ``rtol=1e-6`` in float64, ``1e-6`` absolute in float32). Parameters,
    their ``.grad`` and the modules' train/eval mode are left as they were.

    Args:
        model: a causal LM accepting ``attention_mask``, ``position_ids``, a KV cache and
            ``logits_to_keep``.
        input_ids, attention_mask: ``[B, T]``, padded (left, right or both); one
            contiguous run of 1s per row.
        reasoning, answer: per row, half-open spans into the *padded* row.
        mode, pad_token_id, batch_size, max_waste, reuse_prefix: as `perturbation_scores`.
        token_budget: at most this many tokens held per pass (copies x frame length,
            cached columns included); None: `default_token_budget` of the model's device.
        sampled_cache: a KV cache (transformers' per-layer ``DynamicCache``) of the model's
            forward over these very rows and columns, covering at least their first
            ``T - 1`` columns: the sampling's (`oar_lite.rollout.sample_completions`
            ``keep_cache``). The clean pass then runs only the positions P_final reads,
            continuing from it (equal up to rounding: the sampling computed it token by
            token). None, or a cache without per-layer tensors: a full clean pass.
        stats: if a dict, receives ``forward_tokens`` (run, padding included),
            ``forward_passes``, ``max_pass_tokens`` (run) and ``max_pass_held_tokens``.

    Returns:
        B float32 tensors ``[R_i]``, >= 0.

    Raises:
        ValueError: bad shapes, spans or settings.
    """
    _check_mode(mode)
    if pad_token_id is None:
        raise ValueError("pad_token_id is required: the token that replaces each reasoning token")
    if batch_size is not None and batch_size < 1:
        raise ValueError(f"batch_size must be >= 1 or None, got {batch_size}")
    if max_waste < 0:
        raise ValueError(f"max_waste must be >= 0, got {max_waste}")
    if token_budget is None:
        token_budget = default_token_budget(next(model.parameters()).device)
    if token_budget < 1:
        raise ValueError(f"token_budget must be >= 1, got {token_budget}")
    rows = _padded_rows_spans(input_ids, attention_mask, reasoning, answer)
    spans = [_outcome_span(a, mode) for _, _, a in rows]  # (end, keep) per row, relative to its first token
    scores = [torch.zeros(r.stop - r.start, dtype=torch.float64) for _, r, _ in rows]
    tokens = passes = widest = widest_held = 0
    device = input_ids.device
    # Groups of rows, longest first, whose clean pass fits the budget.
    order = sorted(range(len(rows)), key=lambda i: -spans[i][0])
    groups: list[list[int]] = []
    for i in order:
        if groups and (len(groups[-1]) + 1) * spans[groups[-1][0]][0] <= token_budget:
            groups[-1].append(i)
        else:
            groups.append([i])
    with torch.no_grad(), eval_mode(model), _last_layer_at_end(model, max(keep for _, keep in spans)):
        for group in groups:
            n, E, K = len(group), spans[group[0]][0], max(spans[i][1] for i in group)
            frame = torch.full((n, E), pad_token_id, dtype=input_ids.dtype, device=device)
            frame_mask = torch.zeros((n, E), dtype=torch.long, device=device)
            answer_ids = torch.zeros((n, K), dtype=input_ids.dtype, device=device)
            keep_mask = torch.zeros((n, K), dtype=torch.bool, device=device)
            copies = []  # (frame column, row in group, reasoning index)
            for j, i in enumerate(group):
                (valid, r, a), (end, keep) = rows[i], spans[i]
                off = E - end
                frame[j, off:] = input_ids[i, valid][:end]
                frame_mask[j, off:] = 1
                answer_ids[j, K - keep:] = input_ids[i, valid][a][-keep:]  # read by answer_joint, where keep = A
                keep_mask[j, K - keep:] = True
                copies += [(off + t, j, t - r.start) for t in range(r.start, r.stop)]
            positions = (frame_mask.cumsum(-1) - 1).clamp(min=0)
            # The clean pass: from the sampling's cache, only the last K columns are run.
            cached = _frame_cache(sampled_cache, [rows[i][0].start - (E - spans[i][0]) for i in group], E - K,
                                  group) if sampled_cache is not None else None
            first = E - K if cached is not None else 0
            out = model(input_ids=frame[:, first:], attention_mask=frame_mask, position_ids=positions[:, first:],
                        logits_to_keep=K, **(_cache_kwargs(model, cached) if cached is not None else
                                             {"use_cache": reuse_prefix}))
            clean = _outcome_rows(out.logits[:, -K:], answer_ids, keep_mask, mode)
            clean_cache = _output_cache(out) if reuse_prefix else None
            run = n * (E - first)
            tokens, passes, widest, widest_held = tokens + run, passes + 1, max(widest, run), max(widest_held, n * E)
            copies.sort()
            per_pass = max(1, min(token_budget // E, batch_size or token_budget))
            for lo, hi in _plan_passes([c for c, _, _ in copies], E, per_pass=per_pass, max_waste=max_waste,
                                       reuse_prefix=reuse_prefix):
                cols = torch.tensor([c for c, _, _ in copies[lo:hi]], device=device)
                who = torch.tensor([j for _, j, _ in copies[lo:hi]], device=device)
                b, s = hi - lo, copies[lo][0] if reuse_prefix else 0
                variants = frame[who, s:].clone()
                variants[torch.arange(b, device=device), cols - s] = pad_token_id
                cache = _select_cache(clean_cache, who, s) if s > 0 else None
                logits = model(input_ids=variants, attention_mask=frame_mask[who], position_ids=positions[who, s:],
                               logits_to_keep=K, **_cache_kwargs(model, cache)).logits[:, -K:]
                changed = _divergence(clean[who], _outcome_rows(logits, answer_ids[who], keep_mask[who], mode), mode)
                for (_, j, k), value in zip(copies[lo:hi], changed.tolist()):
                    scores[group[j]][k] = value
                tokens, passes = tokens + b * (E - s), passes + 1
                widest, widest_held = max(widest, b * (E - s)), max(widest_held, b * E)
    if stats is not None:
        stats.update(forward_tokens=tokens, forward_passes=passes, max_pass_tokens=widest,
                     max_pass_held_tokens=widest_held)
    return [s.float().clamp(min=0) for s in scores]


# ----------------------------------------------------------------------------- OAR-G

def gradient_scores(
    model,
    input_ids: torch.Tensor,
    reasoning: slice,
    answer: slice,
    *,
    mode: str = "answer_mean",
    noise_std: float = 1e-3,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """OAR-G: gradient-times-input saliency of the outcome, ``|<dJ/de~_t, e_t>|`` (spec section 5).

    The gradient is taken with `torch.autograd.grad` on the embeddings only: the model's
    parameter ``.grad`` and its train/eval mode are left as they were.

    Args:
        model: a causal LM accepting ``inputs_embeds`` and ``logits_to_keep``.
        input_ids: ``[T]`` one sequence, no padding.
        reasoning, answer: half-open spans into ``input_ids``.
        mode: a P_final mode (`MODES`).
        noise_std: sigma of the noise on the reasoning embeddings (the KL modes have zero
            gradient without it; ``answer_joint`` does not need it).
        generator: RNG for the noise (reproducible scores).

    Returns:
        ``[R]`` float32 scores, >= 0.

    Raises:
        ValueError: spans out of range or overlapping, an unknown mode, ``noise_std < 0``.
    """
    _check_sequence(input_ids, reasoning, answer)
    _check_mode(mode)
    if noise_std < 0:
        raise ValueError(f"noise_std must be >= 0, got {noise_std}")
    end, keep = _outcome_span(answer, mode)
    answer_ids = input_ids[answer]
    with eval_mode(model):
        with torch.no_grad():
            clean = _outcome(_final_logits(model, input_ids=input_ids[None, :end], keep=keep), answer_ids, mode)
            embeds = model.get_input_embeddings()(input_ids[None, :end]).detach()
            noise_shape = (reasoning.stop - reasoning.start, embeds.shape[-1])
            noise_device = generator.device if generator is not None else embeds.device
            noise = torch.randn(noise_shape, generator=generator, device=noise_device, dtype=torch.float32)
            noisy = embeds.clone()
            noisy[0, reasoning] += (noise_std * noise).to(embeds.device, embeds.dtype)
        noisy.requires_grad_(True)
        with torch.enable_grad():
            logits = _final_logits(model, inputs_embeds=noisy, keep=keep)
            objective = _divergence(clean, _outcome(logits, answer_ids, mode), mode).sum()
            (grad,) = torch.autograd.grad(objective, noisy)
    saliency = (_upcast(grad[0, reasoning]) * _upcast(embeds[0, reasoning])).sum(-1).abs()
    return saliency.detach().float()


def gradient_scores_batch(
    model,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    reasoning: list[slice],
    answer: list[slice],
    *,
    mode: str = "answer_mean",
    noise_std: float = 1e-3,
    generator: torch.Generator | None = None,
    reuse_prefix: bool = True,
    sampled_cache=None,
) -> list[torch.Tensor]:
    """OAR-G for every row of a padded batch: the scores `gradient_scores` gives each row
    alone, from one clean forward pass and one forward + backward pass.

    Position ids come from the attention mask, so a row sees the positions it has alone. The
    noise is drawn row by row, in order, from ``generator``, as a per-row loop would. Equal
    to the per-row scores up to floating-point rounding (padding and a cached prefix change
    the order of the sums; the KL modes, second order in the noise, amplify it), which
    tests/test_attribution.py bounds. The parameters' ``.grad``, ``requires_grad`` and
    train/eval modes are left as they were.

    Args:
        model: a causal LM accepting ``inputs_embeds``, ``position_ids``, a KV cache and
            ``logits_to_keep``.
        input_ids, attention_mask: ``[B, T]``, padded; one contiguous run of 1s per row.
        reasoning, answer: per row, half-open spans into the *padded* row.
        mode, noise_std, generator: as `gradient_scores`.
        reuse_prefix: run the columns before every row's reasoning (the prompts) once per
            distinct prefix, without grad, and continue both passes from their KV cache
            (the gradient never needs the prompt's embeddings).
        sampled_cache: a KV cache of the model's forward over these very rows and columns
            (the sampling's, `oar_lite.rollout.sample_completions` ``keep_cache``), at least
            up to the last column P_final reads: the prompt columns are taken from it, and
            the clean pass runs only from the first column P_final reads (equal up to
            rounding). None, or a cache without per-layer tensors: computed here.

    Returns:
        B float32 tensors ``[R_i]``, >= 0.

    Raises:
        ValueError: bad settings, or a ``sampled_cache`` too short for these rows.
    """
    _check_mode(mode)
    if noise_std < 0:
        raise ValueError(f"noise_std must be >= 0, got {noise_std}")
    if not _padded_rows_spans(input_ids, attention_mask, reasoning, answer):
        return []
    spans = [_outcome_span(a, mode) for a in answer]  # (end, keep) per row, in padded columns
    T = max(end for end, _ in spans)
    prefix = min(r.start for r in reasoning) if reuse_prefix else 0
    ids, attn = input_ids[:, :T], attention_mask[:, :T].long()
    position_ids = (attn.cumsum(-1) - 1).clamp(min=0)
    # The LM head only at the positions some row's P_final reads, as columns of the input after the prefix.
    wanted = sorted({p for end, keep in spans for p in range(end - keep, end)})
    keep_idx = torch.tensor([p - prefix for p in wanted], device=ids.device)
    column = {p: i for i, p in enumerate(wanted)}
    rows_cols = [[column[p] for p in range(end - keep, end)] for end, keep in spans]

    def outcomes(logits: torch.Tensor) -> list[torch.Tensor]:  # [B, len(wanted), V] -> per row P_final
        return [_outcome(logits[i : i + 1, cols], input_ids[i, answer[i]], mode) for i, cols in enumerate(rows_cols)]

    def forward(cache, **inputs):
        return model(attention_mask=attn, position_ids=position_ids[:, prefix:], logits_to_keep=keep_idx,
                     **inputs, **_cache_kwargs(model, cache)).logits

    first_read = wanted[0]
    if sampled_cache is not None:
        _check_sampled_cache(sampled_cache, first_read)
    sampled_prefix = _per_layer_copy(sampled_cache, lambda t: t[:, :, :prefix]) if prefix > 0 else None
    sampled_head = _per_layer_copy(sampled_cache, lambda t: t[:, :, :first_read])
    with eval_mode(model):
        with torch.no_grad():
            cache = None
            if sampled_head is not None:  # the clean pass: only the columns from the first one read
                logits = model(input_ids=ids[:, first_read:], attention_mask=attn,
                               position_ids=position_ids[:, first_read:], logits_to_keep=keep_idx + prefix - first_read,
                               **_cache_kwargs(model, sampled_head)).logits
                clean = outcomes(logits)
            if sampled_prefix is not None:
                cache = sampled_prefix
            elif prefix > 0:
                # One pass per distinct prefix (rows of a group share their prompt), then one cache row per row.
                heads, row_of = torch.unique(torch.cat([ids[:, :prefix], attn[:, :prefix]], dim=1), dim=0,
                                             return_inverse=True)
                out = model(input_ids=heads[:, :prefix], attention_mask=heads[:, prefix:],
                            position_ids=(heads[:, prefix:].cumsum(-1) - 1).clamp(min=0), use_cache=True,
                            logits_to_keep=1)
                cache = _output_cache(out)
                cache.batch_select_indices(row_of.to(ids.device))
            if sampled_head is None:
                clean = outcomes(forward(copy.deepcopy(cache), input_ids=ids[:, prefix:]))  # the pass appends to its cache
            embeds = model.get_input_embeddings()(ids[:, prefix:]).detach()
            noisy = embeds.clone()
            noise_device = generator.device if generator is not None else embeds.device
            for i, r in enumerate(reasoning):
                noise = torch.randn((r.stop - r.start, embeds.shape[-1]), generator=generator, device=noise_device,
                                    dtype=torch.float32)
                noisy[i, r.start - prefix : r.stop - prefix] += (noise_std * noise).to(embeds.device, embeds.dtype)
        noisy.requires_grad_(True)
        with torch.enable_grad():
            changed = outcomes(forward(cache, inputs_embeds=noisy))
            objective = sum(_divergence(c, o, mode).sum() for c, o in zip(clean, changed))
            (grad,) = torch.autograd.grad(objective, noisy)
    scores = []
    for i, r in enumerate(reasoning):
        cols = slice(r.start - prefix, r.stop - prefix)
        scores.append((_upcast(grad[i, cols]) * _upcast(embeds[i, cols])).sum(-1).abs().detach().float())
    return scores


# ----------------------------------------------------------------------------- baselines

def entropy_scores(model, input_ids: torch.Tensor, reasoning: slice, answer: slice) -> torch.Tensor:
    """Baseline: entropy of the policy's distribution at each reasoning token (the
    "high-entropy minority" heuristic). ``[R]``; needs ``reasoning.start >= 1``."""
    _check_sequence(input_ids, reasoning, answer)
    if reasoning.start < 1:
        raise ValueError("entropy scores need reasoning.start >= 1 (a token before the first reasoning token)")
    R = reasoning.stop - reasoning.start
    with torch.no_grad(), eval_mode(model):
        logits = _upcast(_final_logits(model, input_ids=input_ids[None, : reasoning.stop - 1], keep=R)[0])
    logp = F.log_softmax(logits, -1)
    return (-(logp.exp() * logp).sum(-1)).float()


def random_scores(model, input_ids: torch.Tensor, reasoning: slice, answer: slice, *,
                  generator: torch.Generator | None = None) -> torch.Tensor:
    """Baseline: uniform random scores ``[R]`` (chance level for any ranking metric)."""
    _check_sequence(input_ids, reasoning, answer)
    return torch.rand(reasoning.stop - reasoning.start, generator=generator)


def uniform_scores(model, input_ids: torch.Tensor, reasoning: slice, answer: slice) -> torch.Tensor:
    """Plain GRPO: every reasoning token equally important (all weights become 1)."""
    _check_sequence(input_ids, reasoning, answer)
    return torch.ones(reasoning.stop - reasoning.start)


def integrated_gradients_scores(model, input_ids: torch.Tensor, reasoning: slice, answer: slice, *,
                                mode: str = "answer_joint", pad_token_id: int, n_steps: int = 16) -> torch.Tensor:
    """External peer: Captum's ``LayerIntegratedGradients`` on the input embeddings, ``[R]``
    float32 scores >= 0 (|attribution| summed over the hidden dimension).

    Target: the log-probability of the answer the model wrote, phi for ``answer_joint``, the
    first answer token's for ``last`` (``answer_mean`` is no scalar: ValueError). Baseline:
    every reasoning token replaced by ``pad_token_id`` (OAR-P's perturbation, all at once),
    reached in ``n_steps``. Captum is imported on the first call.
    """
    from captum.attr import LayerIntegratedGradients

    _check_sequence(input_ids, reasoning, answer)
    _check_mode(mode)
    if mode == "answer_mean":
        raise ValueError("captum-ig needs a scalar target: mode 'last' or 'answer_joint', got 'answer_mean' "
                         "('answer_mean' is a distribution, not a scalar)")
    answer_ids = input_ids[answer]
    end, keep = _outcome_span(answer, mode)

    def target(ids: torch.Tensor) -> torch.Tensor:  # [b, end] -> [b] log-probability of the answer
        outcome = _outcome(_final_logits(model, input_ids=ids, keep=keep), answer_ids, mode)
        return outcome[:, answer_ids[0]] if mode == "last" else outcome

    inputs = input_ids[None, :end]
    baseline = inputs.clone()
    baseline[0, reasoning] = pad_token_id
    with eval_mode(model):
        lig = LayerIntegratedGradients(target, model.get_input_embeddings())
        attributions = lig.attribute(inputs, baselines=baseline, n_steps=n_steps, internal_batch_size=n_steps)
    return attributions[0, reasoning].sum(-1).abs().float().detach()


# ----------------------------------------------------------------------------- one interface

Scorer = Callable[..., torch.Tensor]
SCORERS: dict[str, Scorer] = {
    "uniform": uniform_scores,
    "random": random_scores,
    "entropy": entropy_scores,
    "oar-p": perturbation_scores,
    "oar-g": gradient_scores,
    "oracle": oracle_scores,
    "oracle-pivotal": pivotal_oracle_scores,
    "oracle-relevant": relevance_oracle_scores,
    "captum-ig": integrated_gradients_scores,
}
"""Scorers by method name (the oracles need toy-world sequences). Add one with `register_scorer`."""


def register_scorer(name: str, scorer: Scorer) -> None:
    """Make ``scorer(model, input_ids [T], reasoning, answer, **options) -> [R]`` available
    to `token_scores` and `token_weights` as ``method=name``."""
    if ":" in name:
        raise ValueError(f"scorer names cannot contain ':' (it separates the P_final mode), got {name!r}")
    if name in CONTROLS:
        raise ValueError(f"{name!r} is a control prefix ({', '.join(CONTROLS)}), not a scorer name")
    SCORERS[name] = scorer


def parse_method(method: str) -> tuple[str, str | None]:
    """``"oar-p:answer_joint"`` -> ``("oar-p", "answer_joint")``; ``"oar-g"`` -> ``("oar-g", None)``.

    Control prefixes are validated and dropped: ``"inverted:oar-p:last"`` -> ``("oar-p",
    "last")`` (`oar_lite.oracle.split_controls` returns them)."""
    _, method = split_controls(method)
    name, _, mode = method.partition(":")
    if name not in SCORERS:
        raise ValueError(f"unknown method {name!r}; expected one of {sorted(SCORERS)} (optionally ':<mode>', "
                         f"optionally behind a control prefix {' or '.join(c + ':' for c in CONTROLS)})")
    if mode:
        if "mode" not in inspect.signature(SCORERS[name]).parameters:
            raise ValueError(f"method {name!r} takes no P_final mode, got {method!r}")
        _check_mode(mode)
    return name, mode or None


def token_scores(method: str, model, input_ids: torch.Tensor, reasoning: slice, answer: slice, **options) -> torch.Tensor:
    """Scores ``[R]`` of one sequence with the named method (module docstring). ``options`` the
    scorer does not take (``pad_token_id`` for OAR-G, say) are dropped, so one call site can
    serve every method."""
    if not torch.is_tensor(input_ids):
        _check_sequence(input_ids, reasoning, answer)  # raises: not a tensor [T]
    whole = slice(0, input_ids.shape[-1])
    return _score_rows(method, model, input_ids[None], {0: (whole, reasoning, answer)}, options, batched=False)[0]


# Scorers with a batched form: one row's scorer -> (the batched scorer, the options it takes).
_BATCHED = {
    gradient_scores: (gradient_scores_batch, ("noise_std", "generator", "sampled_cache")),
    perturbation_scores: (perturbation_scores_batch,
                          ("pad_token_id", "batch_size", "token_budget", "max_waste", "reuse_prefix", "sampled_cache",
                           "stats")),
}


def uses_sampled_cache(method: str) -> bool:
    """Whether ``method``'s batched scorer continues from the sampling's KV cache
    (``token_weights(..., sampled_cache=rollouts.cache)``; OAR-P and OAR-G): worth keeping
    it (`oar_lite.rollout.sample_completions`'s ``keep_cache``)."""
    name, _ = parse_method(method)
    return "sampled_cache" in _BATCHED.get(SCORERS[name], (None, ()))[1]


def _score_rows(method: str, model, input_ids: torch.Tensor, spans: dict[int, tuple[slice, slice, slice]],
                options: dict, *, batched: bool = True) -> dict[int, torch.Tensor]:
    """``{row: [R_row]}``, the scores of the rows of ``input_ids [B, T]`` in ``spans``
    (``{row: (attended, reasoning, answer)}``, padded columns): the one place a method name
    becomes scores, control prefixes included. With ``batched``, scorers in `_BATCHED` score
    all rows in shared padded passes (equal up to rounding); otherwise each row is scored
    alone, padding stripped, with the options its scorer takes."""
    controls, _ = split_controls(method)
    name, mode = parse_method(method)
    batch_scorer, batch_options = _BATCHED.get(SCORERS[name], (None, ()))
    if batched and batch_scorer is not None and spans:
        # OAR-G / OAR-P: all scored rows in shared padded passes (the per-row scores, up to rounding).
        rows = list(spans)
        attention = torch.zeros_like(input_ids[rows])
        for i, r in enumerate(rows):
            attention[i, spans[r][0]] = 1
        if options.get("sampled_cache") is not None and rows != list(range(input_ids.shape[0])):
            options = {**options, "sampled_cache": _cache_rows(options["sampled_cache"], rows)}
        scores = batch_scorer(
            model, input_ids[rows], attention, [spans[r][1] for r in rows], [spans[r][2] for r in rows],
            mode=mode or inspect.signature(SCORERS[name]).parameters["mode"].default,
            **{k: v for k, v in options.items() if k in batch_options and v is not None})
        raw = dict(zip(rows, scores))
    else:
        params = inspect.signature(SCORERS[name]).parameters
        kwargs = {k: v for k, v in options.items() if k in params and v is not None} | ({"mode": mode} if mode else {})
        raw = {}
        for row, (valid, reasoning, answer) in spans.items():
            off = valid.start
            raw[row] = SCORERS[name](model, input_ids[row, valid], slice(reasoning.start - off, reasoning.stop - off),
                                     slice(answer.start - off, answer.stop - off), **kwargs)
    if not controls:
        return raw
    return {row: apply_controls(controls, s, input_ids[row, spans[row][0]], options) for row, s in raw.items()}


def mask_to_span(mask: torch.Tensor, what: str = "mask") -> slice | None:
    """``[T]`` bool mask with one contiguous run of True -> ``slice``; all False -> ``None``."""
    idx = mask.nonzero().flatten()
    if idx.numel() == 0:
        return None
    start, stop = int(idx[0]), int(idx[-1]) + 1
    if idx.numel() != stop - start:
        raise ValueError(f"{what} must be one contiguous run of True, got positions {idx.tolist()}")
    return slice(start, stop)


CREDIT_RANGES: dict[str, dict] = {
    "quantile": dict(low=0, high=1),
    "boost": dict(low=0),
    "floor": dict(low=0, high=1),
    "noise_std": dict(low=0),
    "batch_size": dict(integer=True, low=1, optional=True),
    "token_budget": dict(integer=True, low=1, optional=True),
}
"""The allowed range of every numeric `CreditConfig` field (`oar_lite.checks.check_number`)."""


@dataclass(frozen=True)
class CreditConfig:
    """How credit is assigned to tokens: the scorer and the reshaping of its scores, checked
    on construction (ValueError). `token_weights` takes it, `oar_lite.train.TrainConfig`
    nests it, `oar_lite.trl.OARConfig` builds it from its ``oar_*`` fields. A field reaches
    the code by its name: `bilevel_weights`' parameters get theirs, every other one goes to
    the scorer that takes it; so a new setting is a field here and its range in `CREDIT_RANGES`.

    Fields:
        method: a method name (module docstring); ``"uniform"`` is plain GRPO.
        quantile, boost, floor, preserve_mass: the reshaping (`bilevel_weights`).
        noise_std: sigma of OAR-G's embedding noise.
        batch_size, token_budget: OAR-P's limits per forward pass, in perturbed copies and
            in tokens (None: `default_token_budget` of the model's device decides).
    """

    method: str = "oar-g"
    quantile: float = 0.25
    boost: float = 1.0
    floor: float = 0.1
    preserve_mass: bool = True
    noise_std: float = 1e-3
    batch_size: int | None = None
    token_budget: int | None = None

    def __post_init__(self):
        parse_method(self.method)  # ValueError naming the valid scorers, modes and controls
        for name, allowed in CREDIT_RANGES.items():
            check_number("CreditConfig", name, getattr(self, name), **allowed)
        if not isinstance(self.preserve_mass, bool):
            raise ValueError(f"CreditConfig.preserve_mass={self.preserve_mass!r}: expected True or False")

    def reshape(self, scores: torch.Tensor) -> torch.Tensor:
        """``[R]`` scores -> ``[R]`` weights with this config's `bilevel_weights` settings."""
        return bilevel_weights(scores, **{k: v for k, v in self._settings().items() if k in _RESHAPING})

    def scorer_options(self) -> dict:
        """The settings that are not the method or the reshaping: the scorer's options."""
        return {k: v for k, v in self._settings().items() if k not in _RESHAPING}

    def _settings(self) -> dict:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "method"}


_RESHAPING = tuple(inspect.signature(bilevel_weights).parameters)[1:]  # after the scores
CREDIT_FIELDS = tuple(f.name for f in dataclasses.fields(CreditConfig))
"""The `CreditConfig` field names, which `token_weights` also takes as keywords."""


def token_weights(
    model,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    reasoning_mask: torch.Tensor,
    answer_mask: torch.Tensor,
    *,
    credit: CreditConfig | None = None,
    return_scores: bool = False,
    **options,
):
    """Batched entry point for training: token weights for every sequence of a batch.

    Each row's reasoning scores (`_score_rows`: OAR-G and OAR-P in shared padded passes,
    other methods row by row with padding stripped) go through `bilevel_weights`, and the
    weights are placed on the reasoning positions.

    Args:
        model: the current policy (scores are computed without touching its grads).
        input_ids: ``[B, T]`` prompt + completion, padded.
        attention_mask, reasoning_mask: ``[B, T]``, the real and the reasoning tokens (one
            contiguous run per row).
        answer_mask: ``[B, T]`` bool, the answer tokens; an all-False row means "no
            parseable answer" and gets all weights 1.
        credit: the method and its settings (`CreditConfig`; default ``CreditConfig()``, OAR-G).
        return_scores: also return the list of raw ``[R_i]`` scores (``None`` for rows
            without an answer).
        **options: `CreditConfig` fields by name (``method="oar-p", quantile=0.5``; None
            keeps the field) replace those of ``credit``; the rest go to the scorer
            (``pad_token_id``, ``generator``, ``tokenizer``, ...; options a scorer does
            not take are ignored).

    Returns:
        ``weights [B, T]`` float32 (1 outside reasoning), or ``(weights, scores)``.

    Raises:
        ValueError: masks not of ``input_ids``' shape or not contiguous, spans outside the
            attended tokens, or settings out of range.
    """
    changes = {name: options.pop(name) for name in CREDIT_FIELDS if name in options}
    credit = dataclasses.replace(credit or CreditConfig(), **{k: v for k, v in changes.items() if v is not None})
    if input_ids.dim() != 2:
        raise ValueError(f"input_ids must be [B, T], got {tuple(input_ids.shape)}")
    for name, m in (("attention_mask", attention_mask), ("reasoning_mask", reasoning_mask), ("answer_mask", answer_mask)):
        if m.shape != input_ids.shape:
            raise ValueError(f"{name} must have the shape of input_ids {tuple(input_ids.shape)}, got {tuple(m.shape)}")
    weights = torch.ones(input_ids.shape, dtype=torch.float32, device=input_ids.device)
    spans: dict[int, tuple[slice, slice, slice]] = {}  # row -> (attended, reasoning, answer), padded columns
    for row in range(input_ids.shape[0]):
        valid = mask_to_span(attention_mask[row].bool(), "attention_mask row")
        answer = mask_to_span(answer_mask[row].bool(), "answer_mask row")
        reasoning = mask_to_span(reasoning_mask[row].bool(), "reasoning_mask row")
        if answer is None or reasoning is None or valid is None:
            continue
        if reasoning.start < valid.start or answer.stop > valid.stop:
            raise ValueError(f"row {row}: reasoning/answer reach outside the attended tokens")
        spans[row] = (valid, reasoning, answer)
    row_scores = _score_rows(credit.method, model, input_ids, spans, {**credit.scorer_options(), **options})
    for row, scores in row_scores.items():
        weights[row, spans[row][1]] = credit.reshape(scores).to(weights.device, weights.dtype)
    all_scores = [row_scores.get(row) for row in range(input_ids.shape[0])]  # None: no answer
    return (weights, all_scores) if return_scores else weights
