"""The lab's methods, registered with the library's registry (`oar_lite.attribution.register_scorer`)
when this module is imported, and only then: ``import oar_lite.lab`` registers nothing, and the
lab's modules that train or score with these methods import this one. The one list of what the
lab adds to the library's ``uniform``, ``oar-p`` and ``oar-g`` (`LAB_METHODS`):

- the course's oracles (`oar_lite.course.oracle.ORACLES`, imported here);
- the baselines OAR is compared with (`oar_lite.lab.baselines.BASELINES`: random, entropy,
  Captum's integrated gradients, ARCA's adapter residual), and those with their own weighting in
  place of the bi-level reshaping (`OWN_WEIGHTING`): ``"entropy-top"``, TRL's top-entropy mask
  of the entropies, and ``"grail"``, GRAIL's z-scaled gradient saliencies (`oar_lite.lab.grail`);
- the controls (`oar_lite.lab.controls`): ``"inverted:<method>"`` and ``"shuffled:<method>"``
  of each method of `CONTROLLED`.

A lab method of one's own (a new baseline) is a function with the scorers' calling convention,
``scorer(model, input_ids [T], reasoning, answer, *, <the options it takes>) -> [R]``, in the lab
module where it belongs, and one line here that registers it; a name that is taken (the
library's, or a user's registered before this import) is refused, never replaced.
"""
from __future__ import annotations

from ..attribution import register_scorer
from ..course.oracle import ORACLES
from .baselines import BASELINES, entropy_scores, top_quantile_weights
from .controls import CONTROLS, controlled
from .grail import saliency_scores, saliency_scores_batch, saliency_weights

for _name, _scorer in BASELINES.items():
    register_scorer(_name, _scorer)
register_scorer("entropy-top", entropy_scores, weighting=top_quantile_weights)
register_scorer("grail", saliency_scores, batched=saliency_scores_batch, weighting=saliency_weights)
OWN_WEIGHTING = ("entropy-top", "grail")
"""The lab's methods whose scores go through their own weighting (`oar_lite.attribution.WEIGHTINGS`)."""

CONTROLLED = ("oar-p", "oar-g", *ORACLES, *BASELINES, *OWN_WEIGHTING)
"""The methods whose controls are registered (plain GRPO has none: every weight is 1 either way)."""
for _control in CONTROLS:
    for _method in CONTROLLED:
        register_scorer(f"{_control}:{_method}", **controlled(_control, _method))

LAB_METHODS = (*ORACLES, *BASELINES, *OWN_WEIGHTING, *(f"{c}:{m}" for c in CONTROLS for m in CONTROLLED))
"""What this module adds to the library's methods (its own, and the course's oracles)."""
