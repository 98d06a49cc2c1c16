"""The credit-assignment benchmark: which tokens does each method say the answer hangs on,
and does that match the toy world's ground truth? (notebooks 02 and 03)

`credit_benchmark` scores sampled toy completions with each method through
`oar_lite.attribution.token_scores` against `oar_lite.course.toy.token_labels`: ROC-AUC and
precision@k of pivotal vs neutral tokens (`oar_lite.lab.stats`; ties counted half, so constant
scores give 0.5 and the base rate), and seconds per completion. `results_table` renders it.
The real-model ground truth is `oar_lite.lab.ground_truth`.
"""
from __future__ import annotations

import math
import time
from typing import Sequence

import torch
from tqdm.auto import tqdm

from ..course import toy
from ..attribution import CONTEXT_FIELDS, method_of, takes, token_scores
from .report import markdown_table
from . import scorers  # noqa: F401  (registers the lab's methods, which it runs by name)
from ..rollout import SAMPLING, sample_completions
from ..seeding import derive_seed
from .stats import mean, precision_at_k, rank_agreement, roc_auc, std


def route_options(methods: Sequence[str], options: dict) -> dict[str, dict]:
    """``{method: the options it declares}`` (`ScorerContext` fields go to every method), for
    one call site that serves several methods; TypeError for an option no method declares."""
    declared = {m: takes(m) | set(CONTEXT_FIELDS) for m in methods}
    unknown = sorted(set(options) - set().union(*declared.values()))
    if unknown:
        raise TypeError(f"option(s) {unknown} are declared by none of the methods {list(methods)}; they take "
                        f"{ {m: sorted(d - set(CONTEXT_FIELDS)) for m, d in declared.items()} } and the context "
                        f"{list(CONTEXT_FIELDS)}")
    return {m: {k: v for k, v in options.items() if k in declared[m]} for m in methods}


# ----------------------------------------------------------------------------- the benchmark

def credit_benchmark(
    methods: Sequence[str],
    *,
    n: int = 200,
    seed: int = 0,
    model=None,
    tokenizer=None,
    problems: Sequence[dict] | None = None,
    temperature: float = SAMPLING.temperature,
    batch_size: int = 50,
    return_records: bool = False,
    progress: bool = True,
    **options,
):
    """Score ``n`` sampled toy completions with each method against the toy labels: ``auc``
    (pivotal vs neutral; ``support`` tokens, neither, left out), ``auc_all`` (support counted
    negative) and ``p_at_k``, each averaged over completions with its standard deviation.

    Args:
        methods: names for `oar_lite.attribution.token_scores`, e.g. ``["random", "oar-p:last"]``.
        n: completions to sample (one per problem, cycling through ``problems``).
        seed: seeds the sampling and the random scorers.
        model, tokenizer, problems: default: the shipped toy model and its held-out set.
        temperature: sampling temperature of the completions (1: the policy GRPO sees).
        batch_size: prompts per generation call.
        return_records: also return the per-completion records (labels, scores, text).
        **options: each passed to the methods whose scorer declares it (``batch_size`` for
            OAR-P, ``noise_std`` for OAR-G, ``n_steps`` for captum-ig; `route_options`: one no
            method declares is a TypeError); ``pad_token_id`` defaults to the tokenizer's.

    Returns:
        ``{method: {"auc_mean", "auc_std", "auc_all_mean", "auc_all_std", "p_at_k_mean",
        "p_at_k_std", "seconds_per_completion", "n", "n_sampled"}}`` (plain numbers; ``n``
        counts the completions that parse and have both pivotal and neutral reasoning
        tokens); with ``return_records``, also the per-completion dicts (``input_ids [T]``,
        ``reasoning``, ``answer``, ``labels [R]``, ``scores`` and ``seconds`` per method,
        ``completion``, ``prompt``, ``correct``).

    Raises:
        ValueError: no methods or an unknown one, ``n < 1``, or no problems.
    """
    if isinstance(methods, str) or not methods:
        raise ValueError(f"methods must be a non-empty list of method names, got {methods!r}")
    for m in methods:
        method_of(m)
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if model is None or tokenizer is None:
        model, tokenizer = toy.load_model()
    problems = list(problems) if problems is not None else toy.load_eval_set()
    if not problems:
        raise ValueError("problems is empty")
    chosen = [problems[i % len(problems)] for i in range(n)]
    options.setdefault("pad_token_id", tokenizer.pad_token_id)
    options = route_options(methods, options)

    records = []
    for i in range(0, n, batch_size):
        chunk = chosen[i : i + batch_size]
        cap = max(toy.max_new_tokens(p.get("digits", len(str(p["a"])))) for p in chunk)
        ro = sample_completions(model, tokenizer, [p["prompt"] for p in chunk], max_new_tokens=cap,
                                temperature=temperature, formats=toy.FORMATS, seed=derive_seed(seed, i))
        for row, problem in enumerate(chunk):
            labels, seg = toy.token_labels(tokenizer, ro.completion_ids[row]), ro.segments[row]
            valid = ro.attention_mask[row].bool()
            start = int(valid[: ro.prompt_length].sum())  # prompt tokens of this row
            if labels is None or seg is None:
                continue  # cannot be parsed: no ground truth
            reasoning_labels = labels[seg.reasoning]
            if not (reasoning_labels == toy.PIVOTAL).any() or not (reasoning_labels == toy.NEUTRAL).any():
                continue
            records.append({"input_ids": ro.input_ids[row][valid], "reasoning": slice(start + seg.reasoning.start, start + seg.reasoning.stop),
                            "answer": slice(start + seg.answer.start, start + seg.answer.stop),
                            "labels": reasoning_labels, "completion": ro.completions[row], "prompt": problem["prompt"],
                            "correct": toy.reward(ro.completions[row], problem) == 1.0, "scores": {}, "seconds": {}})

    generators = {m: torch.Generator().manual_seed(seed) for m in methods}  # one stream per method
    for rec in tqdm(records, desc="credit benchmark", disable=not progress):
        for m in methods:
            t0 = time.perf_counter()
            scores = token_scores(m, model, rec["input_ids"], rec["reasoning"], rec["answer"],
                                  generator=generators[m], **options[m])
            rec["seconds"][m] = time.perf_counter() - t0
            rec["scores"][m] = scores.detach().float().cpu()

    results = {}
    for m in methods:
        metrics = {"auc": [], "auc_all": [], "p_at_k": []}
        for rec in records:
            s, pos, neg = rec["scores"][m], rec["labels"] == toy.PIVOTAL, rec["labels"] == toy.NEUTRAL
            metrics["auc"].append(roc_auc(s, pos, neg))
            metrics["auc_all"].append(roc_auc(s, pos))
            metrics["p_at_k"].append(precision_at_k(s, pos, neg))
        results[m] = {**{f"{k}_{stat}": f(v) for k, v in metrics.items()
                         for stat, f in (("mean", mean), ("std", std))},
                      "seconds_per_completion": mean([rec["seconds"][m] for rec in records]),
                      "n": len(records), "n_sampled": n}
    return (results, records) if return_records else results


