"""Scorers by method name (`SCORERS`) and the method grammar (`Method`, parsed once by
`method_of`: ``"oar-p:answer_joint"``, ``"inverted:oracle"``). A scorer declares what it takes
as keyword-only parameters (`declared_options`); the entry points pass it those and refuse any other."""
from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass
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
    _parse.cache_clear()  # a scorer of this name may now take a mode, or not
    BATCHED.pop(name, None)
    WEIGHTINGS.pop(name, None)
    if batched is not None:
        BATCHED[name] = batched
    if weighting is not None:
        WEIGHTINGS[name] = weighting


@dataclass(frozen=True)
class Method:
    """A method string parsed once (`method_of`), the typed value passed on: its control
    prefixes (outermost first), its scorer's name and the P_final mode it names (None: its
    scorer's default, `run_mode`). ``str(method)`` writes it back: ``"inverted:oar-p:last"``."""

    controls: tuple[str, ...]
    name: str
    mode: str | None = None

    @property
    def run_mode(self) -> str | None:
        """The P_final mode it runs in: the one it names, or its scorer's default (None: no mode)."""
        return self.mode or default_mode(self.name)

    def __str__(self) -> str:
        return ":".join([*self.controls, self.name, *([self.mode] if self.mode else [])])


def method_of(method: str | Method) -> Method:
    """``method`` as a `Method`: a string is parsed (once: the result is kept), ValueError naming
    the valid scorers, modes and controls; a `Method` is returned as it is."""
    if isinstance(method, Method):
        return method
    if not isinstance(method, str):
        raise ValueError(f"method must be a str such as 'oar-g' or 'inverted:oracle', got {method!r}")
    parsed = _parse(method)
    if parsed.name not in SCORERS:  # unregistered since it was parsed: parse again, which says so
        _parse.cache_clear()
        parsed = _parse(method)
    return parsed


def declared_options(name: str, *, batched: bool = False) -> tuple[str, ...]:
    """The keywords scorer ``name`` (its batched form with ``batched``) takes, but the mode."""
    scorer = BATCHED[name] if batched else SCORERS[name]
    return tuple(p.name for p in inspect.signature(scorer).parameters.values()
                 if p.kind is p.KEYWORD_ONLY and p.name != "mode")


def takes(method: str | Method) -> set[str]:
    """The keywords ``method``'s scorer declares, in its row and batched forms."""
    name = method_of(method).name
    return set(declared_options(name)) | (set(declared_options(name, batched=True)) if name in BATCHED else set())


def default_mode(name: str) -> str | None:
    """The P_final mode scorer ``name`` uses when the method names none (None: it takes no mode)."""
    mode = inspect.signature(SCORERS[name]).parameters.get("mode")
    return None if mode is None else mode.default


def mode_of(method: str | Method) -> str | None:
    """The P_final mode ``method`` runs in: the one it names, or its scorer's default (None: no mode)."""
    return method_of(method).run_mode


def parse_method(method: str | Method) -> tuple[str, str | None]:
    """``"oar-p:answer_joint"`` -> ``("oar-p", "answer_joint")``; ``"oar-g"`` -> ``("oar-g", None)``.

    Control prefixes are validated and dropped: ``"inverted:oar-p:last"`` -> ``("oar-p",
    "last")`` (`method_of` keeps them)."""
    m = method_of(method)
    return m.name, m.mode


@functools.lru_cache(maxsize=None)
def _parse(text: str) -> Method:
    """The grammar, ``[control:]*name[:mode]``; a string that fails raises (and is not kept)."""
    controls, method = split_controls(text)
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
    return Method(controls, name, mode or None)


def uniform_scores(model, input_ids: torch.Tensor, reasoning: slice, answer: slice) -> torch.Tensor:
    """Plain GRPO: every reasoning token equally important (all weights become 1). ``[R]``."""
    check_sequence(input_ids, reasoning, answer)
    return torch.ones(reasoning.stop - reasoning.start)


# The library's scorers; the course registers its oracles, the lab its baselines (`oar_lite.lab.baselines`).
register_scorer(PLAIN_GRPO, uniform_scores)
register_scorer("oar-p", perturbation_scores, batched=perturbation_scores_batch)
register_scorer("oar-g", gradient_scores, batched=gradient_scores_batch)
