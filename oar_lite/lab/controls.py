"""The controls any credit must beat (notebook 06), registered as method-name prefixes
(`oar_lite.attribution.controls.CONTROLS`) when the lab is imported: ``"inverted:"`` reverses
the ranking (misplaced credit: it should learn worse than GRPO), ``"shuffled:"`` permutes the
scores within the row (it should learn like GRPO, or worse). They nest."""
from __future__ import annotations

import zlib

import torch

from ..attribution.controls import CONTROLS


def inverted(scores: torch.Tensor, input_ids: torch.Tensor | None = None,
             generator: torch.Generator | None = None) -> torch.Tensor:
    """The ranking reversed: ``log1p`` of the result is ``log1p(max) + log1p(min) - log1p(s)``,
    so `bilevel_weights`' normalised scores become ``1 - n``. ``[R] -> [R]``, >= 0 (the row's
    ``input_ids`` and the ``generator`` are not used)."""
    s = torch.log1p(scores.double())
    return torch.expm1(s.max() + s.min() - s).clamp(min=0).to(scores.dtype if scores.is_floating_point() else torch.float32)


def shuffled(scores: torch.Tensor, input_ids: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """The scores permuted within the row: by ``generator`` if given, else by a generator
    seeded from the row's tokens (the same row always gets the same permutation)."""
    if generator is None:
        seed = zlib.crc32(input_ids.detach().cpu().to(torch.int64).numpy().tobytes())
        generator = torch.Generator().manual_seed(seed)
    return scores[torch.randperm(scores.numel(), generator=generator).to(scores.device)]


CONTROLS.update(inverted=inverted, shuffled=shuffled)
