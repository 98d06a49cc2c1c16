"""The credit-assignment benchmark: which tokens does each method say the answer hangs on,
and does that match the toy world's ground truth?

`credit_benchmark` samples completions of the shipped toy model on held-out problems,
scores every reasoning token with each method through the one interface
(`oar_lite.attribution.token_scores`) and compares the scores with the labels of
`oar_lite.toy.token_labels`:

- ROC-AUC, pivotal (positive) vs neutral (negative) tokens of one completion; the
  ``support`` tokens (operand digits and carries a step computes from) are left out, as
  they are neither. Ties count one half (Mann-Whitney), so constant scores give exactly
  0.5. ``auc_all`` is the stricter variant with support tokens counted as negatives.
- precision@k over the same pivotal + neutral tokens, k = number of pivotal tokens, with
  ties broken at random *in expectation* (constant scores give the base rate, not an
  arbitrary order).
- seconds per completion of the scorer call.

Each metric is averaged over completions, with its standard deviation. `results_table`
renders the dict as markdown. ``"captum-ig"`` (Captum's ``LayerIntegratedGradients`` on
the input embeddings, baseline = reasoning tokens replaced by pad) is registered here as
an external peer: ``credit_benchmark(["captum-ig:last", ...])``.
"""
from __future__ import annotations

import math
import time
from typing import Sequence

import torch

from . import toy
from .attribution import eval_mode, parse_method, register_scorer, token_scores
from .rollout import sample_completions


# ----------------------------------------------------------------------------- metrics

def roc_auc(scores: torch.Tensor, positive: torch.Tensor, negative: torch.Tensor | None = None) -> float:
    """ROC-AUC of ``scores`` for ``positive`` against ``negative`` tokens, ties counted 1/2.

    Args:
        scores: ``[R]`` real scores.
        positive: ``[R]`` bool, the positives.
        negative: ``[R]`` bool, the negatives (default: every non-positive).

    Returns:
        P(score of a random positive > that of a random negative) + P(equal) / 2;
        NaN when there is no positive or no negative.
    """
    scores, positive, negative = _check_metric_inputs(scores, positive, negative)
    pos, neg = scores[positive].double(), scores[negative].double()
    if pos.numel() == 0 or neg.numel() == 0:
        return float("nan")
    greater = (pos[:, None] > neg[None, :]).double().mean()
    equal = (pos[:, None] == neg[None, :]).double().mean()
    return float(greater + 0.5 * equal)


def precision_at_k(scores: torch.Tensor, positive: torch.Tensor, negative: torch.Tensor | None = None) -> float:
    """Share of positives among the k highest-scored candidates, k = number of positives.

    Candidates are the positives and ``negative`` tokens (default: all tokens). Ties at
    the cut are broken at random in expectation, so constant scores give the base rate.
    NaN when there is no positive.
    """
    scores, positive, negative = _check_metric_inputs(scores, positive, negative)
    keep = positive | negative
    s, p = scores[keep].double(), positive[keep]
    k = int(p.sum())
    if k == 0:
        return float("nan")
    cut = s.topk(k).values[-1]
    above, tied = s > cut, s == cut
    hits = float(p[above].sum()) + (k - int(above.sum())) * float(p[tied].sum()) / int(tied.sum())
    return hits / k


def _check_metric_inputs(scores, positive, negative):
    scores = torch.as_tensor(scores)
    positive = torch.as_tensor(positive, dtype=torch.bool)
    negative = ~positive if negative is None else torch.as_tensor(negative, dtype=torch.bool)
    if scores.dim() != 1 or positive.shape != scores.shape or negative.shape != scores.shape:
        raise ValueError(f"scores, positive and negative must be 1-D of one length [R], got "
                         f"{tuple(scores.shape)}, {tuple(positive.shape)}, {tuple(negative.shape)}")
    if (positive & negative).any():
        raise ValueError("a token cannot be both positive and negative")
    if not torch.isfinite(scores).all():
        raise ValueError("scores contain NaN or infinite values")
    return scores, positive, negative


# ----------------------------------------------------------------------------- captum peer

