"""What a scorer gets besides the sequence: `CreditConfig`, the settings (each declared once,
where it acts), and `ScorerContext`, what the caller has at hand."""
from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass
from typing import Any

import torch

from ..checks import Setting, check_settings, settings_of
from ..reshape import RESHAPING, bilevel_weights
from .oar_g import NOISE_STD
from .planning import BATCH_SIZE, TOKEN_BUDGET
from .registry import WEIGHTINGS, parse_method

METHOD = Setting("oar-g", "Token credit method: a scorer name (oar_lite.attribution.SCORERS; 'uniform' is plain "
                          "GRPO), optionally with a P_final mode after a colon ('oar-p:answer_joint') and behind "
                          "control prefixes ('inverted:', 'shuffled:').")


@dataclass(frozen=True)
class CreditConfig:
    """How credit is assigned to tokens: the scorer and the reshaping of its scores, checked
    on construction (ValueError). `token_weights` takes it, `oar_lite.train.TrainConfig`
    nests it, `oar_lite.trl.OARConfig` builds it. Each field is a `oar_lite.checks.Setting`;
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
        parse_method(self.method)  # ValueError naming the valid scorers, modes and controls
        check_settings(self, "CreditConfig")
        if not isinstance(self.preserve_mass, bool):
            raise ValueError(f"CreditConfig.preserve_mass={self.preserve_mass!r}: expected True or False")

    def reshape(self, scores: torch.Tensor) -> torch.Tensor:
        """``[R]`` scores -> ``[R]`` weights with this config's `bilevel_weights` settings, or,
        for a method with its own weighting (`oar_lite.attribution.registry.WEIGHTINGS`:
        ``"entropy-top"``), with that, given the reshaping settings it declares (``quantile``)."""
        weighting = WEIGHTINGS.get(parse_method(self.method)[0])
        if weighting is not None:
            declared = inspect.signature(weighting).parameters
            return weighting(scores, **{name: getattr(self, name) for name in RESHAPING if name in declared})
        return bilevel_weights(scores, **{name: getattr(self, name) for name in RESHAPING})

    def scorer_options(self) -> dict:
        """The settings that are neither the method nor the reshaping: the scorers'."""
        return {name: getattr(self, name) for name in CREDIT_FIELDS if name != "method" and name not in RESHAPING}


CREDIT_FIELDS = tuple(f.name for f in dataclasses.fields(CreditConfig))
"""The `CreditConfig` field names, which `token_weights` also takes as keywords."""
CREDIT_RANGES = {name: s.range for name, s in settings_of(CreditConfig).items() if s.range}
"""The allowed range of every numeric `CreditConfig` field (`oar_lite.checks.check_number`)."""


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
