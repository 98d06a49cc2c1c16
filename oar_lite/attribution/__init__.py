"""Token importance for credit assignment: OAR-P and OAR-G (spec sections 3-5;
notebooks 02 and 03 build them step by step), one small module per idea:

- `outcome`: what a scorer reads, checked, and P_final, "the outcome", in three `MODES`.
- `oar_p`: OAR-P, perturbation; `perturbation_scores_naive` is the readable reference the fast
  `perturbation_scores` and `perturbation_scores_batch` are tested against.
- `oar_g`: OAR-G, the gradient proxy; `gradient_scores` is the reference of `gradient_scores_batch`.
- `planning` (how OAR-P groups its passes), `kv` (KV caches, model surgery).
- `registry` (`SCORERS` by name: the library's ``"uniform"``, plain GRPO, ``"oar-p"`` and
  ``"oar-g"``, never replaced, and those registered with `register_scorer`: the course's oracles,
  the lab's baselines and controls, `oar_lite.lab.scorers`), `config` (`CreditConfig`,
  `ScorerContext`) and `scoring` (`token_scores`, `token_weights`: the entry points).

Every scorer shares one calling convention (as Captum's attribution methods do)::

    scorer(model, input_ids [T], reasoning, answer, **options) -> scores [R]

``input_ids`` is one unpadded sequence (prompt + completion), ``reasoning`` and ``answer``
half-open `slice`s into it, R the reasoning length; a larger score means the token moves the
final answer more; `register_scorer`'s ``weighting`` turns a method's scores into weights in
place of the bi-level reshaping (`WEIGHTINGS`: plain GRPO's ones are its weights). A method name may add a P_final mode (``"oar-p:answer_joint"``).
"""
from .config import (CONTEXT_FIELDS, CREDIT_DEFAULTS, CREDIT_FIELDS, CREDIT_RANGES, CreditConfig, ScorerContext,
                     credit_settings)
from .oar_g import NOISE_STD, gradient_scores, gradient_scores_batch
from .oar_p import perturbation_scores, perturbation_scores_batch, perturbation_scores_naive
from .outcome import MODES, eval_mode, final_outcome, mask_to_span
from .planning import (BATCH_SIZE, DEFAULT_MAX_WASTE, DEFAULT_TOKEN_BUDGET, TOKEN_BUDGET, default_token_budget,
                       plan_passes)
from .registry import (WEIGHTINGS, LIBRARY_METHODS, PLAIN_GRPO, SCORERS, Method, Scorer, declared_options,
                       default_mode, display_name, method_of, register_scorer, uniform_weights)
from .scoring import takes, token_scores, token_weights
