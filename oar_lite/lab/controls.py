"""The controls any credit must beat (notebook 06), as wrapper scorers: ``"inverted:<method>"``
reverses ``<method>``'s ranking (misplaced credit: it should learn worse than GRPO),
``"shuffled:<method>"`` permutes its scores within the row (it should learn like GRPO, or
worse). `controlled` makes one, an ordinary scorer (its row and batched forms, the options and
mode of the method it wraps) that `oar_lite.lab.scorers` registers under that name."""
from __future__ import annotations

import inspect
import zlib
from typing import Callable

import torch

from ..attribution.registry import BATCHED, SCORERS, WEIGHTINGS


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


CONTROLS: dict[str, Callable] = {"inverted": inverted, "shuffled": shuffled}
"""The controls by name, each ``control(scores [R], input_ids [T] of the row, generator) -> [R]``."""


def _with_generator(signature: inspect.Signature) -> inspect.Signature:
    """``signature`` with a keyword-only ``generator`` (the control's) if it has none."""
    if "generator" in signature.parameters:
        return signature
    return signature.replace(parameters=[*signature.parameters.values(),
                                         inspect.Parameter("generator", inspect.Parameter.KEYWORD_ONLY, default=None)])


def controlled(control: str, method: str) -> dict:
    """The control ``control`` (`CONTROLS`) of the registered ``method``, as the keywords of
    `oar_lite.attribution.register_scorer`: ``scorer`` (and ``batched`` when ``method`` has a
    batched form) call ``method``'s with every option and mode it declares, then apply the control
    to each row's scores, before ``method``'s ``weighting`` (its own, if it has one). A ``generator`` goes to both: to the method
    first when it declares one (OAR-G's noise), then to the control (the same draws as before
    the controls were scorers)."""
    apply, base = CONTROLS[control], SCORERS[method]
    takes_generator = "generator" in inspect.signature(base).parameters

    def scorer(model, input_ids, reasoning, answer, **options):
        generator = options.get("generator") if takes_generator else options.pop("generator", None)
        return apply(base(model, input_ids, reasoning, answer, **options), input_ids, generator)

    scorer.__signature__ = _with_generator(inspect.signature(base))
    scorer.__name__ = scorer.__qualname__ = f"{control}_{method.replace('-', '_')}"
    out = {"scorer": scorer, "weighting": WEIGHTINGS.get(method)}
    if method in BATCHED:
        batched_base = BATCHED[method]
        batched_takes_generator = "generator" in inspect.signature(batched_base).parameters

        def batched(model, input_ids, attention_mask, reasoning, answer, **options):
            generator = options.get("generator") if batched_takes_generator else options.pop("generator", None)
            rows = batched_base(model, input_ids, attention_mask, reasoning, answer, **options)
            return [apply(s, ids[mask.bool()], generator) for s, ids, mask in zip(rows, input_ids, attention_mask)]

        batched.__signature__ = _with_generator(inspect.signature(batched_base))
        out["batched"] = batched
    return out
