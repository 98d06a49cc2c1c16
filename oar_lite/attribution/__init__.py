"""Token importance for credit assignment: OAR-P and OAR-G (spec sections 3-5;
notebooks 02 and 03 build them step by step), one small module per idea:

- `outcome`: what a scorer reads, checked, and P_final, "the outcome", in three `MODES`.
- `oar_p`: OAR-P, perturbation; `perturbation_scores_naive` is the readable reference the fast
  `perturbation_scores` and `perturbation_scores_batch` are tested against.
- `oar_g`: OAR-G, the gradient proxy; `gradient_scores` is the reference of `gradient_scores_batch`.
- `controls`: control prefixes any method can take (the lab registers ``inverted:`` and ``shuffled:``).
- `planning` (how OAR-P groups its passes), `kv` (KV caches, model surgery).
- `registry` (`SCORERS` by name; ``"uniform"`` is plain GRPO; the lab registers the baselines it
  compares with, `oar_lite.lab.baselines`), `config` (`CreditConfig`, `ScorerContext`) and `scoring`
  (`token_scores`, `token_weights`: the entry points).

Every scorer shares one calling convention (as Captum's attribution methods do)::

    scorer(model, input_ids [T], reasoning, answer, **options) -> scores [R]

``input_ids`` is one unpadded sequence (prompt + completion), ``reasoning`` and ``answer``
half-open `slice`s into it, R the reasoning length; a larger score means the token moves the
final answer more. A method name may add a P_final mode (``"oar-p:answer_joint"``) and
control prefixes (``"inverted:"``, once the lab registered it).
"""
from .config import (CONTEXT_FIELDS, CREDIT_FIELDS, CREDIT_RANGES, PLAIN_GRPO, CreditConfig, ScorerContext,
                     credit_settings, for_method, for_methods)
from .controls import CONTROLS, apply_controls, split_controls
from .oar_g import NOISE_STD, gradient_scores, gradient_scores_batch
from .oar_p import perturbation_scores, perturbation_scores_batch, perturbation_scores_naive
from .outcome import MODES, eval_mode, final_outcome, mask_to_span
from .planning import (BATCH_SIZE, DEFAULT_MAX_WASTE, DEFAULT_TOKEN_BUDGET, TOKEN_BUDGET, default_token_budget,
                       plan_passes)
from .registry import (OLD_NAMES, SCORERS, WEIGHTINGS, Method, Scorer, declared_options, default_mode, method_of,
                       mode_of, parse_method, register_scorer, uniform_scores)
from .scoring import takes, token_scores, token_weights, uses_sampled_cache
