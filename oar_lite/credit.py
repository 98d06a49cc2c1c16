"""The credit-assignment benchmark: which tokens does each method say the answer hangs on,
and does that match the ground truth? (notebooks 02, 03 and 07)

`credit_benchmark` scores sampled toy completions with each method through
`oar_lite.attribution.token_scores` against `oar_lite.toy.token_labels`: ROC-AUC and
precision@k of pivotal vs neutral tokens (ties counted half, so constant scores give 0.5
and the base rate), and seconds per completion. `results_table` renders it.

The real-model ground truth, Pivotal Token Search's Monte-Carlo P(correct | prefix) on
SmolLM2, has its own section: `prefix_success_counts` estimates it
(scripts/mc_ground_truth.py writes `GROUND_TRUTH_PATH`), and `ground_truth_table` scores
methods against the shipped file without a model.
"""
from __future__ import annotations

import json
import math
import time
import warnings
from typing import Sequence

import torch

from . import toy
from .attribution import eval_mode, parse_method, token_scores
from .rollout import sample_completions


# ----------------------------------------------------------------------------- metrics

def roc_auc(scores: torch.Tensor, positive: torch.Tensor, negative: torch.Tensor | None = None) -> float:
    """ROC-AUC of ``scores [R]`` for the ``positive [R]`` (bool) against the ``negative [R]``
    tokens (default: every non-positive): P(a random positive scores higher than a random
    negative) + P(equal) / 2 (Mann-Whitney); NaN when there is no positive or no negative."""
    scores, positive, negative = _check_metric_inputs(scores, positive, negative)
    pos, neg = scores[positive].double(), scores[negative].double()
    if pos.numel() == 0 or neg.numel() == 0:
        return float("nan")
    greater = (pos[:, None] > neg[None, :]).double().mean()
    equal = (pos[:, None] == neg[None, :]).double().mean()
    return float(greater + 0.5 * equal)


def precision_at_k(scores: torch.Tensor, positive: torch.Tensor, negative: torch.Tensor | None = None) -> float:
    """Share of positives among the k highest-scored candidates (the positives and the
    ``negative`` tokens, default all), k = number of positives; ties at the cut are broken
    at random in expectation, so constant scores give the base rate. NaN without a positive."""
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
        **options: passed to every scorer (``batch_size`` for OAR-P, ``noise_std`` for
            OAR-G, ``n_steps`` for captum-ig; ``pad_token_id`` defaults to the tokenizer's).

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
        metrics = {"auc": [], "auc_all": [], "p_at_k": []}
        for rec in records:
            s, pos, neg = rec["scores"][m], rec["labels"] == toy.PIVOTAL, rec["labels"] == toy.NEUTRAL
            metrics["auc"].append(roc_auc(s, pos, neg))
            metrics["auc_all"].append(roc_auc(s, pos))
            metrics["p_at_k"].append(precision_at_k(s, pos, neg))
        results[m] = {**{f"{k}_{stat}": f(v) for k, v in metrics.items()
                         for stat, f in (("mean", _mean), ("std", _std))},
                      "seconds_per_completion": _mean([rec["seconds"][m] for rec in records]),
                      "n": len(records), "n_sampled": n}
    return (results, records) if return_records else results


def _mean(xs: list[float]) -> float:
    return float(sum(xs) / len(xs)) if xs else float("nan")


def _std(xs: list[float]) -> float:
    m = _mean(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1)) if len(xs) >= 2 else float("nan")


def results_table(results: dict, *, digits: int = 3) -> str:
    """Render `credit_benchmark`'s dict as a markdown table (one row per method)."""
    from .report import markdown_table

    pm = lambda r, key: f"{r[key + '_mean']:.{digits}f} ± {r[key + '_std']:.{digits}f}"
    return "\n".join(markdown_table(
        ["method", "AUC pivotal vs neutral", "AUC pivotal vs rest", "precision@k", "s / completion", "n"],
        [[f"`{m}`", pm(r, "auc"), pm(r, "auc_all"), pm(r, "p_at_k"), f"{r['seconds_per_completion']:.4f}", r["n"]]
         for m, r in results.items()]))


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
    return {toy.LABEL_NAMES[k]: _mean(v) for k, v in sums.items()}


