"""Scorers by method name (`SCORERS`, `parse_method`: ``"oar-p:answer_joint"``,
``"inverted:oracle"``). A scorer declares what it takes as keyword-only parameters
(`declared_options`); the entry points pass it those and refuse any other."""
from __future__ import annotations

import inspect
from typing import Callable

import torch

from .controls import CONTROLS, split_controls
from .oar_g import gradient_scores, gradient_scores_batch
from .oar_p import perturbation_scores, perturbation_scores_batch
from .outcome import check_mode, check_sequence

Scorer = Callable[..., torch.Tensor]
PLAIN_GRPO = "uniform"
"""The method name of plain GRPO (every token weight 1): it takes no reshaping and no scorer setting."""
OLD_NAMES = {"none": PLAIN_GRPO}
"""Method names no longer taken, and their names now (files written before keep them: the lab
reads them under the new name)."""
SCORERS: dict[str, Scorer] = {}
"""Scorers by method name, each ``scorer(model, input_ids [T], reasoning, answer, **options) -> [R]``.
The toy world's oracles (`oar_lite.course.oracle`) and the lab's baselines register themselves here."""
BATCHED: dict[str, Callable] = {}
"""The padded-batch form of a scorer, by method name: ``(model, input_ids [B, T],
attention_mask [B, T], reasoning, answer, **options) -> B tensors [R_i]``."""
WEIGHTINGS: dict[str, Callable] = {}
"""The methods whose scores do not go through `oar_lite.reshape.bilevel_weights`, by name:
``weighting(scores [R], **reshaping settings it declares) -> weights [R]`` (the lab's ``"entropy-top"``:
TRL's top-entropy mask, `oar_lite.lab.baselines.top_quantile_weights`). `CreditConfig.reshape` uses it."""


def register_scorer(name: str, scorer: Scorer, *, batched: Callable | None = None,
                    weighting: Callable | None = None) -> None:
    """Make ``scorer(model, input_ids [T], reasoning, answer, **options) -> [R]`` available
    to `token_scores` and `token_weights` as ``method=name``; ``batched``, its padded-batch
    form, scores a whole batch in shared passes (equal up to rounding); ``weighting``, what
    turns its scores into weights instead of `bilevel_weights` (`WEIGHTINGS`)."""
    if ":" in name:
        raise ValueError(f"scorer names cannot contain ':' (it separates the P_final mode), got {name!r}")
    if name in CONTROLS:
        raise ValueError(f"{name!r} is a control prefix ({', '.join(CONTROLS)}), not a scorer name")
    SCORERS[name] = scorer
    BATCHED.pop(name, None)
    WEIGHTINGS.pop(name, None)
    if batched is not None:
        BATCHED[name] = batched
    if weighting is not None:
        WEIGHTINGS[name] = weighting


def uniform_scores(model, input_ids: torch.Tensor, reasoning: slice, answer: slice) -> torch.Tensor:
    """Plain GRPO: every reasoning token equally important (all weights become 1). ``[R]``."""
    check_sequence(input_ids, reasoning, answer)
    return torch.ones(reasoning.stop - reasoning.start)


# The library's scorers; the course registers its oracles, the lab its baselines (`oar_lite.lab.baselines`).
register_scorer(PLAIN_GRPO, uniform_scores)
register_scorer("oar-p", perturbation_scores, batched=perturbation_scores_batch)
register_scorer("oar-g", gradient_scores, batched=gradient_scores_batch)


def declared_options(name: str, *, batched: bool = False) -> tuple[str, ...]:
    """The keywords scorer ``name`` (its batched form with ``batched``) takes, but the mode."""
    scorer = BATCHED[name] if batched else SCORERS[name]
    return tuple(p.name for p in inspect.signature(scorer).parameters.values()
                 if p.kind is p.KEYWORD_ONLY and p.name != "mode")


def takes(method: str) -> set[str]:
    """The keywords ``method``'s scorer declares, in its row and batched forms."""
    name, _ = parse_method(method)
    return set(declared_options(name)) | (set(declared_options(name, batched=True)) if name in BATCHED else set())


def default_mode(name: str) -> str | None:
    """The P_final mode scorer ``name`` uses when the method names none (None: it takes no mode)."""
    mode = inspect.signature(SCORERS[name]).parameters.get("mode")
    return None if mode is None else mode.default


def mode_of(method: str) -> str | None:
    """The P_final mode ``method`` runs in: the one it names, or its scorer's default (None: no mode)."""
    name, mode = parse_method(method)
    return mode or default_mode(name)


def parse_method(method: str) -> tuple[str, str | None]:
    """``"oar-p:answer_joint"`` -> ``("oar-p", "answer_joint")``; ``"oar-g"`` -> ``("oar-g", None)``.

    Control prefixes are validated and dropped: ``"inverted:oar-p:last"`` -> ``("oar-p",
    "last")`` (`split_controls` returns them)."""
    _, method = split_controls(method)
    name, _, mode = method.partition(":")
    if name in OLD_NAMES:
        raise ValueError(f"method {name!r} is the old name of {OLD_NAMES[name]!r} (plain GRPO); write {OLD_NAMES[name]!r}")
    if name not in SCORERS:
        raise ValueError(f"unknown method {name!r}; expected one of {sorted(SCORERS)} (optionally ':<mode>', "
                         f"optionally behind a control prefix {' or '.join(c + ':' for c in CONTROLS)})")
    if mode:
        if default_mode(name) is None:
            raise ValueError(f"method {name!r} takes no P_final mode, got {method!r}")
        check_mode(mode)
    return name, mode or None
