"""Bi-level advantage reshaping (spec section 6, notebook 04): importance scores -> token weights.

The paper and its code call ``boost`` "beta"; here ``beta`` stays TRL's KL coefficient.
"""
from __future__ import annotations

import torch

from .checks import check_number


def bilevel_weights(
    scores: torch.Tensor,
    *,
    quantile: float = 0.25,
    boost: float = 1.0,
    floor: float = 0.1,
    preserve_mass: bool = True,
) -> torch.Tensor:
    """Token weights from importance scores of one completion's reasoning tokens: below the
    ``quantile`` of the normalised ``log1p`` scores suppressed towards ``floor``, above it
    boosted up to ``1 + boost``.

    Args:
        scores: ``[R]`` non-negative importance scores I_t (OAR-P, OAR-G, ...).
        quantile: q, the share of tokens (by normalised score) below the suppression
            threshold tau; ``0`` suppresses nothing.
        boost: how much the most important token is boosted (weight up to ``1 + boost``).
        floor: the smallest weight a suppressed token keeps, in ``[0, 1]``.
        preserve_mass: rescale so the weights sum to R (the total advantage is kept).

    Returns:
        ``[R]`` weights in the scores' floating dtype (float32 for integer scores; bf16 and
        fp16 are computed in float32). Equal scores give all 1.

    Raises:
        ValueError: scores not ``[R]``, negative or not finite; settings out of range.
    """
    if not torch.is_tensor(scores):
        scores = torch.as_tensor(scores, dtype=torch.float32)
    if scores.dim() != 1:
        raise ValueError(f"scores must be 1-D [R], got shape {tuple(scores.shape)}")
    check_number("bilevel_weights", "quantile", quantile, low=0, high=1)
    check_number("bilevel_weights", "boost", boost, low=0)
    check_number("bilevel_weights", "floor", floor, low=0, high=1)
    if scores.numel() == 0:
        return scores.float()
    if not torch.isfinite(scores).all():
        raise ValueError("importance scores contain NaN or infinite values; expected finite scores >= 0")
    if (scores < 0).any():
        raise ValueError(f"importance scores must be >= 0, got min {scores.min().item():.3g}")
    # Half precision is computed in float32 (torch.quantile needs it).
    out_dtype = scores.dtype if scores.is_floating_point() else torch.float32
    work = scores if scores.dtype in (torch.float32, torch.float64) else scores.float()
    s = torch.log1p(work)
    span = s.max() - s.min()
    n = (s - s.min()) / (span if span > 0 else torch.ones_like(span))
    tau = torch.quantile(n, quantile)
    suppressed = torch.clamp(n / (tau + 1e-8), min=floor)
    boosted = 1 + boost * (n - tau) / (1 - tau + 1e-8)
    w = torch.where(n < tau, suppressed, boosted)
    if preserve_mass:
        w = w * n.numel() / (w.sum() + 1e-8)
    return w.to(out_dtype)