# ----------------------------------------------------------------------------- Monte-Carlo ground truth
# Pivotal Token Search (Abdin et al. 2024, the Phi-4 report): the tokens where the estimated
# P(correct | prefix) jumps are the ones the outcome hangs on.

GROUND_TRUTH_PATH = toy.DATA_DIR / "smollm2_ground_truth.json"
"""The shipped Monte-Carlo ground truth on SmolLM2 (written by scripts/mc_ground_truth.py)."""

PIVOT_THRESHOLD = 0.2
"""A token is pivotal when P(correct | prefix) moves by at least this much across it
(the threshold of Pivotal Token Search)."""


def _prefix_cache(layers: list[tuple[torch.Tensor, torch.Tensor]], length: int, rows: int):
    """A ``DynamicCache`` of the first ``length`` positions for ``rows`` identical rows, cut
    from the per-layer ``(keys, values)`` ``[1, heads, T, d]`` of the whole sequence (computed
    once per completion)."""
    from transformers import DynamicCache

    cache = DynamicCache()
    for layer, (k, v) in enumerate(layers):
        cache.update(k[:, :, :length].expand(rows, -1, -1, -1).contiguous(),
                     v[:, :, :length].expand(rows, -1, -1, -1).contiguous(), layer)
    return cache


def _key_values(model, ids: list[int]) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Per-layer ``(keys, values)`` ``[1, heads, T - 1, d]`` of ``ids[:-1]`` (all a prefix
    of ``ids`` needs before its last token)."""
    device = next(model.parameters()).device
    with torch.no_grad(), eval_mode(model):
        out = model(input_ids=torch.tensor([ids[:-1] or ids], device=device), use_cache=True)
    return [(layer.keys, layer.values) for layer in out.past_key_values.layers]


def _continue(model, tokenizer, prefix: list[int], layers, k: int, max_new_tokens: int,
              temperature: float) -> list[list[int]]:
    """``k`` sampled continuations of ``prefix`` (ids, EOS and what follows cut off), in one
    ``generate`` call whose cache is ``layers`` cut to the prefix: the prefix is never re-read."""
    eos, length = tokenizer.eos_token_id, len(prefix)
    device = next(model.parameters()).device
    with torch.no_grad(), eval_mode(model), warnings.catch_warnings():
        # transformers 5 renames the argument to `cache`; >= 4.56 knows only this one
        warnings.filterwarnings("ignore", message=".*past_key_values.*", category=FutureWarning)
        generated = model.generate(
            input_ids=torch.tensor([prefix], device=device).expand(k, -1),
            attention_mask=torch.ones(k, length, dtype=torch.long, device=device),
            past_key_values=_prefix_cache(layers, length - 1, k),
            do_sample=True, temperature=temperature, top_p=1.0, top_k=0,
            max_new_tokens=max_new_tokens, pad_token_id=tokenizer.pad_token_id, eos_token_id=eos,
        )[:, length:].tolist()
    return [row[: row.index(eos)] if eos in row else row for row in generated]


def sample_continuations(model, tokenizer, prefix_ids: Sequence[int], *, k: int, max_new_tokens: int,
                         temperature: float = 1.0, seed: int | None = None) -> list[list[int]]:
    """``k`` continuations of one prefix (lists of new token ids, each cut before its EOS; one of
    ``max_new_tokens`` ids did not finish), sampled in one batch that reads the prefix once
    (its key/value cache copied to the ``k`` rows) instead of ``k`` times."""
    prefix_ids = list(prefix_ids)
    if not prefix_ids or k < 1 or max_new_tokens < 1 or temperature <= 0:
        raise ValueError(f"need a non-empty prefix, k >= 1, max_new_tokens >= 1 and temperature > 0, got "
                         f"{len(prefix_ids)} ids, k={k}, max_new_tokens={max_new_tokens}, temperature={temperature}")
    if seed is not None:
        torch.manual_seed(seed)
    return _continue(model, tokenizer, prefix_ids, _key_values(model, prefix_ids), k, max_new_tokens, temperature)


def prefix_success_counts(
    model,
    tokenizer,
    prompt_ids: Sequence[int],
    completion_ids: Sequence[int],
    is_correct,
    *,
    positions: Sequence[int] | None = None,
    k: int = 16,
    max_new_tokens: int | Sequence[int] = 48,
    temperature: float = 1.0,
    seed: int = 0,
) -> torch.Tensor:
    """Monte-Carlo numerators of P(correct | prompt + completion[:t]) at each position t.

    For each ``t``, ``k`` continuations of ``prompt_ids + completion_ids[:t]`` are sampled in
    one ``generate`` call from the whole sequence's key/value cache (computed once, cut at
    the prefix), and ``is_correct`` judges the decoded ``completion_ids[:t] + continuation``
    (unfinished ones as they stand; a prefix that already ends with EOS is judged once, for
    all ``k``). Each position is seeded from ``(seed, t)``, so a resumed run that asks for
    other positions gives the same numbers.

    Args:
        model, tokenizer: a causal LM and its tokenizer (pad and EOS tokens set).
        prompt_ids, completion_ids: token ids, P >= 1 and C of them.
        is_correct: ``text -> bool``, e.g. ``lambda t: math_reward(t, answer) == 1.0``.
        positions: prefix lengths in ``[0, C]`` (default: all).
        k: rollouts per position.
        max_new_tokens: continuation length cap, one for all positions or one per position.
        temperature, seed: sampling (``top_p=1``, no top-k); the base seed.

    Returns:
        ``[len(positions)]`` int64 counts of correct rollouts, each in ``[0, k]``;
        P(correct | prefix) is estimated by ``counts / k``.
    """
    prompt_ids, completion_ids = list(prompt_ids), list(completion_ids)
    C = len(completion_ids)
    positions = list(range(C + 1)) if positions is None else [int(t) for t in positions]
    if not prompt_ids:
        raise ValueError("prompt_ids is empty; expected at least one prompt token to condition on")
    if any(not 0 <= t <= C for t in positions):
        raise ValueError(f"positions must lie in [0, {C}] (prefix lengths of the completion), got {positions}")
    caps = [max_new_tokens] * len(positions) if isinstance(max_new_tokens, int) else list(max_new_tokens)
    if not isinstance(k, int) or k < 1 or len(caps) != len(positions) or any(not isinstance(c, int) or c < 1 for c in caps):
        raise ValueError(f"k must be an int >= 1 and max_new_tokens an int >= 1 or one per position, got k={k!r}, "
                         f"max_new_tokens={max_new_tokens!r} for {len(positions)} positions")
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0 (Monte-Carlo needs sampling), got {temperature}")
    eos = tokenizer.eos_token_id
    full = prompt_ids + completion_ids
    counts = torch.zeros(len(positions), dtype=torch.long)
    layers = _key_values(model, full)
    for i, (t, cap) in enumerate(zip(positions, caps)):
        prefix = completion_ids[:t]
        if prefix and prefix[-1] == eos:  # already finished: nothing to sample
            counts[i] = k * bool(is_correct(tokenizer.decode(prefix, skip_special_tokens=True)))
            continue
        torch.manual_seed(seed * 1_000_003 + t)
        for row in _continue(model, tokenizer, full[: len(prompt_ids) + t], layers, k, cap, temperature):
            counts[i] += bool(is_correct(tokenizer.decode(prefix + row, skip_special_tokens=True)))
    return counts


def _proportion(counts, k) -> tuple[torch.Tensor, torch.Tensor]:
    """``(p = counts / k, k)`` as float64 tensors, checked."""
    counts, k = torch.as_tensor(counts, dtype=torch.float64), torch.as_tensor(k, dtype=torch.float64)
    if (k < 1).any() or (counts < 0).any() or (counts > k).any():
        raise ValueError("expected 0 <= counts <= k and k >= 1")
    return counts / k, k


def mc_standard_error(counts, k) -> torch.Tensor:
    """Monte-Carlo standard error sqrt(p (1 - p) / k) of ``p = counts / k`` (0 when p is 0
    or 1: use `wilson_interval` there). ``counts`` and ``k`` broadcast."""
    p, k = _proportion(counts, k)
    return (p * (1 - p) / k).sqrt()


def wilson_interval(counts, k, z: float = 1.96) -> tuple[torch.Tensor, torch.Tensor]:
    """Wilson score interval ``(low, high)`` of a binomial proportion ``counts / k``
    (95% for ``z = 1.96``). Unlike p +- z SE it stays inside [0, 1] and has non-zero
    width when the estimate is 0 or 1."""
    p, k = _proportion(counts, k)
    centre = (p + z * z / (2 * k)) / (1 + z * z / k)
    half = z / (1 + z * z / k) * (p * (1 - p) / k + z * z / (4 * k * k)).sqrt()
    return (centre - half).clamp(min=0.0), (centre + half).clamp(max=1.0)


def load_ground_truth(path=None) -> dict:
    """The Monte-Carlo ground-truth file (default `GROUND_TRUTH_PATH`), checked (ValueError):
    ``{"settings": {...}, "completions": [...]}``, each completion with, among others, ``p``,
    ``se``, ``rollouts``, ``wilson_low``, ``wilson_high`` (``R + 1`` values each: ``p[t]`` =
    P(correct | prompt + completion[:t])), ``tokens`` (as text), ``reasoning`` (``[0, R]``),
    ``correct`` and ``scores`` (``{method: R scores}``)."""
    from pathlib import Path

    path = Path(path) if path is not None else GROUND_TRUTH_PATH
    if not path.exists():
        raise ValueError(f"no ground-truth file at {path}; write it with scripts/mc_ground_truth.py")
    data = json.loads(path.read_text())
    if not isinstance(data, dict) or not isinstance(data.get("completions"), list):
        raise ValueError(f"{path} is not a ground-truth file: expected a JSON object with a 'completions' list")
    for i, rec in enumerate(data["completions"]):
        missing = {"p", "se", "rollouts", "reasoning", "scores"} - set(rec)
        if missing:
            raise ValueError(f"completion {i} of {path} lacks {sorted(missing)}")
        R = rec["reasoning"][1] - rec["reasoning"][0]
        if len(rec["p"]) != R + 1 or len(rec["rollouts"]) != R + 1 or len(rec["se"]) != R + 1:
            raise ValueError(f"completion {i} of {path}: p, se and rollouts need R + 1 = {R + 1} values "
                             f"(one per prefix), got {len(rec['p'])}, {len(rec['se'])}, {len(rec['rollouts'])}")
        if any(not 0.0 <= p <= 1.0 for p in rec["p"]):
            raise ValueError(f"completion {i} of {path}: p must lie in [0, 1]")
        for m, s in rec["scores"].items():
            if len(s) != R:
                raise ValueError(f"completion {i} of {path}: method {m!r} has {len(s)} scores, expected R = {R}")
    return data


def probability_jumps(completion: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """``(delta [R], delta_se [R])`` of one ground-truth completion: how much reasoning
    token t moves P(correct | prefix), ``p[t + 1] - p[t]``, and its Monte-Carlo standard
    error ``sqrt(se[t]^2 + se[t + 1]^2)`` (the two estimates use independent rollouts)."""
    p = torch.tensor(completion["p"], dtype=torch.float64)
    se = torch.tensor(completion["se"], dtype=torch.float64)
    return p[1:] - p[:-1], (se[1:] ** 2 + se[:-1] ** 2).sqrt()


def ground_truth_table(data=None, *, threshold: float = PIVOT_THRESHOLD, methods: Sequence[str] | None = None) -> dict:
    """Each method's agreement with the Monte-Carlo ground truth (no model needed), averaged
    over the completions scored with it: ``auc``, `roc_auc` of pivotal (``|delta P| >=
    threshold``, `probability_jumps`) vs the other reasoning tokens (where both exist), and
    ``spearman``, `rank_agreement` of the scores with ``|delta P|`` (where neither is constant).

    Args:
        data: the loaded file (`load_ground_truth`), a path to one, or None for `GROUND_TRUTH_PATH`.
        threshold: the pivot threshold on ``|delta P|``, in (0, 1].
        methods: default: every method scored in the file.

    Returns:
        ``{method: {"auc_mean", "auc_std", "auc_ci95", "auc_n", "spearman_mean",
        "spearman_std", "spearman_ci95", "spearman_n"}}`` (plain floats and ints; ``ci95``
        is the half-width 1.96 std / sqrt(n); NaN where n < 2), in the file's method order.
    """
    if not isinstance(data, dict):
        data = load_ground_truth(data)
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"threshold must lie in (0, 1], got {threshold}")
    completions = data["completions"]
    if not completions:
        raise ValueError("the ground-truth data holds no completions")
    available = list(dict.fromkeys(m for rec in completions for m in rec["scores"]))
    methods = available if methods is None else list(methods)
    unknown = [m for m in methods if m not in available]
    if unknown:
        raise ValueError(f"method(s) {unknown} are not scored in the file; it has {available}")
    table = {}
    for m in methods:
        aucs, rhos = [], []
        for rec in (r for r in completions if m in r["scores"]):
            delta, _ = probability_jumps(rec)
            scores = torch.tensor(rec["scores"][m], dtype=torch.float64)
            pivotal = delta.abs() >= threshold - 1e-9
            if 0 < int(pivotal.sum()) < pivotal.numel():
                aucs.append(roc_auc(scores, pivotal))
            rho = rank_agreement(scores, delta.abs())
            if math.isfinite(rho):
                rhos.append(rho)
        table[m] = {"auc_mean": _mean(aucs), "auc_std": _std(aucs), "auc_ci95": _ci95(aucs), "auc_n": len(aucs),
                    "spearman_mean": _mean(rhos), "spearman_std": _std(rhos), "spearman_ci95": _ci95(rhos),
                    "spearman_n": len(rhos)}
    return table


def _ci95(xs: list[float]) -> float:
    return 1.96 * _std(xs) / math.sqrt(len(xs)) if len(xs) >= 2 else float("nan")


def ground_truth_summary(data=None, *, threshold: float = PIVOT_THRESHOLD) -> dict:
    """What the ground-truth file holds and how precise it is (a flat dict of plain numbers):
    counts of completions, reasoning tokens and pivotal tokens (and of those beyond twice
    their standard error), rollouts per prefix, the Monte-Carlo standard error of p (over
    all prefixes and over those strictly inside (0, 1), where the error is) and of
    ``delta P`` at pivotal tokens, and the CPU seconds the file cost."""
    if not isinstance(data, dict):
        data = load_ground_truth(data)
    completions = data["completions"]
    rollouts = [k for rec in completions for k in rec["rollouts"]]
    se = [s for rec in completions for s in rec["se"]]
    jumps = [(d, ds, d.abs() >= threshold - 1e-9) for d, ds in map(probability_jumps, completions)]
    pivot_se = [float(s) for _, ds, pivot in jumps for s in ds[pivot]]
    inside = [(s, k) for rec in completions for s, k, p in zip(rec["se"], rec["rollouts"], rec["p"]) if 0.0 < p < 1.0]
    settings = data.get("settings", {})
    return {"completions": len(completions), "right": sum(bool(r.get("correct")) for r in completions),
            "wrong": sum(not r.get("correct") for r in completions),
            "reasoning_tokens": sum(len(d) for d, _, _ in jumps),
            "pivotal_tokens": sum(int(pivot.sum()) for _, _, pivot in jumps),
            "completions_with_pivot": sum(bool(pivot.any()) for _, _, pivot in jumps),
            "pivotal_tokens_beyond_2se": sum(int((pivot & (d.abs() >= 2 * ds)).sum()) for d, ds, pivot in jumps),
            "threshold": threshold, "rollouts_min": min(rollouts), "rollouts_max": max(rollouts),
            "prefixes": len(se), "prefixes_inside": len(inside),
            "rollouts_inside_min": min((k for _, k in inside), default=None),
            "se_mean": _mean(se), "se_mean_inside": _mean([s for s, _ in inside]), "se_max": max(se),
            "pivot_delta_se_mean": _mean(pivot_se),
            "mc_cpu_seconds": settings.get("mc_cpu_seconds"), "score_cpu_seconds": settings.get("score_cpu_seconds")}


def ground_truth_markdown(table: dict, *, digits: int = 2) -> str:
    """Render `ground_truth_table`'s dict as a markdown table (one row per method)."""
    from .report import markdown_table

    pm = lambda r, key: f"{r[key + '_mean']:.{digits}f} ± {r[key + '_ci95']:.{digits}f}"
    return "\n".join(markdown_table(
        ["method", "AUC pivotal vs rest (95% CI)", "Spearman vs abs(delta P) (95% CI)", "n (AUC / Spearman)"],
        [[f"`{m}`", pm(r, "auc"), pm(r, "spearman"), f"{r['auc_n']} / {r['spearman_n']}"] for m, r in table.items()]))
