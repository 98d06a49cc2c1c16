"""oar-lite: Outcome-grounded Advantage Reshaping (OAR) for GRPO, small and readable.

The algorithm contract is OAR-SPEC (Li et al. 2026, arXiv 2601.07408): docs/oar-spec.md in
the repository, whose sections the docstrings cite. The notebooks teach it in order.

The core, which knows nothing of the toy world or of training: GRPO in `grpo`; the scorers
(OAR-P, OAR-G, baselines) and `token_weights` with its `CreditConfig` in `attribution`;
scores -> weights in `reshape`; sampling in `rollout`; answer spans in `segment`; rewards in
`reward`. Around it: models in `models`, `toy` (addition with known pivotal tokens, its
oracles in `oracle`) and `problems`; training in `train` (with `seeding`, `checkpoint`,
`evaluate`), `compare`, `report` and `plots`; measuring credit in `credit`,
`ground_truth`, `gradient_quality`, `regime` and `stats`. README, "Layout", draws it.
"""
from .attribution import (
    MODES,
    CreditConfig,
    SCORERS,
    default_token_budget,
    entropy_scores,
    final_outcome,
    gradient_scores,
    gradient_scores_batch,
    mask_to_span,
    parse_method,
    plan_chunks,
    perturbation_scores,
    perturbation_scores_batch,
    perturbation_scores_naive,
    random_scores,
    register_scorer,
    token_scores,
    token_weights,
)
from .grpo import group_advantages, policy_loss, selective_log_softmax, sequence_logprobs, token_advantages
from .models import OfflineModelError, load_hub_model, load_smollm2
from . import problems
from .reshape import bilevel_weights
from .reward import math_reward, math_rewards
from .rollout import Rollouts, sample_completions
from .segment import (
    FORMATS,
    AnswerMatch,
    Segments,
    completion_offsets,
    find_answer,
    segment_completion,
    segment_completion_ids,
    segments_to_masks,
)
from . import toy
from . import gradient_quality, oracle, regime, report
from .credit import credit_benchmark, results_table
from .stats import precision_at_k, roc_auc

__version__ = "0.1.0"
