"""oar-lite: Outcome-grounded Advantage Reshaping (OAR) for GRPO, small and readable.

The algorithm contract is OAR-SPEC (Li et al. 2026, arXiv 2601.07408):

- `group_advantages`, `policy_loss`, `token_advantages`: GRPO (`oar_lite.grpo`).
- `perturbation_scores` (OAR-P), `gradient_scores` (OAR-G) and baselines, one calling
  convention, and `token_weights`, the batched entry point, with its settings in one
  `CreditConfig` (`oar_lite.attribution`).
- `bilevel_weights`: scores -> token weights (`oar_lite.reshape`).
- `find_answer`, `segment_completion`, `segment_completion_ids`, `segments_to_masks`:
  where the reasoning ends and the answer is (`oar_lite.segment`).
- `math_reward`: verifiable reward with math-verify (`oar_lite.reward`).
- `load_smollm2` (SmolLM2-135M-Instruct offline, from its PyPI wheel) and `load_hub_model`
  (hub models for GPUs) (`oar_lite.models`); `problems`: arithmetic word problems with
  exact answers and chat prompts (`problems.make_problems`, `problems.format_prompt`).
- `toy`: the addition world with known pivotal tokens and its shipped model
  (`toy.make_problems`, `toy.load_model`, `toy.token_labels`); `credit_benchmark` scores
  attribution methods against its labels (`oar_lite.credit`).
- `oracle`: the toy world's ground-truth credit (scorers ``"oracle"``, ``"oracle-pivotal"``)
  and the controls ``"inverted:<method>"`` / ``"shuffled:<method>"``; `gradient_quality`:
  cosine, bias and SNR of each weighting's batch gradient; `regime`: steps to a target
  over seeds with bootstrap intervals and the recovered fraction (notebook 07); `report`:
  the statistics, tables, verdict and figure of a comparison (`oar_lite.compare`).
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
from .credit import credit_benchmark, precision_at_k, results_table, roc_auc

__version__ = "0.1.0"
