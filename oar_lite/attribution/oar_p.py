"""OAR-P, counterfactual perturbation (spec section 4; notebook 02 builds it):
`perturbation_scores_naive` says it in a loop, the reference; `perturbation_scores_batch`
computes it fast for a padded batch, `perturbation_scores` for one sequence (B = 1), tested equal."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from ..rollout import output_cache
from .kv import cache_kwargs, frame_cache, last_layer_at_end, prefix_reusable, select_cache, tell_no_prefix_reuse
from .outcome import check_mode, check_sequence, divergence, eval_mode, outcome_span, p_final_rows, padded_rows, upcast
from .planning import BATCH_SIZE, DEFAULT_MAX_WASTE, TOKEN_BUDGET, default_token_budget, plan_passes

def perturbation_scores_naive(
    model, input_ids: torch.Tensor, reasoning: slice, answer: slice, *, mode: str = "last", pad_token_id: int
) -> torch.Tensor:
    """Reference OAR-P, slow and memory-hungry on purpose (one full forward pass per reasoning
    token, full logits, no cache): what `perturbation_scores` is tested against. Same
    arguments and result ``[R]``."""
    check_sequence(input_ids, reasoning, answer)
    check_mode(mode)
    answer_ids = input_ids[answer]

    def outcome(ids: torch.Tensor) -> torch.Tensor:
        logits = model(input_ids=ids[None]).logits  # [1, T, V]: everything, like the paper's code
        if mode == "last":
            return F.log_softmax(upcast(logits[0, answer.start - 1]), -1)
        kept = upcast(logits[0, answer.start - 1 : answer.stop - 1])
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


def perturbation_scores(
    model,
    input_ids: torch.Tensor,
    reasoning: slice,
    answer: slice,
    *,
    mode: str = "last",
    pad_token_id: int,
    batch_size: int | None = BATCH_SIZE.default,
    token_budget: int | None = TOKEN_BUDGET.default,
    max_waste: float = DEFAULT_MAX_WASTE,
    reuse_prefix: bool = True,
    stats: dict | None = None,
) -> torch.Tensor:
    """OAR-P (spec section 4) of one sequence: how much P_final (section 3) changes when each
    reasoning token in turn is replaced by ``pad_token_id`` (attention kept on it).

    `perturbation_scores_batch` with one row (B = 1), whose arguments these are: ``input_ids
    [T]`` is one sequence, prompt + completion, no padding, and ``reasoning``, ``answer``
    half-open spans into it (reasoning ends at or before the answer starts); returns ``[R]``
    float32 scores >= 0. `perturbation_scores_naive` is the reference it is tested equal to.
    (A separate one-sequence fast path was 4-9% faster on one toy sequence and gained nothing
    on a training step, which scores rows together: benchmarks/RESULTS.md, "Speed code that
    earns its lines".)
    """
    check_sequence(input_ids, reasoning, answer)
    return perturbation_scores_batch(model, input_ids[None], torch.ones_like(input_ids)[None], [reasoning], [answer],
                                     mode=mode, pad_token_id=pad_token_id, batch_size=batch_size,
                                     token_budget=token_budget, max_waste=max_waste, reuse_prefix=reuse_prefix,
                                     stats=stats)[0]


def perturbation_scores_batch(
    model,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    reasoning: list[slice],
    answer: list[slice],
    *,
    mode: str = "last",
    pad_token_id: int | None = None,
    batch_size: int | None = BATCH_SIZE.default,
    token_budget: int | None = TOKEN_BUDGET.default,
    max_waste: float = DEFAULT_MAX_WASTE,
    reuse_prefix: bool = True,
    sampled_cache=None,
    stats: dict | None = None,
) -> list[torch.Tensor]:
    """OAR-P (spec section 4) for every row of a padded batch, the perturbed copies of
    several rows sharing forward passes: the scores `perturbation_scores` gives each row.

    Rows are right-aligned on the last token P_final reads (own position ids), so a copy at
    frame column c runs columns c..end. Each group of rows whose clean pass fits
    ``token_budget`` runs that pass once and keeps its KV cache; `plan_passes` packs the
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
        mode: one of `MODES`.
        pad_token_id: the replacement token (required).
        batch_size: at most this many copies per pass (None: the token budget decides).
        token_budget: at most this many tokens held per pass (copies x frame length,
            cached columns included), which bounds the memory; None: `default_token_budget`
            of the model's device.
        max_waste: extra token work allowed, as a fraction of the ideal (0: one copy per pass).
        reuse_prefix: continue from the clean prefix's KV cache (False: every copy from 0).
            A model whose cache cannot be cut back (Mamba or linear-attention layers:
            `oar_lite.attribution.kv.prefix_reusable`) runs every copy from 0 anyway, with a
            one-time warning giving the cost.
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
        ValueError: bad shapes, spans, mode or settings, or a missing ``pad_token_id``.
    """
    check_mode(mode)
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
    rows = padded_rows(input_ids, attention_mask, reasoning, answer)
    spans = [outcome_span(a, mode) for _, _, a in rows]  # (end, keep) per row, relative to its first token
    scores = [torch.zeros(r.stop - r.start, dtype=torch.float64) for _, r, _ in rows]
    tokens = passes = widest = widest_held = 0
    with_reuse = 0  # about what the passes would run continuing from the clean cache (for the warning)
    reuse = reuse_prefix  # turned off for the call if the model's cache cannot be cut back
    device = input_ids.device
    # Groups of rows, longest first, whose clean pass fits the budget.
    order = sorted(range(len(rows)), key=lambda i: -spans[i][0])
    groups: list[list[int]] = []
    for i in order:
        if groups and (len(groups[-1]) + 1) * spans[groups[-1][0]][0] <= token_budget:
            groups[-1].append(i)
        else:
            groups.append([i])
    with torch.no_grad(), eval_mode(model), last_layer_at_end(model, max(keep for _, keep in spans)):
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
            cached = frame_cache(sampled_cache, [rows[i][0].start - (E - spans[i][0]) for i in group], E - K,
                                  group) if sampled_cache is not None else None
            first = E - K if cached is not None else 0
            out = model(input_ids=frame[:, first:], attention_mask=frame_mask, position_ids=positions[:, first:],
                        logits_to_keep=K, **(cache_kwargs(model, cached) if cached is not None else
                                             {"use_cache": reuse}))
            clean = p_final_rows(out.logits[:, -K:], answer_ids, keep_mask, mode)
            clean_cache = output_cache(out) if reuse else None
            if reuse and not prefix_reusable(clean_cache):
                reuse, clean_cache = False, None
            run = n * (E - first)
            tokens, passes, widest, widest_held = tokens + run, passes + 1, max(widest, run), max(widest_held, n * E)
            copies.sort()
            with_reuse += run + sum(E - min(c, E - K) for c, _, _ in copies)
            per_pass = max(1, min(token_budget // E, batch_size or token_budget))
            for lo, hi in plan_passes([c for c, _, _ in copies], E, per_pass=per_pass, max_waste=max_waste,
                                       reuse_prefix=reuse):
                cols = torch.tensor([c for c, _, _ in copies[lo:hi]], device=device)
                who = torch.tensor([j for _, j, _ in copies[lo:hi]], device=device)
                # Continue from the clean cache at the pass's first column, but never past E - K: P_final
                # reads the last K logits, and a row with a shorter answer has reasoning tokens in there.
                b, s = hi - lo, min(copies[lo][0], E - K) if reuse else 0
                variants = frame[who, s:].clone()
                variants[torch.arange(b, device=device), cols - s] = pad_token_id
                cache = select_cache(clean_cache, who, s) if s > 0 else None
                logits = model(input_ids=variants, attention_mask=frame_mask[who], position_ids=positions[who, s:],
                               logits_to_keep=K, **cache_kwargs(model, cache)).logits[:, -K:]
                changed = divergence(clean[who], p_final_rows(logits, answer_ids[who], keep_mask[who], mode), mode)
                for (_, j, k), value in zip(copies[lo:hi], changed.tolist()):
                    scores[group[j]][k] = value
                tokens, passes = tokens + b * (E - s), passes + 1
                widest, widest_held = max(widest, b * (E - s)), max(widest_held, b * E)
    if reuse_prefix and not reuse:
        tell_no_prefix_reuse(model, "OAR-P", tokens, with_reuse)
    if stats is not None:
        stats.update(forward_tokens=tokens, forward_passes=passes, max_pass_tokens=widest,
                     max_pass_held_tokens=widest_held)
    return [s.float().clamp(min=0) for s in scores]
