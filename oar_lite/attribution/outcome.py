"""What a scorer reads, checked (one unpadded sequence ``input_ids [T]`` with half-open
``reasoning`` and ``answer`` spans, or a padded batch), and P_final, what "the outcome" is
(spec section 3) in its three `MODES`: `outcome_span` says which logits a mode reads,
`p_final` computes it from them, `divergence` says how far a change moved it.
"""
from __future__ import annotations

import contextlib

import torch
import torch.nn.functional as F

from .kv import cache_kwargs

MODES = ("last", "answer_mean", "answer_joint")


def check_mode(mode: str) -> None:
    """ValueError unless ``mode`` is one of `MODES`."""
    if mode not in MODES:
        raise ValueError(f"unknown P_final mode {mode!r}; expected one of {MODES}")


def check_sequence(input_ids: torch.Tensor, reasoning: slice, answer: slice) -> None:
    """ValueError unless ``input_ids`` is ``[T]`` and ``reasoning`` ends at or before ``answer``
    starts, both non-empty unit-step spans inside it."""
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


def padded_rows(input_ids: torch.Tensor, attention_mask: torch.Tensor, reasoning: list[slice],
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
        check_sequence(input_ids[i, valid], r, a)
        rows.append((valid, r, a))
    return rows


def mask_to_span(mask: torch.Tensor, what: str = "mask") -> slice | None:
    """``[T]`` bool mask with one contiguous run of True -> ``slice``; all False -> ``None``."""
    idx = mask.nonzero().flatten()
    if idx.numel() == 0:
        return None
    start, stop = int(idx[0]), int(idx[-1]) + 1
    if idx.numel() != stop - start:
        raise ValueError(f"{what} must be one contiguous run of True, got positions {idx.tolist()}")
    return slice(start, stop)


def mask_hull(mask: torch.Tensor) -> slice | None:
    """``[T]`` bool mask -> the ``slice`` from its first True to its last (holes allowed);
    all False -> ``None``."""
    idx = mask.nonzero().flatten()
    return None if idx.numel() == 0 else slice(int(idx[0]), int(idx[-1]) + 1)


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


def outcome_span(answer: slice, mode: str) -> tuple[int, int]:
    """(end, keep): the model reads ``x[:end]`` and P_final needs its last ``keep`` logits."""
    if mode == "last":
        return answer.start, 1
    return answer.stop - 1, answer.stop - answer.start


def upcast(x: torch.Tensor) -> torch.Tensor:
    """At least float32 (half-precision logits lose small KL values), float64 kept."""
    return x.to(torch.promote_types(x.dtype, torch.float32))


def p_final(logits: torch.Tensor, answer_ids: torch.Tensor, mode: str) -> torch.Tensor:
    """P_final from ``logits [b, keep, V]`` (as `outcome_span` says) and ``answer_ids [A]``:
    ``[b, V]`` log-probabilities (``last``, ``answer_mean``) or ``[b]`` phi (``answer_joint``)."""
    logits = upcast(logits)
    if mode == "last":
        return F.log_softmax(logits[:, -1], dim=-1)
    if mode == "answer_mean":
        return F.log_softmax(logits.mean(dim=1), dim=-1)
    logp = F.log_softmax(logits, dim=-1)
    return logp.gather(-1, answer_ids.expand(logits.shape[0], -1).unsqueeze(-1)).squeeze(-1).mean(dim=1)


def divergence(clean: torch.Tensor, changed: torch.Tensor, mode: str) -> torch.Tensor:
    """``[b]`` KL(P || P~) from log-probs ``[1 or b, V]``, or ``phi - phi~`` for ``answer_joint``."""
    if mode == "answer_joint":
        return clean - changed
    return (clean.exp() * (clean - changed)).sum(-1)


def final_logits(model, *, input_ids=None, inputs_embeds=None, keep: int, cache=None) -> torch.Tensor:
    """``[b, keep, V]``: the last ``keep`` logits, the LM head applied to those positions only."""
    out = model(input_ids=input_ids, inputs_embeds=inputs_embeds, logits_to_keep=keep, **cache_kwargs(model, cache))
    return out.logits[:, -keep:]


def final_outcome(model, input_ids: torch.Tensor, answer: slice, *, mode: str = "last") -> torch.Tensor:
    """P_final of one sequence (no grad): ``[V]`` log-probs, or a 0-d phi for ``answer_joint``."""
    check_mode(mode)
    end, keep = outcome_span(answer, mode)
    with torch.no_grad(), eval_mode(model):
        logits = final_logits(model, input_ids=input_ids[None, :end], keep=keep)
    return p_final(logits, input_ids[answer], mode)[0]


def p_final_rows(logits: torch.Tensor, answer_ids: torch.Tensor, keep: torch.Tensor, mode: str) -> torch.Tensor:
    """`p_final` of rows whose answers differ in length: ``logits [b, K, V]`` the last K
    logits of each row (K the longest ``keep``), ``answer_ids [b, K]`` each row's answer
    right-aligned, ``keep [b, K]`` bool, True on each row's last ``keep`` columns."""
    logits = upcast(logits)
    if mode == "last":
        return F.log_softmax(logits[:, -1], dim=-1)
    weight = keep.to(logits.dtype)
    if mode == "answer_mean":
        return F.log_softmax((logits * weight[..., None]).sum(1) / weight.sum(1, keepdim=True), dim=-1)
    logp = F.log_softmax(logits, dim=-1).gather(-1, answer_ids.unsqueeze(-1)).squeeze(-1)
    return (logp * weight).sum(1) / weight.sum(1)