def integrated_gradients_scores(model, input_ids: torch.Tensor, reasoning: slice, answer: slice, *,
                                mode: str = "answer_joint", pad_token_id: int, n_steps: int = 16) -> torch.Tensor:
    """External peer: Captum's ``LayerIntegratedGradients`` on the input embeddings.

    Target: the log-probability of the answer the model wrote (``answer_joint``: phi,
    the mean over answer tokens; ``last``: the first answer token). Baseline: the same
    sequence with every reasoning token replaced by ``pad_token_id`` (OAR-P's
    perturbation, all at once). Score: |attribution| summed over the hidden dimension.

    Returns:
        ``[R]`` float32 scores, >= 0.
    """
    from captum.attr import LayerIntegratedGradients

    if not torch.is_tensor(input_ids) or input_ids.dim() != 1:
        raise ValueError("input_ids must be a 1-D tensor [T] (one unpadded sequence)")
    if not 0 <= reasoning.start < reasoning.stop <= answer.start < answer.stop <= input_ids.numel():
        raise ValueError(f"expected 0 <= reasoning ({reasoning}) < answer ({answer}) <= T={input_ids.numel()}")
    if mode not in ("last", "answer_joint"):
        raise ValueError(f"captum-ig needs a scalar target: mode 'last' or 'answer_joint', got {mode!r} "
                         "('answer_mean' is a distribution, not a scalar)")
    answer_ids = input_ids[answer]
    end = answer.start if mode == "last" else answer.stop - 1  # the tokens P_final is read from

    def target(ids: torch.Tensor) -> torch.Tensor:  # [b, end] -> [b] log-probability of the answer
        logp = model(input_ids=ids, use_cache=False).logits.float().log_softmax(-1)
        logp = logp[:, answer.start - 1 :].gather(-1, answer_ids[: logp.shape[1] - answer.start + 1]
                                                  .expand(ids.shape[0], -1)[..., None]).squeeze(-1)
        return logp.mean(1)

    inputs = input_ids[None, :end]
    baseline = inputs.clone()
    baseline[0, reasoning] = pad_token_id
    with eval_mode(model):
        lig = LayerIntegratedGradients(target, model.get_input_embeddings())
        attributions = lig.attribute(inputs, baselines=baseline, n_steps=n_steps, internal_batch_size=n_steps)
    return attributions[0, reasoning].sum(-1).abs().float().detach()


register_scorer("captum-ig", integrated_gradients_scores)


# ----------------------------------------------------------------------------- the benchmark

def credit_benchmark(
    methods: Sequence[str],
    *,
    n: int = 200,
    seed: int = 0,
    model=None,
    tokenizer=None,
    problems: Sequence[dict] | None = None,
    temperature: float = 1.0,
    batch_size: int = 50,
    return_records: bool = False,
    progress: bool = True,
    **options,
):
    """Score ``n`` sampled toy completions with each method against the ground truth.

    Args:
        methods: names for `oar_lite.attribution.token_scores`, e.g. ``["uniform",
            "random", "entropy", "oar-p:last", "oar-g:answer_mean", "captum-ig"]``.
        n: completions to sample (one per problem, cycling through ``problems``).
        seed: seeds the sampling and the random scorers.
        model, tokenizer: default: the shipped toy model (`oar_lite.toy.load_model`).
        problems: default: the held-out set (`oar_lite.toy.load_eval_set`).
        temperature: sampling temperature of the completions (1: the policy GRPO sees).
        batch_size: prompts per generation call.
        return_records: also return the per-completion records (labels, scores, text).
        **options: passed to every scorer (``batch_size`` for OAR-P, ``noise_std`` for
            OAR-G, ``n_steps`` for captum-ig; ``pad_token_id`` defaults to the tokenizer's).

    Returns:
        ``{method: {"auc_mean", "auc_std", "auc_all_mean", "auc_all_std", "p_at_k_mean",
        "p_at_k_std", "seconds_per_completion", "n", "n_sampled"}}`` (plain numbers; ``n``
        counts the completions scored: those that parse and have both pivotal and neutral
        reasoning tokens, out of ``n_sampled``); with ``return_records``, also the list of
        per-completion dicts (``input_ids [T]``, ``reasoning``, ``answer``, ``labels [R]``,
        ``scores`` and ``seconds`` per method, ``completion``, ``prompt``, ``correct``).
    """
    if isinstance(methods, str) or not methods:
        raise ValueError(f"methods must be a non-empty list of method names, got {methods!r}")
    for m in methods:
        parse_method(m)
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    from tqdm.auto import tqdm

    if model is None or tokenizer is None:
        model, tokenizer = toy.load_model()
    problems = list(problems) if problems is not None else toy.load_eval_set()
    if not problems:
        raise ValueError("problems is empty")
    chosen = [problems[i % len(problems)] for i in range(n)]
    options.setdefault("pad_token_id", tokenizer.pad_token_id)

    records = []
    for i in range(0, n, batch_size):
        chunk = chosen[i : i + batch_size]
        cap = max(toy.max_new_tokens(p.get("digits", len(str(p["a"])))) for p in chunk)
        ro = sample_completions(model, tokenizer, [p["prompt"] for p in chunk], max_new_tokens=cap,
                                temperature=temperature, formats=toy.FORMATS, seed=seed * 1000 + i)
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
                                  generator=generators[m], **options)
            rec["seconds"][m] = time.perf_counter() - t0
            rec["scores"][m] = scores.detach().float().cpu()

    results = {}
    for m in methods:
        auc, auc_all, pak, secs = [], [], [], []
        for rec in records:
            s, lab = rec["scores"][m], rec["labels"]
            pos, neg = lab == toy.PIVOTAL, lab == toy.NEUTRAL
            auc.append(roc_auc(s, pos, neg))
            auc_all.append(roc_auc(s, pos))
            pak.append(precision_at_k(s, pos, neg))
            secs.append(rec["seconds"][m])
        results[m] = {"auc_mean": _mean(auc), "auc_std": _std(auc), "auc_all_mean": _mean(auc_all),
                      "auc_all_std": _std(auc_all), "p_at_k_mean": _mean(pak), "p_at_k_std": _std(pak),
                      "seconds_per_completion": _mean(secs), "n": len(records), "n_sampled": n}
    return (results, records) if return_records else results


