"""Method-name prefixes that turn any scorer into a control (notebook 06): ``"inverted:"``
reverses the ranking (misplaced credit: it should learn worse than GRPO), ``"shuffled:"``
permutes the scores within the row (it should learn like GRPO, or worse). They nest."""
from __future__ import annotations

import zlib

import torch

CONTROLS = ("inverted", "shuffled")
"""Method-name prefixes that turn any scorer into a control."""


def split_controls(method: str) -> tuple[tuple[str, ...], str]:
    """``"inverted:shuffled:oar-p:last"`` -> ``(("inverted", "shuffled"), "oar-p:last")``."""
    if not isinstance(method, str):
        raise ValueError(f"method must be a str such as 'oar-g' or 'inverted:oracle', got {method!r}")
    controls = []
    head, sep, rest = method.partition(":")
    while sep and head in CONTROLS:
        controls.append(head)
        method = rest
        head, sep, rest = method.partition(":")
    if method in CONTROLS:
        raise ValueError(f"{method!r} is a control, not a method: write e.g. '{method}:oracle'")
    return tuple(controls), method


def inverted(scores: torch.Tensor) -> torch.Tensor:
    """The ranking reversed: ``log1p`` of the result is ``log1p(max) + log1p(min) - log1p(s)``,
    so `bilevel_weights`' normalised scores become ``1 - n``. ``[R] -> [R]``, >= 0."""
    s = torch.log1p(scores.double())
    return torch.expm1(s.max() + s.min() - s).clamp(min=0).to(scores.dtype if scores.is_floating_point() else torch.float32)


def shuffled(scores: torch.Tensor, input_ids: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """The scores permuted within the row: by ``generator`` if given, else by a generator
    seeded from the row's tokens (the same row always gets the same permutation)."""
    if generator is None:
        seed = zlib.crc32(input_ids.detach().cpu().to(torch.int64).numpy().tobytes())
        generator = torch.Generator().manual_seed(seed)
    return scores[torch.randperm(scores.numel(), generator=generator).to(scores.device)]


def apply_controls(controls, scores: torch.Tensor, input_ids: torch.Tensor,
                   generator: torch.Generator | None = None) -> torch.Tensor:
    """Apply the controls of `split_controls` to one row's scores ``[R]`` (of ``input_ids
    [T]``), innermost first."""
    for control in reversed(controls):
        if control == "inverted":
            scores = inverted(scores)
        else:
            scores = shuffled(scores, input_ids, generator)
    return scores