def results_table(results: dict, *, digits: int = 3) -> str:
    """Render `credit_benchmark`'s dict as a markdown table (one row per method)."""
    pm = lambda r, key: f"{r[key + '_mean']:.{digits}f} ± {r[key + '_std']:.{digits}f}"
    return "\n".join(markdown_table(
        ["method", "AUC pivotal vs neutral", "AUC pivotal vs rest", "precision@k", "s / completion", "n"],
        [[f"`{m}`", pm(r, "auc"), pm(r, "auc_all"), pm(r, "p_at_k"), f"{r['seconds_per_completion']:.4f}", r["n"]]
         for m, r in results.items()]))


# The token scorers (method:outcome) the credit benchmark compares by default.
SCORED_CREDIT_METHODS = ("uniform", "random", "entropy", "oar-p:last", "oar-p:answer_mean", "oar-p:answer_joint",
                         "oar-g:last", "oar-g:answer_mean", "oar-g:answer_joint", "captum-ig:answer_joint")


def label_means(records: Sequence[dict], method: str) -> dict[str, float]:
    """Mean score of ``method`` per label (pivotal, support, neutral), each completion's
    scores first divided by their sum (so long and short completions weigh the same)."""
    sums = {toy.PIVOTAL: [], toy.SUPPORT: [], toy.NEUTRAL: []}
    for rec in records:
        s = rec["scores"][method].double()
        s = s / s.sum() if s.sum() > 0 else s
        for label, acc in sums.items():
            if (rec["labels"] == label).any():
                acc.append(float(s[rec["labels"] == label].mean()))
    return {toy.LABEL_NAMES[k]: mean(v) for k, v in sums.items()}


def mode_agreement(records: Sequence[dict], methods: Sequence[str]) -> dict[str, dict]:
    """``{mode: {"mean", "n"}}``: how alike OAR-P and OAR-G rank each completion's tokens in
    each P_final mode both are in ``methods`` with (`rank_agreement`, mean over the
    completions where it is defined; 1 = the same order)."""
    out = {}
    for mode in ("last", "answer_mean", "answer_joint"):
        a, b = f"oar-p:{mode}", f"oar-g:{mode}"
        if a in methods and b in methods:
            rho = [x for x in (rank_agreement(r["scores"][a], r["scores"][b]) for r in records) if not math.isnan(x)]
            out[mode] = {"mean": mean(rho), "n": len(rho)}
    return out