def _mean(xs: list[float]) -> float:
    return float(sum(xs) / len(xs)) if xs else float("nan")


def _std(xs: list[float]) -> float:
    if len(xs) < 2:
        return float("nan")
    m = _mean(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))


def results_table(results: dict, *, digits: int = 3) -> str:
    """Render `credit_benchmark`'s dict as a markdown table (one row per method)."""
    rows = ["| method | AUC pivotal vs neutral | AUC pivotal vs rest | precision@k | s / completion | n |",
            "|---|---|---|---|---|---|"]
    for m, r in results.items():
        rows.append(f"| `{m}` | {r['auc_mean']:.{digits}f} ± {r['auc_std']:.{digits}f} "
                    f"| {r['auc_all_mean']:.{digits}f} ± {r['auc_all_std']:.{digits}f} "
                    f"| {r['p_at_k_mean']:.{digits}f} ± {r['p_at_k_std']:.{digits}f} "
                    f"| {r['seconds_per_completion']:.4f} | {r['n']} |")
    return "\n".join(rows)


def rank_agreement(a: torch.Tensor, b: torch.Tensor) -> float:
    """Spearman rank correlation of two score vectors ``[R]`` (average ranks for ties)."""
    if a.shape != b.shape or a.dim() != 1:
        raise ValueError(f"expected two [R] score vectors, got {tuple(a.shape)} and {tuple(b.shape)}")
    ra, rb = _ranks(a.double()), _ranks(b.double())
    ra, rb = ra - ra.mean(), rb - rb.mean()
    denom = (ra.norm() * rb.norm()).item()
    return float((ra @ rb).item() / denom) if denom > 0 else float("nan")


def _ranks(x: torch.Tensor) -> torch.Tensor:
    """Average ranks (1-based), ties sharing the mean of their positions."""
    order = x.argsort()
    ranks = torch.empty_like(x)
    ranks[order] = torch.arange(1, x.numel() + 1, dtype=x.dtype)
    for v in x.unique():
        tie = x == v
        if tie.sum() > 1:
            ranks[tie] = ranks[tie].mean()
    return ranks


DEFAULT_METHODS = ("uniform", "random", "entropy", "oar-p:last", "oar-p:answer_mean", "oar-p:answer_joint",
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
    return {toy.LABEL_NAMES[k]: _mean(v) for k, v in sums.items()}
