"""What a scorer gets besides the sequence: `CreditConfig`, the settings (each declared once,
where it acts), and `ScorerContext`, what the caller has at hand."""
from __future__ import annotations

import dataclasses
import functools
import inspect
from dataclasses import dataclass
from typing import Any

import torch

from ..settings import Setting, check_settings, settings_of
from ..reshape import RESHAPING, bilevel_weights
from .oar_g import NOISE_STD
from .planning import BATCH_SIZE, TOKEN_BUDGET
from .registry import PLAIN_GRPO, WEIGHTINGS, Method, method_of, takes

METHOD = Setting("oar-g", "Token credit method: a scorer name (oar_lite.attribution.SCORERS; 'uniform' is plain "
                          "GRPO), optionally with a P_final mode after a colon ('oar-p:answer_joint') and behind "
                          "control prefixes ('inverted:', 'shuffled:').")


@dataclass(frozen=True)
class CreditConfig:
    """How credit is assigned to tokens: the scorer and the reshaping of its scores, checked
    on construction (ValueError). `token_weights` takes it, `oar_lite.train.TrainConfig`
    nests it, `oar_lite.trl.OARConfig` builds it. Each field is a `oar_lite.settings.Setting`;
    the reshaping's go to `bilevel_weights`, the others to the scorers that declare them."""

    method: str = METHOD.field()
    quantile: float = RESHAPING["quantile"].field()
    boost: float = RESHAPING["boost"].field()
    floor: float = RESHAPING["floor"].field()
    preserve_mass: bool = RESHAPING["preserve_mass"].field()
    noise_std: float = NOISE_STD.field()
    batch_size: int | None = BATCH_SIZE.field()
    token_budget: int | None = TOKEN_BUDGET.field()

    def __post_init__(self):
        if not isinstance(self.method, str):
            raise ValueError(f"CreditConfig.method={self.method!r}: expected a method name such as 'oar-g'")
        self.parsed  # the method parsed once; ValueError naming the valid scorers, modes and controls
        check_settings(self, "CreditConfig")
        if not isinstance(self.preserve_mass, bool):
            raise ValueError(f"CreditConfig.preserve_mass={self.preserve_mass!r}: expected True or False")
        taken = credit_settings(self.parsed)
        refused = {name: getattr(self, name) for name, default in _DEFAULTS.items()
                   if name not in taken and getattr(self, name) != default}
        if refused:
            given = ", ".join(f"{k}={v!r}" for k, v in refused.items())
            raise ValueError(f"CreditConfig(method={self.method!r}) got {given}, which {self.method!r} does not take; "
                             f"it takes {sorted(taken) or 'no settings (plain GRPO: every weight is 1)'}")

    @functools.cached_property
    def parsed(self) -> Method:
        """`method` as the typed value the scorers get (`oar_lite.attribution.registry.Method`)."""
        return method_of(self.method)

    def reshape(self, scores: torch.Tensor) -> torch.Tensor:
        """``[R]`` scores -> ``[R]`` weights with this config's `bilevel_weights` settings, or,
        for a method with its own weighting (`oar_lite.attribution.registry.WEIGHTINGS`:
        ``"entropy-top"``), with that, given the reshaping settings it declares (``quantile``)."""
        weighting = WEIGHTINGS.get(self.parsed.name)
        if weighting is not None:
            declared = inspect.signature(weighting).parameters
            return weighting(scores, **{name: getattr(self, name) for name in RESHAPING if name in declared})
        return bilevel_weights(scores, **{name: getattr(self, name) for name in RESHAPING})

    def changed(self) -> dict:
        """``{field: value}`` of the settings that differ from their defaults (the method aside)."""
        return {name: getattr(self, name) for name, default in _DEFAULTS.items() if getattr(self, name) != default}

    def scorer_options(self) -> dict:
        """The scorer settings (neither the method nor the reshaping) this method takes."""
        return {name: getattr(self, name) for name in SCORER_FIELDS if name in credit_settings(self.parsed)}


def credit_settings(method: str | Method) -> set[str]:
    """The `CreditConfig` settings ``method`` takes: the reshaping (but plain GRPO's, whose
    weights are all 1) and the scorer settings its scorer declares (`takes`)."""
    method = method_of(method)
    scorer = {k for k in SCORER_FIELDS if k in takes(method)}
    return scorer | (set() if method.name == PLAIN_GRPO else set(RESHAPING))


def for_method(method: str, settings: dict | None = None) -> CreditConfig:
    """A `CreditConfig` of ``method`` with those of ``settings`` (``{field: value}``, e.g. a
    profile's or a command line's, shared by several methods) that it takes (`credit_settings`);
    the others stay their defaults. A name that is no `CreditConfig` field is a ValueError."""
    settings = dict(settings or {})
    unknown = sorted(set(settings) - set(_DEFAULTS))
    if unknown:
        raise ValueError(f"unknown credit setting(s) {unknown}; expected some of {sorted(_DEFAULTS)}")
    taken = credit_settings(method)
    return CreditConfig(method=method, **{k: v for k, v in settings.items() if k in taken})


def for_methods(methods, settings: dict | None = None, *, defaults: dict | None = None) -> dict[str, CreditConfig]:
    """``{method: CreditConfig}`` for several methods sharing ``settings`` (a command line's):
    each method gets those it takes (`for_method`), and ``defaults`` beneath them. A setting that none of ``methods`` takes is
    a ValueError naming each method and what it takes."""
    settings, methods = dict(settings or {}), list(methods)
    taken = {m: credit_settings(m) for m in methods}
    unused = sorted(k for k in settings if k in _DEFAULTS and not any(k in t for t in taken.values()))
    if unused:
        raise ValueError(f"credit setting(s) {unused} are taken by none of the methods {methods}; they take "
                         + "; ".join(f"{m}: {sorted(t) or 'no settings (plain GRPO)'}" for m, t in taken.items()))
    return {m: for_method(m, {**(defaults or {}), **settings}) for m in methods}


_DEFAULTS = {f.name: f.default for f in dataclasses.fields(CreditConfig) if f.name != "method"}
CREDIT_FIELDS = tuple(f.name for f in dataclasses.fields(CreditConfig))
SCORER_FIELDS = tuple(name for name in _DEFAULTS if name not in RESHAPING)
"""The `CreditConfig` fields that go to a scorer (each to the scorers that declare it)."""
"""The `CreditConfig` field names, which `token_weights` also takes as keywords."""
CREDIT_RANGES = {name: s.range for name, s in settings_of(CreditConfig).items() if s.range}
"""The allowed range of every numeric `CreditConfig` field (`oar_lite.settings.check_number`)."""


@dataclass(frozen=True)
class ScorerContext:
    """What the caller has at hand; a scorer reads the fields it declares (keyword parameters of
    these names), so one context serves every method: OAR-P's replacement token, a random
    generator (OAR-G's noise, ``random``, ``shuffled:``), the oracles' tokenizer, the sampling's
    KV cache of these rows (`oar_lite.rollout.Rollouts.cache`) and a dict for OAR-P's counts."""

    pad_token_id: int | None = None
    generator: torch.Generator | None = None
    tokenizer: Any = None
    sampled_cache: Any = None
    stats: dict | None = None


CONTEXT_FIELDS = tuple(f.name for f in dataclasses.fields(ScorerContext))
