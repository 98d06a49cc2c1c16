"""Method-name prefixes that turn any scorer into a control (``"inverted:oracle"``): the
library parses them and applies the registered ones (`CONTROLS`); the lab registers
``inverted`` and ``shuffled`` (`oar_lite.lab.controls`, notebook 06). They nest."""
from __future__ import annotations

from typing import Callable

import torch

CONTROLS: dict[str, Callable] = {}
"""Controls by prefix, each ``control(scores [R], input_ids [T], generator) -> [R]``; empty
until the lab is imported."""


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


def apply_controls(controls, scores: torch.Tensor, input_ids: torch.Tensor,
                   generator: torch.Generator | None = None) -> torch.Tensor:
    """Apply the controls of `split_controls` to one row's scores ``[R]`` (of ``input_ids
    [T]``), innermost first."""
    for control in reversed(controls):
        scores = CONTROLS[control](scores, input_ids, generator)
    return scores
