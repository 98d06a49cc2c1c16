"""ARCA's own signal where the project has ground truth (issue 37 item 2): the adapter residual
(`oar_lite.lab.baselines.adapter_residual_scores`) of a LoRA adapter trained by the SmolLM2
recipe, measured two ways beside OAR-P, OAR-G, entropy and GRAIL (`oar_lite.lab.grail`) computed
with the same adapter on:

- against the Monte-Carlo labels (`oar_lite.lab.ground_truth`): each method's per-token scores
  on the 20 shipped ground-truth completions (the base model's), their AUC of pivotal vs other
  tokens and their Spearman with ``|delta P|`` (`ground_truth.ground_truth_table`'s measures);
- on the adapter's own completions (training prompts, sampled as a training step samples them):
  how concentrated each method's reshaped weights are (`concentration.concentration_row`).

`measure` computes both (a model is needed; `benchmarks/adapter_residual.py` runs it and writes
`RESULT_PATH`); `result_tables` reads the shipped file without a model.
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Sequence

import torch

from ..attribution import WEIGHTINGS, CreditConfig, display_name, token_scores
from ..rollout import sample_completions
from ..seeding import derive_seed
from . import ground_truth
from .credit import route_options
from . import scorers  # noqa: F401  (registers the lab's methods, which it runs by name)
from .stats import ci95, mean

RESULT_PATH = Path(__file__).resolve().parent / "data" / "adapter_residual.json"
"""The shipped measurement (written by benchmarks/adapter_residual.py)."""

METHODS = ("adapter-residual", "oar-p:last", "oar-g:answer_mean", "entropy", "grail")
"""The methods scored with the adapter on: ARCA's signal and the ones it is set against (GRAIL's
gradient saliency, `oar_lite.lab.grail`, since issue 48)."""


def score_ground_truth(model, tokenizer, data: dict, methods: Sequence[str] = METHODS, *, seed: int = 0) -> list[dict]:
    """Per ground-truth completion, ``{method: [R scores]}`` of each method with ``model``
    (the adapter on), in the file's order, and the CPU seconds of each."""
    out = []
    generator = torch.Generator()
    options = route_options(methods, {"pad_token_id": tokenizer.pad_token_id, "generator": generator})
    for i, rec in enumerate(data["completions"]):
        ids, _, reasoning, answer = ground_truth.rebuilt_sequence(rec, tokenizer)
        row = {"scores": {}, "cpu_seconds": {}}
        for m in methods:
            generator.manual_seed(derive_seed(seed, i))
            t0 = time.process_time()
            s = token_scores(m, model, ids, reasoning, answer, **options[m])
            row["scores"][m] = [float(x) for x in s.tolist()]
            row["cpu_seconds"][m] = round(time.process_time() - t0, 3)
        out.append(row)
    return out


def adapter_completions(model, tokenizer, prompts: Sequence[str], *, group_size: int, max_new_tokens: int,
                        seed: int, methods: Sequence[str] = METHODS, add_special_tokens: bool = False) -> list[dict]:
    """Sample ``group_size`` completions of each prompt at `oar_lite.rollout.SAMPLING`'s temperature (1) and top-p,
    and score every one with a parseable answer and a reasoning token after the first position
    with each method; per such completion ``{"text", "scores": {method: [R]}}``.
    ``add_special_tokens``: False for chat-templated prompts (SmolLM2's)."""
    rollouts = sample_completions(model, tokenizer, list(prompts), group_size=group_size,
                                  max_new_tokens=max_new_tokens, add_special_tokens=add_special_tokens, seed=seed)
    generator = torch.Generator()
    options = route_options(methods, {"pad_token_id": tokenizer.pad_token_id, "generator": generator})
    out = []
    for row in range(len(rollouts)):
        ids, reasoning, answer = rollouts.sequence(row)
        if reasoning is None or reasoning.stop - reasoning.start < 1 or reasoning.start < 1:
            continue
        scores = {}
        for m in methods:
            generator.manual_seed(derive_seed(seed, row))
            scores[m] = [float(x) for x in token_scores(m, model, ids, reasoning, answer, **options[m]).tolist()]
        out.append({"text": rollouts.completions[row], "scores": scores})
    return out


def agreement(shipped: dict, measured: dict) -> dict:
    """How far a new measurement (``measured``, as the benchmark writes it) is from ``shipped``, per
    method both scored: ``{method: {"ground_truth_max_abs", "ground_truth_max_rel", "completions_same_text",
    "completions", "completions_max_abs"}}``, the largest absolute and relative differences of its
    scores over the ground-truth completions, how many of the adapter's sampled completions have the
    same text in both (in order), and the largest absolute difference of the scores of those. Zero
    differences and every text the same: the adapter and the scoring reproduce. ValueError: the two
    scored different ground-truth files."""
    if len(shipped["ground_truth"]) != len(measured["ground_truth"]):
        raise ValueError(f"{len(shipped['ground_truth'])} against {len(measured['ground_truth'])} ground-truth "
                         "completions: the two measurements are of different files")
    both = [m for m in measured["settings"]["methods"] if m in shipped["settings"]["methods"]]
    pairs = list(zip(shipped["adapter_completions"], measured["adapter_completions"]))
    same = [(a, b) for a, b in pairs if a["text"] == b["text"]]
    out = {}
    for m in both:
        old = torch.tensor([x for row in shipped["ground_truth"] for x in row["scores"][m]], dtype=torch.float64)
        new = torch.tensor([x for row in measured["ground_truth"] for x in row["scores"][m]], dtype=torch.float64)
        if old.shape != new.shape:
            raise ValueError(f"{m}: {old.numel()} against {new.numel()} ground-truth scores: different spans")
        diff = (old - new).abs()
        sampled = [abs(x - y) for a, b in same for x, y in zip(a["scores"][m], b["scores"][m])]
        out[m] = {"ground_truth_max_abs": float(diff.max()) if diff.numel() else 0.0,
                  "ground_truth_max_rel": float((diff / old.abs().clamp(min=1e-12)).max()) if diff.numel() else 0.0,
                  "completions_same_text": len(same), "completions": len(pairs),
                  "completions_max_abs": max(sampled, default=0.0)}
    return out


