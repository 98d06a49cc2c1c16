"""What a scorer gets besides the sequence: `CreditConfig` (the settings) and `ScorerContext` (what is at hand)."""
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
from .registry import WEIGHTINGS, Method, method_of, takes

METHOD = Setting("oar-g", "Token credit method: 'uniform' (plain GRPO), 'oar-p', 'oar-g', or a scorer registered with "
                          "oar_lite.attribution.register_scorer (the course's and the lab's join when their module is "
                          "imported: oar_lite.course.oracle, oar_lite.lab.scorers), optionally with a P_final mode "
                          "after a colon ('oar-p:answer_joint').")


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
        refused = {name: value for name, value in self.changed().items() if name not in taken}
        if refused:
            given = ", ".join(f"{k}={v!r}" for k, v in refused.items())
            raise ValueError(f"CreditConfig(method={self.method!r}) got {given}, which {self.method!r} does not take; "
                             f"it takes {sorted(taken) or 'no settings'}: drop {', '.join(refused)} (it would have no "
                             f"effect), or name a method that takes {'them' if len(refused) > 1 else 'it'}")

    @functools.cached_property
    def parsed(self) -> Method:
        """`method` as the typed value the scorers get (`oar_lite.attribution.registry.Method`)."""
        return method_of(self.method)

    def reshape(self, scores: torch.Tensor) -> torch.Tensor:
        """``[R]`` scores -> ``[R]`` weights with this config's `bilevel_weights` settings, or with the
        method's own weighting (`WEIGHTINGS`) and the reshaping settings it declares."""
        weighting = WEIGHTINGS.get(self.parsed.name)
        if weighting is not None:
            return weighting(scores, **{name: getattr(self, name) for name in _declared(weighting)})
        return bilevel_weights(scores, **{name: getattr(self, name) for name in RESHAPING})

    def changed(self) -> dict:
        """``{field: value}`` of the settings that differ from their defaults (the method aside)."""
        return {name: getattr(self, name) for name, default in CREDIT_DEFAULTS.items() if getattr(self, name) != default}

    def scorer_options(self) -> dict:
        """The settings this method's scorer declares, which it gets (`takes`)."""
        return {name: getattr(self, name) for name in CREDIT_DEFAULTS if name in takes(self.parsed)}


def credit_settings(method: str | Method) -> set[str]:
    """The `CreditConfig` settings ``method`` takes: those its scorer declares (`takes`) and the
    reshaping's, or those its own weighting declares (`WEIGHTINGS`: none for plain GRPO)."""
    method = method_of(method)
    weighting = WEIGHTINGS.get(method.name)
    return {k for k in CREDIT_DEFAULTS if k in takes(method)} | (set(RESHAPING) if weighting is None else _declared(weighting))


def _declared(weighting) -> set[str]:
    """The reshaping settings (`RESHAPING`) a weighting declares as parameters."""
    return set(RESHAPING) & set(inspect.signature(weighting).parameters)


CREDIT_DEFAULTS = {f.name: f.default for f in dataclasses.fields(CreditConfig) if f.name != "method"}
"""Each `CreditConfig` setting's default (the method aside)."""
CREDIT_FIELDS = tuple(f.name for f in dataclasses.fields(CreditConfig))
"""The `CreditConfig` field names, which `token_weights` also takes as keywords."""
SCORER_FIELDS = tuple(name for name in CREDIT_DEFAULTS if name not in RESHAPING)
"""The `CreditConfig` fields that go to a scorer only (each to the scorers that declare it)."""
CREDIT_RANGES = {name: s.range for name, s in settings_of(CreditConfig).items() if s.range}
"""The allowed range of every numeric `CreditConfig` field (`oar_lite.settings.check_number`)."""


@dataclass(frozen=True)
class ScorerContext:
    """What the caller has at hand; a scorer reads the fields it declares (keyword parameters of
    these names), so one context serves every method: OAR-P's replacement token, a random
    generator (OAR-G's noise, the lab's ``random`` and ``shuffled:``), the oracles' tokenizer, the sampling's
    KV cache of these rows (`oar_lite.rollout.Rollouts.cache`) and a dict for OAR-P's counts."""

    pad_token_id: int | None = None
    generator: torch.Generator | None = None
    tokenizer: Any = None
    sampled_cache: Any = None
    stats: dict | None = None


CONTEXT_FIELDS = tuple(f.name for f in dataclasses.fields(ScorerContext))
