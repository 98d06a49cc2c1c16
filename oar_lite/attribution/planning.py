"""How OAR-P groups its perturbed copies into forward passes (spec section 4, "done well"):
`plan_passes`, for the copies of a padded batch (one sequence is a batch of one), within a
token budget per pass (`default_token_budget`) and ``max_waste`` of extra work."""
from __future__ import annotations

import torch

from ..settings import Setting

DEFAULT_TOKEN_BUDGET = {"cpu": 4096, "cuda": 65536}
"""Tokens per OAR-P forward pass by device type (perturbed copies x their length); others: the CPU's."""

DEFAULT_MAX_WASTE = 0.15
"""OAR-P's default extra token work, as a fraction of the ideal (each copy starting at its own
position). More waste buys fewer, larger passes: on one sequence of a small model, where a
forward pass costs mostly its fixed overhead, 0.15 takes 10-17% less time than 0.1; on SmolLM2,
where a pass costs its tokens, and in training's batched passes, bound by the token budget, the
two take the same time (benchmarks/RESULTS.md, "OAR-P implementations" and "Step cost")."""


BATCH_SIZE = Setting(64, "OAR-P: at most this many perturbed copies per forward pass (>= 1; None: the token "
                         "budget alone decides); bounds its memory in training.", dict(integer=True, low=1, optional=True),
                     label="OAR-P batch size")
TOKEN_BUDGET = Setting(None, "OAR-P: at most this many tokens per forward pass (>= 1), which bounds its memory; None: "
                             "the device's (default_token_budget).", dict(integer=True, low=1, optional=True),
                       label="OAR-P token budget")


def default_token_budget(device: torch.device | str) -> int:
    """OAR-P's tokens per forward pass on ``device``: small on a CPU, where a pass of a few
    thousand tokens already runs at full speed per token and larger ones only add memory;
    large on a GPU, whose parallelism needs big batches (`DEFAULT_TOKEN_BUDGET`)."""
    return DEFAULT_TOKEN_BUDGET.get(torch.device(device).type, DEFAULT_TOKEN_BUDGET["cpu"])


def largest_fitting(fits, low: int, high: int) -> int:
    """The largest ``x`` in ``[low, high]`` with ``fits(x)``, by bisection: ``fits`` must hold
    at ``low`` and, once false, stay false for larger ``x``."""
    while low < high:
        mid = (low + high + 1) // 2
        if fits(mid):
            low = mid
        else:
            high = mid - 1
    return low


def plan_passes(columns: list[int], end: int, *, per_pass: int, max_waste: float,
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
    widest = largest_fitting(lambda span: greedy(span)[1] <= max_waste * ideal, 1, end)
    fewest = len(greedy(widest)[0])
    narrowed = largest_fitting(lambda cut: len(greedy(widest + 1 - cut)[0]) <= fewest, 1, widest)
    return greedy(widest + 1 - narrowed)[0]
