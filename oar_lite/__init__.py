"""oar-lite: Outcome-grounded Advantage Reshaping (OAR) for GRPO, small and readable.

The algorithm contract is OAR-SPEC (Li et al. 2026, arXiv 2601.07408; ACL 2026):
docs/oar-spec.md in the repository, whose sections the docstrings cite.

`import oar_lite` loads the library alone, the part a researcher puts into their own GRPO run:
GRPO in `grpo`; the scorers (OAR-P, OAR-G, plain GRPO's uniform) and `token_weights` with its
`CreditConfig` in `attribution`; scores -> weights in `reshape`; sampling in `rollout`; answer
spans in `segment`; rewards in `reward`; the settings system in `settings`, seeds in `seeding`; the readable
trainer in `train` (with `checkpoint` and `evaluate`); TRL's trainer in `trl` (imported on its
own: it needs TRL).

Beside it, never imported by it: `oar_lite.course` (the toy addition world with known pivotal
tokens and its oracles, the word problems, model loading, plots of tokens, the graded
exercises) and `oar_lite.lab` (the experiments, the baselines and controls they compare OAR with,
their statistics and tables, and the shipped results they read). `oar_lite.course` and `oar_lite.lab` are loaded on first use. README,
"Layout", draws the three layers.
"""
from .attribution import (MODES, SCORERS, CreditConfig, default_token_budget, final_outcome, gradient_scores,
                          gradient_scores_batch, mask_to_span, method_of, perturbation_scores,
                          perturbation_scores_batch, perturbation_scores_naive, register_scorer, token_scores,
                          token_weights)
from .grpo import group_advantages, policy_loss, selective_log_softmax, sequence_logprobs, token_advantages
from .reshape import bilevel_weights
from .reward import math_reward, math_rewards
from .rollout import Rollouts, sample_completions
from .segment import (FORMATS, AnswerMatch, Segments, completion_offsets, find_answer, segment_completion,
                      segment_completion_ids, segments_to_masks)

__version__ = "0.1.0"


def __getattr__(name: str):
    """``oar_lite.course`` and ``oar_lite.lab`` on first use (PEP 562), so ``import oar_lite``
    loads neither."""
    if name in ("course", "lab"):
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
