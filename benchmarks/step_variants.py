"""`benchmarks.step_cost` with OAR-P variants timed beside the shipped one in the same
interleaved rounds (issue 40 item 5: does each fast path earn 5% of a GRPO step?):

- ``oar-p-full-last-layer``: `perturbation_scores_batch` with `last_layer_at_end` off (the last
  decoder layer runs at every position);
- ``oar-p-mlp-at-end``: with only the last MLP cut, where the code still has the whole-layer
  cut (``kv.layer_at_end``, removed by issue 40; registered only where it exists);
- ``oar-p-per-row`` is step_cost's own (`perturbation_scores` one row at a time).

Run (offline, from the repository root)::

    .venv/bin/python -m benchmarks.step_variants --model toy --methods uniform oar-g oar-p oar-p-full-last-layer --warmup 1 --repeats 9 --no-progress

Arguments, output and table are step_cost's (``--out`` defaults to ``results/step_cost.json``).
"""
from __future__ import annotations

import contextlib
import functools

from benchmarks import step_cost
from oar_lite.attribution import kv, oar_p, perturbation_scores, perturbation_scores_batch, register_scorer


def _variant(patch):
    @functools.wraps(perturbation_scores_batch)  # keeps the declared options
    def batched(*args, **kwargs):
        with patch():
            return perturbation_scores_batch(*args, **kwargs)
    return batched


@contextlib.contextmanager
def _mlp_only():  # the whole-layer cut declines, so last_layer_at_end falls back to the MLP alone
    old = kv.layer_at_end
    kv.layer_at_end = lambda *args, **kwargs: []
    try:
        yield
    finally:
        kv.layer_at_end = old


@contextlib.contextmanager
def _no_cut():  # the last layer runs at every position
    old = oar_p.last_layer_at_end
    oar_p.last_layer_at_end = lambda model, keep: contextlib.nullcontext()
    try:
        yield
    finally:
        oar_p.last_layer_at_end = old


VARIANTS = {"oar-p-mlp-at-end": (_mlp_only, hasattr(kv, "layer_at_end")),
            "oar-p-full-last-layer": (_no_cut, hasattr(oar_p, "last_layer_at_end"))}


def main(argv=None) -> dict:
    from oar_lite.attribution.registry import BATCHED, SCORERS

    names = [name for name, (_, applies) in VARIANTS.items() if applies]
    for name in names:
        register_scorer(name, perturbation_scores, batched=_variant(VARIANTS[name][0]))
    extra = step_cost.EXTRA_METHODS
    step_cost.EXTRA_METHODS = tuple(dict.fromkeys((*extra, *names)))
    try:
        return step_cost.main(argv)
    finally:  # leave the registry and step_cost as they were (tests run this in-process)
        step_cost.EXTRA_METHODS = extra
        for name in names:
            SCORERS.pop(name, None)
            BATCHED.pop(name, None)


if __name__ == "__main__":
    main()
