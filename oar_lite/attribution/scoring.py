"""The entry points: `token_scores` (one sequence) and `token_weights` (a batch, as trainers
call it). A keyword is a `CreditConfig` field, a `ScorerContext` field or an option the
method's scorer declares; anything else is a TypeError naming the valid ones."""
from __future__ import annotations

import dataclasses

import torch

from .config import CONTEXT_FIELDS, CREDIT_FIELDS, SCORER_FIELDS, CreditConfig, ScorerContext
from .kv import cache_rows
from .outcome import check_sequence, mask_hull, mask_to_span
from .registry import BATCHED, SCORERS, Method, declared_options, method_of, takes


def _refuse(where: str, method: str, given, allowed) -> None:
    unknown = sorted(set(given) - set(allowed))
    if unknown:
        raise TypeError(f"{where} got keyword(s) {unknown} that {method!r} does not take; valid: "
                        f"{sorted(set(allowed) - set(CONTEXT_FIELDS))} and the context {list(CONTEXT_FIELDS)}")


def token_scores(method: str, model, input_ids: torch.Tensor, reasoning: slice, answer: slice, **options) -> torch.Tensor:
    """Scores ``[R]`` of one sequence (``input_ids [T]``, half-open spans) with ``method``, before
    its reshaping or its own weighting (`WEIGHTINGS`). ``options``: those the scorer declares (``batch_size``
    for OAR-P, ...) and `ScorerContext` fields (``pad_token_id``, ``generator``, ...)."""
    if not torch.is_tensor(input_ids):
        check_sequence(input_ids, reasoning, answer)  # raises: not a tensor [T]
    name = method_of(method).name
    _refuse("token_scores()", method, options, set(declared_options(name)) | set(CONTEXT_FIELDS))
    context = ScorerContext(**{k: options.pop(k) for k in CONTEXT_FIELDS if k in options})
    whole = slice(0, input_ids.shape[-1])
    return score_rows(method, model, input_ids[None], {0: (whole, reasoning, answer)}, options, context,
                      batched=False)[0]


def score_rows(method: str | Method, model, input_ids: torch.Tensor, spans: dict[int, tuple[slice, slice, slice]],
               settings: dict, context: ScorerContext, *, batched: bool = True) -> dict[int, torch.Tensor]:
    """``{row: [R_row]}``, the scores of the rows of ``input_ids [B, T]`` in ``spans``
    (``{row: (attended, reasoning, answer)}``, padded columns): the one place a method name
    becomes scores. The scorer gets the ``settings`` and ``context`` fields it declares (None:
    its default); with ``batched``, its batched form scores all rows in shared padded passes
    (equal up to rounding), else each row is scored alone, padding stripped."""
    parsed = method_of(method)  # a CreditConfig's, parsed once (`CreditConfig.parsed`)
    name, mode = parsed.name, parsed.mode
    given = {**settings, **{f: getattr(context, f) for f in CONTEXT_FIELDS}}
    if batched and name in BATCHED and spans:
        rows = list(spans)
        attention = torch.zeros_like(input_ids[rows])
        for i, r in enumerate(rows):
            attention[i, spans[r][0]] = 1
        kwargs = {k: v for k, v in given.items() if k in declared_options(name, batched=True) and v is not None}
        if kwargs.get("sampled_cache") is not None and rows != list(range(input_ids.shape[0])):
            kwargs["sampled_cache"] = cache_rows(kwargs["sampled_cache"], rows)
        scores = BATCHED[name](model, input_ids[rows], attention, [spans[r][1] for r in rows],
                               [spans[r][2] for r in rows], mode=parsed.run_mode, **kwargs)
        return dict(zip(rows, scores))
    kwargs = {k: v for k, v in given.items() if k in declared_options(name) and v is not None}
    kwargs |= {"mode": mode} if mode else {}
    scores = {}
    for row, (valid, reasoning, answer) in spans.items():
        off = valid.start
        scores[row] = SCORERS[name](model, input_ids[row, valid], slice(reasoning.start - off, reasoning.stop - off),
                                    slice(answer.start - off, answer.stop - off), **kwargs)
    return scores


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
    """Batched entry point for training: token weights for every sequence of a batch. Each row's
    reasoning scores (`score_rows`) go through `bilevel_weights` (`CreditConfig.reshape`) onto
    the reasoning positions.

    Args:
        model: the current policy (scores are computed without touching its grads).
        input_ids: ``[B, T]`` prompt + completion, padded.
        attention_mask: ``[B, T]``, the real tokens (one contiguous run per row).
        reasoning_mask: ``[B, T]``, the tokens that get reshaped credit. The scorer reads each
            row's span from its first reasoning token to its last; tokens inside that span
            but not in the mask (a tool's output, `oar_lite.trl`) keep weight 1 and are left
            out of the reshaping and its mass (their scores are dropped).
        answer_mask: ``[B, T]`` bool, the answer tokens; an all-False row means "no
            parseable answer" and gets all weights 1.
        credit: the method and its settings (`CreditConfig`; default ``CreditConfig()``, OAR-G).
        return_scores: also return the list of raw ``[R_i]`` scores of each row's reasoning
            tokens (``None`` for rows without an answer).
        **options: `CreditConfig` fields by name (``method="oar-p", quantile=0.5``) replace
            those of ``credit`` (None is refused where a value is required); `ScorerContext` fields
            (``pad_token_id``, ``generator``, ``sampled_cache``, ...); options the method's
            scorer declares (``max_waste`` for OAR-P, ...).

    Returns:
        ``weights [B, T]`` float32 (1 outside reasoning), or ``(weights, scores)``.

    Raises:
        TypeError: a keyword that is none of those, or a scorer setting the method does not take.
        ValueError: masks not of ``input_ids``' shape, attention or answer not contiguous, spans outside the
            attended tokens, settings out of range (None where a value is required), or a
            ``credit`` whose settings the new ``method`` does not take (`CreditConfig`).
    """
    changes = {name: options.pop(name) for name in CREDIT_FIELDS if name in options}
    base = credit or CreditConfig()
    method = changes.get("method", base.method)  # not a str: method_of's ValueError
    context = ScorerContext(**{k: options.pop(k) for k in CONTEXT_FIELDS if k in options})
    explicit = [k for k in changes if k in SCORER_FIELDS]
    _refuse("token_weights()", method, [*options, *explicit], takes(method) | set(CONTEXT_FIELDS))
    # None is a value like any other: refused where one is required (boost=None), not read as the default.
    credit = dataclasses.replace(base, **changes)
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
        reasoning = mask_hull(reasoning_mask[row].bool())
        if answer is None or reasoning is None or valid is None:
            continue
        if reasoning.start < valid.start or answer.stop > valid.stop:
            raise ValueError(f"row {row}: reasoning/answer reach outside the attended tokens")
        spans[row] = (valid, reasoning, answer)
    row_scores = score_rows(credit.parsed, model, input_ids, spans, {**credit.scorer_options(), **options}, context)
    own = {}  # row -> its reasoning tokens' scores [R_i], the span's holes left out
    for row, scores in row_scores.items():
        span = spans[row][1]
        kept = reasoning_mask[row, span].bool().to(scores.device)
        own[row] = scores[kept]
        weights[row, span.start + kept.nonzero().flatten().to(weights.device)] = \
            credit.reshape(own[row]).to(weights.device, weights.dtype)
    all_scores = [own.get(row) for row in range(input_ids.shape[0])]  # None: no answer
    return (weights, all_scores) if return_scores else weights
