"""The real-model ground truth of credit: Pivotal Token Search's Monte-Carlo P(correct |
prefix) on SmolLM2 (Abdin et al. 2024, the Phi-4 report), where the tokens at which the
estimate jumps are the ones the outcome hangs on (notebook 06).

`prefix_success_counts` estimates it (scripts/mc_ground_truth.py writes `GROUND_TRUTH_PATH`);
`ground_truth_table` scores methods against the shipped file without a model.
"""
from __future__ import annotations

import json
import math
import warnings
from pathlib import Path
from typing import Sequence

import torch

from ..course import toy
from ..attribution import eval_mode
from .report import markdown_table
from ..rollout import SAMPLING
from ..seeding import derive_seed
from .stats import ci95, mean, rank_agreement, roc_auc, std

GROUND_TRUTH_PATH = Path(__file__).resolve().parent / "data" / "smollm2_ground_truth.json"
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
            do_sample=True, temperature=temperature, top_p=SAMPLING.top_p, top_k=SAMPLING.top_k,
            max_new_tokens=max_new_tokens, pad_token_id=tokenizer.pad_token_id, eos_token_id=eos,
        )[:, length:].tolist()
    return [row[: row.index(eos)] if eos in row else row for row in generated]


def sample_continuations(model, tokenizer, prefix_ids: Sequence[int], *, k: int, max_new_tokens: int,
                         temperature: float = SAMPLING.temperature, seed: int | None = None) -> list[list[int]]:
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
    temperature: float = SAMPLING.temperature,
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
        torch.manual_seed(derive_seed(seed, t))
        for row in _continue(model, tokenizer, full[: len(prompt_ids) + t], layers, k, cap, temperature):
            counts[i] += bool(is_correct(tokenizer.decode(prefix + row, skip_special_tokens=True)))
    return counts


def load_ground_truth(path=None) -> dict:
    """The Monte-Carlo ground-truth file (default `GROUND_TRUTH_PATH`), checked (ValueError):
    ``{"settings": {...}, "completions": [...]}``, each completion with, among others, ``p``,
    ``se``, ``rollouts``, ``wilson_low``, ``wilson_high`` (``R + 1`` values each: ``p[t]`` =
    P(correct | prompt + completion[:t])), ``tokens`` (as text), ``reasoning`` (``[0, R]``),
    ``correct`` and ``scores`` (``{method: R scores}``)."""
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


def rebuilt_sequence(completion: dict, tokenizer) -> tuple[torch.Tensor, int, slice, slice]:
    """``(input_ids [T], P, reasoning, answer)`` of one ground-truth completion, to score it again:
    its prompt rebuilt as scripts/mc_ground_truth.py built it (`oar_lite.course.problems.format_prompt`
    of its question, 2 shots; P tokens) followed by its completion ids, and the reasoning and
    answer spans in that sequence. ValueError when the rebuilt prompt's length differs from the
    file's ``prompt_tokens`` (the prompt format changed since the file was written)."""
    from ..course.problems import format_prompt

    prompt = tokenizer(format_prompt(completion["question"], tokenizer), add_special_tokens=False)["input_ids"]
    if len(prompt) != completion["prompt_tokens"]:
        raise ValueError(f"the rebuilt prompt of {completion['question']!r} has {len(prompt)} tokens, the file says "
                         f"{completion['prompt_tokens']}: the prompt format changed since the file was written")
    P = len(prompt)
    (r0, r1), (a0, a1) = completion["reasoning"], completion["answer_span"]
    return torch.tensor(prompt + list(completion["completion_ids"])), P, slice(P + r0, P + r1), slice(P + a0, P + a1)


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
        table[m] = {"auc_mean": mean(aucs), "auc_std": std(aucs), "auc_ci95": ci95(aucs), "auc_n": len(aucs),
                    "spearman_mean": mean(rhos), "spearman_std": std(rhos), "spearman_ci95": ci95(rhos),
                    "spearman_n": len(rhos)}
    return table


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
            "se_mean": mean(se), "se_mean_inside": mean([s for s, _ in inside]), "se_max": max(se),
            "pivot_delta_se_mean": mean(pivot_se),
            "mc_cpu_seconds": settings.get("mc_cpu_seconds"), "score_cpu_seconds": settings.get("score_cpu_seconds")}


def ground_truth_markdown(table: dict, *, digits: int = 2) -> str:
    """Render `ground_truth_table`'s dict as a markdown table (one row per method)."""
    pm = lambda r, key: f"{r[key + '_mean']:.{digits}f} ± {r[key + '_ci95']:.{digits}f}"
    return "\n".join(markdown_table(
        ["method", "AUC pivotal vs rest (95% CI)", "Spearman vs abs(delta P) (95% CI)", "n (AUC / Spearman)"],
        [[f"`{m}`", pm(r, "auc"), pm(r, "spearman"), f"{r['auc_n']} / {r['spearman_n']}"] for m, r in table.items()]))
