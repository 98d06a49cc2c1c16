"""Bi-level advantage reshaping (spec section 6, notebook 04): importance scores -> token weights.

The paper and its code call ``boost`` "beta"; here ``beta`` stays TRL's KL coefficient.
"""
from __future__ import annotations

import torch

from .settings import Setting, check_number

RESHAPING = {
    "quantile": Setting(0.25, "Suppression quantile q in [0, 1]: the share of reasoning tokens (by normalised score) "
                              "below the threshold tau; 0 suppresses nothing.", dict(low=0, high=1)),
    "boost": Setting(1.0, "Boost of the most important token, whose weight reaches 1 + boost (>= 0; the paper's "
                          "beta, not TRL's KL beta).", dict(low=0)),
    "floor": Setting(0.1, "Smallest weight a suppressed token keeps, in [0, 1].", dict(low=0, high=1)),
    "preserve_mass": Setting(True, "Rescale each completion's weights to sum to its reasoning length (the total "
                                   "advantage is kept).", label="preserve mass"),
}
"""The reshaping's settings (`bilevel_weights`' keywords), declared once: `oar_lite.attribution.CreditConfig`,
`oar_lite.trl.OARConfig`, the command line and the docs take their defaults, ranges and meanings from here."""


def normalised(scores: torch.Tensor, quantile: float) -> tuple[torch.Tensor, torch.Tensor]:
    """``(n [R], tau [])``: the scores' ``log1p`` min-max normalised to [0, 1] (range taken as
    1 when all are equal) and its ``quantile`` tau (spec section 6). Half precision and
    integers are computed in float32 (torch.quantile needs it). Steps 1-3 of `bilevel_weights`;
    the lab's `weight_uniformity` reads tau from it."""
    if scores.dim() != 1 or scores.numel() == 0:
        raise ValueError(f"scores must be a non-empty [R] tensor, got shape {tuple(scores.shape)}")
    check_number("normalised", "quantile", quantile, **RESHAPING["quantile"].range)
    work = scores if scores.dtype in (torch.float32, torch.float64) else scores.float()
    s = torch.log1p(work)
    span = s.max() - s.min()
    n = (s - s.min()) / (span if span > 0 else torch.ones_like(span))
    return n, torch.quantile(n, quantile)


def bilevel_weights(
    scores: torch.Tensor,
    *,
    quantile: float = RESHAPING["quantile"].default,
    boost: float = RESHAPING["boost"].default,
    floor: float = RESHAPING["floor"].default,
    preserve_mass: bool = RESHAPING["preserve_mass"].default,
) -> torch.Tensor:
    """Token weights from importance scores of one completion's reasoning tokens: below the
    ``quantile`` of the normalised ``log1p`` scores suppressed towards ``floor``, above it
    boosted up to ``1 + boost``.

    Args:
        scores: ``[R]`` non-negative importance scores I_t (OAR-P, OAR-G, ...).
        quantile, boost, floor, preserve_mass: the reshaping (`RESHAPING`).

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
    for name, value in (("quantile", quantile), ("boost", boost), ("floor", floor)):
        check_number("bilevel_weights", name, value, **RESHAPING[name].range)
    if scores.numel() == 0:
        return scores.float()
    if not torch.isfinite(scores).all():
        raise ValueError("importance scores contain NaN or infinite values; expected finite scores >= 0")
    if (scores < 0).any():
        raise ValueError(f"importance scores must be >= 0, got min {scores.min().item():.3g}")
    out_dtype = scores.dtype if scores.is_floating_point() else torch.float32
    n, tau = normalised(scores, quantile)
    suppressed = torch.clamp(n / (tau + 1e-8), min=floor)
    boosted = 1 + boost * (n - tau) / (1 - tau + 1e-8)
    w = torch.where(n < tau, suppressed, boosted)
    if preserve_mass:
        w = w * n.numel() / (w.sum() + 1e-8)
    return w.to(out_dtype)


def effective_share(weights: torch.Tensor) -> float:
    """(sum w)^2 / (R sum w^2) of one completion's ``[R]`` weights: the effective number of
    tokens over R, 1 for uniform weights (GRPO), 1/R when one token carries everything; 1 for
    all-zero weights (nothing to concentrate)."""
    w = weights.detach().double()
    total, squares = float(w.sum()), float((w * w).sum())
    return total * total / (w.numel() * squares) if squares > 0 else 1.0