def result_tables(result: dict | None = None, *, threshold: float | None = None) -> dict:
    """The shipped measurement as two tables (no model needed):
    ``{"ground_truth": {method: ground_truth_table's row}, "concentration": {method: {"effective_share",
    "gini", "effective_token_ratio", "zero_share", "n"}}, "settings": ...}``. The ground-truth rows
    use the Monte-Carlo labels of the shipped file with each method's adapter-on scores; the
    concentration rows, each method's weights (`CreditConfig` defaults) on the adapter's own
    completions, with ``effective_share_ci95`` over completions."""
    from .concentration import concentration_row

    result = json.loads(RESULT_PATH.read_text()) if result is None else result
    data = ground_truth.load_ground_truth()
    if len(result["ground_truth"]) != len(data["completions"]):
        raise ValueError(f"{len(result['ground_truth'])} scored completions for {len(data['completions'])} in the "
                         f"ground-truth file: the measurement is of another file")
    scored = {"settings": data.get("settings", {}), "completions": [
        {**rec, "scores": row["scores"]} for rec, row in zip(data["completions"], result["ground_truth"])]}
    table = ground_truth.ground_truth_table(
        scored, threshold=ground_truth.PIVOT_THRESHOLD if threshold is None else threshold)
    concentration = {}
    for m in result["settings"]["methods"]:
        reshape = CreditConfig(method=m).reshape
        rows = [concentration_row(reshape(torch.tensor(c["scores"][m], dtype=torch.float64)))
                for c in result["adapter_completions"]]
        concentration[m] = {**{k: mean([r[k] for r in rows]) for k in
                               ("effective_share", "gini", "effective_token_ratio", "zero_share")},
                            "effective_share_ci95": ci95([r["effective_share"] for r in rows]), "n": len(rows)}
    return {"ground_truth": table, "concentration": concentration, "settings": result["settings"]}


def reading(tables: dict) -> str:
    """`result_tables` in words, for notebook 06 and RESULTS.md: each method's AUC against the
    labels with its 95% interval (whether it excludes chance, 0.5, and whether the residual's
    overlaps each other method's), then the effective shares on the adapter's completions."""
    auc = {m: (r["auc_mean"], r["auc_mean"] - r["auc_ci95"], r["auc_mean"] + r["auc_ci95"], r["auc_n"])
           for m, r in tables["ground_truth"].items()}
    share = tables["concentration"]
    arca = "adapter-residual"
    run = tables["settings"].get("adapter_run", {})
    who = (f"the adapter of a {display_name(run['method'])} run of the SmolLM2 recipe (seed {run['seed']}, step {run['steps']})"
           if run else "a LoRA adapter trained by the SmolLM2 recipe")
    a, lo, hi, n = auc[arca]
    chance = "above chance (0.5)" if lo > 0.5 else ("below chance (0.5)" if hi < 0.5 else "an interval that includes chance (0.5)")
    others = [m for m in auc if m != arca]
    apart = [m for m in others if auc[m][2] < lo or auc[m][1] > hi]
    overlap = [m for m in others if m not in apart]
    def names(ms):
        return " and ".join(ms) if len(ms) < 3 else ", ".join(ms[:-1]) + " and " + ms[-1]

    least = min(share[m]["effective_share"] for m in share if m != arca)
    concentration = ("no more concentrated than the others" if share[arca]["effective_share"] >= least
                     else "more concentrated than " + names([m for m in share if m != arca
                                                             and share[m]["effective_share"] > share[arca]["effective_share"]]))
    text = (f"With {who} on, ARCA's adapter residual ranks the Monte-Carlo pivotal tokens above the rest with "
            f"AUC {a:.2f} (95% interval {lo:.2f} to {hi:.2f}, over the {n} completions that have a pivotal token): "
            f"{chance}. With the same adapter on, "
            + ", ".join(f"{m} reaches {auc[m][0]:.2f} ({auc[m][1]:.2f} to {auc[m][2]:.2f})" for m in others) + ". "
            + (f"The residual's interval overlaps those of {names(overlap)}" if overlap else "Its interval overlaps none")
            + (f" and lies apart from {names(apart)}'s." if apart else ".")
            + f" On the adapted model's own {share[arca]['n']} completions, the reshaped weights keep an effective share "
            f"of {share[arca]['effective_share']:.2f} with the residual, "
            + ", ".join(f"{share[m]['effective_share']:.2f} with {m}" + (" (its own weighting)" if m in WEIGHTINGS else "")
                        for m in share if m != arca)
            + f": after the same reshaping ARCA's signal is {concentration}. "
            f"One adapter and {n} short completions: a screen, not a finding.")
    return text
