"""Methods by name (`SCORERS`) and their grammar, ``name[:mode]`` (`Method`, parsed once by
`method_of`); a scorer declares what it takes as keyword-only parameters (`declared_options`).

What a method name may be, in one place (`OARConfig`, `TrainConfig`, the command lines and
`token_weights` all parse it here): the library's `LIBRARY_METHODS`, never replaced, and those
registered with `register_scorer`, once each (a taken name is refused unless ``replace=True``).
The course's and the lab's are registered by importing their module (`ELSEWHERE`), never by
``import oar_lite``, ``oar_lite.course`` or ``oar_lite.lab``."""
from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass
from typing import Callable

import torch

from .oar_g import gradient_scores, gradient_scores_batch
from .oar_p import perturbation_scores, perturbation_scores_batch
from .outcome import MODES, check_mode, check_sequence

Scorer = Callable[..., torch.Tensor]
PLAIN_GRPO = "uniform"
"""The method name of plain GRPO (every token weight 1): it takes no setting."""
LIBRARY_METHODS = {PLAIN_GRPO: "GRPO", "oar-g": "OAR-G", "oar-p": "OAR-P"}
"""The library's methods and their display names (tables, plots, logs' readers: `display_name`)."""
ELSEWHERE = "oar_lite.course.oracle (the toy world's oracles), oar_lite.lab.scorers (the lab's methods, those included)"
"""Where the methods beyond the library's are registered: importing the module registers them."""
SCORERS: dict[str, Scorer] = {}
"""Methods by name, each ``scorer(model, input_ids [T], reasoning, answer, **options) -> [R]``."""
BATCHED: dict[str, Callable] = {}
"""Padded-batch forms, ``(model, input_ids [B, T], attention_mask [B, T], reasoning, answer, **options) -> B [R_i]``."""
WEIGHTINGS: dict[str, Callable] = {}
"""Methods with their own weighting in place of `bilevel_weights` (plain GRPO; the lab's entropy-top,
grail): ``weighting(scores [R], **the reshaping settings it declares) -> weights [R]``."""


def register_scorer(name: str, scorer: Scorer, *, batched: Callable | None = None,
                    weighting: Callable | None = None, replace: bool = False) -> None:
    """Make ``scorer(model, input_ids [T], reasoning, answer, **options) -> [R]`` the method ``name``;
    ``batched``, its padded-batch form, scores a batch in shared passes (equal up to rounding);
    ``weighting`` turns its scores into weights instead of `bilevel_weights` (`WEIGHTINGS`). ValueError
    when ``name`` is the library's, is taken (unless ``replace``), is no text or ends in ``:<mode>``."""
    if not isinstance(name, str) or not name or name != name.strip():
        raise ValueError(f"a scorer name is a non-empty str without surrounding spaces, got {name!r}")
    if name.rpartition(":")[2] in MODES:
        raise ValueError(f"scorer names cannot end in ':<P_final mode>' (the method grammar's), got {name!r}")
    if name in LIBRARY_METHODS and SCORERS.get(name) is not None:
        raise ValueError(f"{name!r} is the library's method ({LIBRARY_METHODS[name]}) and cannot be replaced; "
                         "register yours under another name")
    if name in SCORERS and not replace:
        raise ValueError(f"method {name!r} is registered already ({SCORERS[name].__module__}.{SCORERS[name].__qualname__}"
                         "); register yours under another name, or pass replace=True to replace it")
    SCORERS[name] = scorer
    BATCHED.pop(name, None)
    WEIGHTINGS.pop(name, None)
    if batched is not None:
        BATCHED[name] = batched
    if weighting is not None:
        WEIGHTINGS[name] = weighting
    _parse.cache_clear()  # a scorer of this name may now take a mode, or not


@dataclass(frozen=True)
class Method:
    """A method string parsed once (`method_of`): its scorer's name and the P_final mode it names
    (None: its scorer's default, `run_mode`); ``str(method)`` writes it back (``"oar-p:last"``)."""

    name: str
    mode: str | None = None

    @property
    def run_mode(self) -> str | None:
        """The P_final mode it runs in: the one it names, or its scorer's default (None: no mode)."""
        return self.mode or default_mode(self.name)

    def __str__(self) -> str:
        return self.name + (f":{self.mode}" if self.mode else "")


def method_of(method: str | Method) -> Method:
    """``method`` as a `Method` (``"oar-p:answer_joint"``: name ``"oar-p"``, mode ``"answer_joint"``):
    a string is parsed (once: the result is kept), ValueError naming the registered methods, the
    modes and where other methods come from; a `Method` is returned as it is."""
    if isinstance(method, Method):
        return method
    if not isinstance(method, str):
        raise ValueError(f"method must be a str such as 'oar-g' or 'oar-p:last', got {method!r}")
    parsed = _parse(method)
    if parsed.name not in SCORERS:  # unregistered since it was parsed: parse again, which says so
        _parse.cache_clear()
        parsed = _parse(method)
    return parsed


@functools.lru_cache(maxsize=None)
def _parse(text: str) -> Method:
    """``name[:mode]``, a registered name first (it may hold a colon); a failure is not kept."""
    if text in SCORERS:
        return Method(text)
    name, _, mode = text.rpartition(":")
    if name not in SCORERS:
        spelled = " (plain GRPO is spelled 'uniform')" if text.partition(":")[0] in ("none", "grpo", "GRPO") else ""
        raise ValueError(f"unknown method {text!r}{spelled}; registered: {sorted(SCORERS)}, each optionally with "
                         f"':<P_final mode>' ({', '.join(MODES)}). Other methods are registered by importing their "
                         f"module: {ELSEWHERE}")
    if default_mode(name) is None:
        raise ValueError(f"method {name!r} takes no P_final mode, got {text!r}")
    check_mode(mode)
    return Method(name, mode)


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


def display_name(method: str | Method) -> str:
    """How tables, plots and logs' readers name a method: the library's by `LIBRARY_METHODS`
    (``"uniform"`` is ``"GRPO"``), any other as it is written."""
    return LIBRARY_METHODS.get(str(method), str(method))


def uniform_weights(model, input_ids: torch.Tensor, reasoning: slice, answer: slice) -> torch.Tensor:
    """Plain GRPO: every reasoning token's weight is 1. ``[R]``."""
    check_sequence(input_ids, reasoning, answer)
    return torch.ones(reasoning.stop - reasoning.start)


register_scorer(PLAIN_GRPO, uniform_weights, weighting=lambda scores: scores)  # its ones are its weights
register_scorer("oar-p", perturbation_scores, batched=perturbation_scores_batch)
register_scorer("oar-g", gradient_scores, batched=gradient_scores_batch)
