"""The lab, on top of the library and the course: the experiments behind the notebooks'
measured claims and benchmarks/RESULTS.md, and the shipped results they read (``lab/data``).

`compare` (the toy comparison; ``python -m oar_lite.lab`` is its command line, `__main__`),
`report`, `plots` and `stats` (tables, figures, intervals), `credit` (the credit benchmark),
`gradient_quality`, `regime`, `ground_truth` (Monte-Carlo ground truth on SmolLM2),
`lora_learning` (the SmolLM2 study), `findings` (what the notebooks and the README say: a number
module and a template per topic), `recipes` (the LoRA runs' settings and trainer), `uniformity` (how far from uniform the
weights are: tau, the floor; the hook the lab's training runs record it with), `concentration`
(ARCA's weight Gini and effective-token ratio next to the effective share), `adapter_signal`
(ARCA's adapter residual against the SmolLM2 ground truth and on an adapter's own completions),
`progress` (bars); `baselines` (random, entropy, entropy-top, Captum's integrated gradients,
ARCA's adapter residual), `grail` (GRAIL's gradient-activation saliency and its own weights,
arXiv 2606.04889) and `controls` (inverted and shuffled credit), which `scorers` registers with
the library's registry when it is imported (importing the lab does not).
benchmarks/ are thin command lines over it.
"""
import importlib
import pkgutil

MODULES = tuple(m.name for m in pkgutil.iter_modules(__path__))
"""The modules, each loaded on first use."""


def __getattr__(name: str):
    """``oar_lite.lab.<module>`` on first use (PEP 562)."""
    if name in MODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
