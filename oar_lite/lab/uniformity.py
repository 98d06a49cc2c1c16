"""How far from uniform (plain GRPO) the reshaped weights are: the threshold tau of each
completion, the share of its tokens clamped to the floor, its effective share (issue 26).

The library's trainers record only the effective share (`oar_lite.reshape.effective_share`);
the lab's runs add the rest: `step_metrics` is the hook `oar_lite.train.train` takes
(`compare`, the ``python -m oar_lite.lab`` command line, benchmarks/weight_uniformity.py and
benchmarks/step_cost.py pass it), `oar_lite.lab.recipes.StudyTrainer` logs the same in TRL.
"""
from __future__ import annotations

from typing import Sequence

import torch

from ..attribution import CreditConfig
from ..reshape import RESHAPING, effective_share, normalised


def weight_uniformity(
    scores: Sequence[torch.Tensor | None],
    weights: Sequence[torch.Tensor],
    *,
    quantile: float = RESHAPING["quantile"].default,
    floor: float = RESHAPING["floor"].default,
) -> list[dict]:
    """How far from uniform (plain GRPO) the reshaped weights of each completion are.

    Args:
        scores: per completion, its ``[R_i]`` reasoning scores (``None``: no parseable answer,
            the row is skipped), as `oar_lite.attribution.token_weights(..., return_scores=True)`
            returns them.
        weights: per completion, its ``[R_i]`` reasoning weights (`bilevel_weights` of those
            scores; e.g. ``weights[i, reasoning_mask[i]]``).
        quantile, floor: the reshaping's q and floor, which tau and "at the floor" refer to.

    Returns:
        One dict per completion with an answer and ``R_i >= 1``: ``tokens`` (R), ``tau`` (the
        threshold on normalised scores; 0 when a quarter or more of the tokens share the
        lowest score, and then nothing is suppressed below the rest), ``at_floor`` (share of
        tokens whose weight was clamped to ``floor`` before mass preservation),
        ``suppressed`` / ``boosted`` (shares with w < 1 / w > 1 after it), ``weight_std``, and
        ``effective_share`` = (sum w)^2 / (R sum w^2): 1 for uniform weights, 1/R when
        one token carries everything (the effective number of tokens over R).

    Raises:
        ValueError: the two lists differ in length, or a row's weights and scores differ in shape.
    """
    if len(scores) != len(weights):
        raise ValueError(f"{len(scores)} score rows but {len(weights)} weight rows; expected one each")
    rows = []
    for i, (s, w) in enumerate(zip(scores, weights)):
        if s is None or s.numel() == 0:
            continue
        if w.shape != s.shape:
            raise ValueError(f"row {i}: weights {tuple(w.shape)} and scores {tuple(s.shape)} differ; expected [R_i] each")
        n, tau = normalised(s.detach().cpu(), quantile)
        w = w.detach().cpu().double()
        tau = float(tau)
        clamped = (n < tau) & (n / (tau + 1e-8) <= floor)
        rows.append({"tokens": int(w.numel()), "tau": tau, "at_floor": float(clamped.double().mean()),
                     "suppressed": float((w < 1 - 1e-6).double().mean()),
                     "boosted": float((w > 1 + 1e-6).double().mean()),
                     "weight_std": float(w.std(unbiased=False)),
                     "effective_share": effective_share(w)})
    return rows


def summarize_uniformity(rows: Sequence[dict]) -> dict:
    """`weight_uniformity` rows of many completions in one record: the mean tau, the share of
    completions with tau = 0, the token share clamped to the floor, the mean effective share,
    and the tau of each completion (its distribution); all None when no row was scored."""
    if not rows:
        return {"tau_mean": None, "tau_zero_share": None, "at_floor": None, "effective_share": None, "taus": []}
    tokens = sum(r["tokens"] for r in rows)
    return {"tau_mean": sum(r["tau"] for r in rows) / len(rows),
            "tau_zero_share": sum(r["tau"] == 0 for r in rows) / len(rows),
            "at_floor": sum(r["at_floor"] * r["tokens"] for r in rows) / tokens,
            "effective_share": sum(r["effective_share"] for r in rows) / len(rows),
            "taus": [round(r["tau"], 4) for r in rows]}


def step_metrics(scores: list, weights: torch.Tensor, reasoning_mask: torch.Tensor, credit: CreditConfig) -> dict:
    """The lab's `oar_lite.train.train` hook: what a train record adds to the library's
    ``weight_effective_share``, from one step's scores (per row ``[R_i]`` or None), weights
    ``[B, T]`` and reasoning mask ``[B, T]``: ``tau_mean``, ``tau_zero_share``,
    ``weight_at_floor`` (`summarize_uniformity`) and ``taus`` (one per scored row)."""
    rows = weight_uniformity(scores, [w[m] for w, m in zip(weights, reasoning_mask)],
                             quantile=credit.quantile, floor=credit.floor)
    summary = summarize_uniformity(rows)
    return {"tau_mean": summary["tau_mean"], "tau_zero_share": summary["tau_zero_share"],
            "weight_at_floor": summary["at_floor"], "taus": summary["taus"]}
