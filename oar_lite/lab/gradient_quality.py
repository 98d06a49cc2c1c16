"""Gradient quality: what credit assignment does to the policy gradient of one batch (notebook 06).

A weighting w changes only the weights of GRPO's batch objective
``J_w = (1/B) sum_i sum_t A_i w_{i,t} log pi(y_{i,t} | y_{i,<t})``; with w = 1 (GRPO) the
batch gradients average to the true policy gradient g*, any other w trades some bias for,
one hopes, less noise. `gradient_stats` measures per weighting, on the same batches:

- ``cosine``: mean over batches of cos(g_w, g*), g* estimated split-half (each batch is
  compared with the mean uniform gradient of the other half, never with itself);
- ``bias_cosine``: cos(mean g_w of one half, g* of the other), averaged over the halves;
- ``snr``: ``|E g_w|^2 / E|g_w - E g_w|^2``, the mean's power corrected for its own noise;
- ``scale``: |mean g_w| / |g*|, the step length relative to GRPO's.

**The share credit can remove** (`variance_components`): a batch gradient's noise (the trace of
its covariance) comes from three places, measured on nested batches (``draws`` completion
batches of each prompt set, `batch_gradients`):

- *prompts*: which prompts the batch drew (the spread of E[g | prompts]);
- *completions*: which completions were sampled for them, from the tokens that decide the reward;
- *irrelevant tokens*: what the tokens the reward does not depend on add (an oracle's labels
  say which). Their expected contribution is 0, so weighting them 0 removes this noise and
  leaves the mean: it is the only share credit can take away without bias.

If that share is s, the best credit's SNR is at most 1 / (1 - s) times GRPO's, so it can speed
learning only where s is large. `completion_noise_shares` estimates the same share from single
labelled completions (no nested batches: SmolLM2's Monte-Carlo ground truth).
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import torch

from ..attribution import CREDIT_FIELDS, credit_settings, eval_mode, token_weights
from ..course import oracle, toy
from ..grpo import group_advantages, sequence_logprobs
from ..reshape import effective_share
from ..reward import math_reward
from ..rollout import SAMPLING, sample_batch
from .compare import TRAINING, for_methods
from . import scorers  # noqa: F401  (registers the lab's methods, which it runs by name)
from .stats import mean, percentile_interval


def _finite_interval(values: np.ndarray, level: float) -> tuple[float, float]:
    """`percentile_interval` of the finite ``values``; NaN, NaN when none is."""
    values = values[np.isfinite(values)]
    return percentile_interval(values, level) if len(values) else (float("nan"),) * 2


def _weighting(spec) -> tuple[object, dict]:
    """``"oar-p:answer_mean"`` or ``("oracle", {"boost": 9})`` -> (method, reshaping options);
    a callable (weights from the rollouts, `batch_gradients`) -> (it, {})."""
    if isinstance(spec, str) or callable(spec):
        return spec, {}
    if isinstance(spec, (tuple, list)) and len(spec) == 2 and isinstance(spec[0], str) and isinstance(spec[1], Mapping):
        return spec[0], dict(spec[1])
    raise ValueError(f"a weighting is a method name or a (method, options) pair such as ('oracle', {{'boost': 9}}), "
                     f"got {spec!r}")


def _span(mask: torch.Tensor, offset: int) -> tuple[int, int]:
    idx = mask.nonzero().flatten()
    return int(idx[0]) - offset, int(idx[-1]) + 1 - offset


def batch_gradients(
    model,
    tokenizer,
    problems: Sequence[dict],
    weightings: Mapping[str, object],
    *,
    batches: int = 60,
    prompts: int = 8,
    group_size: int = 8,
    draws: int = 1,
    seed: int = 0,
    max_new_tokens: int = TRAINING.max_new_tokens,
    temperature: float = SAMPLING.temperature,
    formats: Sequence[str] = ("a_equals",),
    reshape: Mapping | None = None,
    on_batch=None,
) -> tuple[dict[str, torch.Tensor], dict]:
    """Per-batch policy gradients of J_w (module docstring) under each weighting, from the
    same batches: batch b samples ``group_size`` completions for each of ``prompts`` problems
    (`oar_lite.rollout.sample_batch`: the problems of step ``b // draws``, the completions of
    step ``b``, as training step b when ``draws`` is 1), rewarded by `math_reward`; one forward
    pass serves all weightings.

    Args:
        model, tokenizer: the policy (left unchanged: no optimizer step, ``.grad`` untouched).
        problems: dicts with ``"prompt"`` and ``"answer"``.
        weightings: ``{label: method}``, ``method`` a name `token_weights` takes, a
            ``(method, options)`` pair whose options override ``reshape``
            (``("oracle", {"boost": 9})``), or a callable ``fn(rollouts) -> [B, T]`` weights
            (`oar_lite.rollout.Rollouts`; e.g. 0 on tokens an oracle calls irrelevant).
            Must include ``"uniform"`` for `gradient_stats`.
        batches, prompts, group_size: N >= 2 batches of ``prompts x group_size`` completions.
        draws: consecutive batches that share their problems (``draws`` completion batches of
            each prompt set, for `variance_components`; 1: every batch draws its own).
        seed, max_new_tokens, temperature, formats: sampling.
        reshape: `CreditConfig` fields and scorer options for every weighting (`token_weights`);
            a `CreditConfig` field goes to the weightings whose method takes it.
        on_batch: called as ``on_batch(b, info)`` after each batch (progress).

    Returns:
        ``(gradients, info)``: ``{label: [N, D]}`` float32 (D = number of trainable
        parameters), and ``info`` with ``rewards`` (mean reward per batch), ``mixed`` (share
        of groups with a spread), ``weights`` (``{label: [R_i] reasoning weights per scored
        row}``) and ``rows`` (per scored row: prompt, completion ids, advantage, and reasoning
        and answer spans in completion tokens).
    """
    if batches < 2:
        raise ValueError(f"batches must be >= 2 (the true gradient is estimated split-half), got {batches}")
    if prompts < 1 or group_size < 2:
        raise ValueError(f"need prompts >= 1 and group_size >= 2, got {prompts} and {group_size}")
    if not isinstance(draws, int) or draws < 1 or batches % draws:
        raise ValueError(f"draws must be a positive int that divides batches ({batches}), got {draws!r}")
    if not weightings:
        raise ValueError("weightings is empty; expected e.g. {'uniform': 'uniform', 'oracle': 'oracle'}")
    specs = {label: _weighting(spec) for label, spec in weightings.items()}
    # A shared credit setting goes to the weightings whose method takes it (plain GRPO takes no boost).
    named = [m for m, _ in specs.values() if isinstance(m, str)]
    shared = {k: v for k, v in (reshape or {}).items() if k in CREDIT_FIELDS}
    for_methods(named, shared)  # ValueError: one that none of them takes
    base = {"pad_token_id": tokenizer.pad_token_id, **{k: v for k, v in (reshape or {}).items() if k not in shared}}
    for label, (method, options) in specs.items():
        if isinstance(method, str):
            specs[label] = (method, {**{k: v for k, v in shared.items() if k in credit_settings(method)}, **options})
    params = [p for p in model.parameters() if p.requires_grad]
    grads = {label: [] for label in specs}
    info = {"rewards": [], "mixed": [], "weights": {label: [] for label in specs}, "rows": []}
    with eval_mode(model):
        for b in range(batches):
            rows, ro = sample_batch(model, tokenizer, problems, prompts=prompts, group_size=group_size, seed=seed, step=b,
                                    problem_step=b // draws, max_new_tokens=max_new_tokens, temperature=temperature,
                                    formats=formats)
            rewards = torch.tensor([math_reward(c, p["answer"], formats=formats) for c, p in zip(ro.completions, rows)])
            adv = group_advantages(rewards, group_size)
            reasoning_mask, answer_mask = ro.masks()
            answer_mask = answer_mask & (adv != 0)[:, None]
            scored = answer_mask.any(dim=1)
            info["rewards"].append(float(rewards.mean()))
            info["mixed"].append(float((rewards.view(-1, group_size).std(dim=1) > 0).float().mean()))
            P = ro.prompt_length
            info["rows"] += [{"prompt": ro.prompts[i], "completion_ids": ro.completion_ids[i], "advantage": float(adv[i]),
                              "reasoning": _span(reasoning_mask[i], P), "answer": _span(answer_mask[i], P)}
                             for i in range(len(ro)) if scored[i]]
            C = ro.input_ids.shape[1] - P
            with torch.enable_grad():
                logp = sequence_logprobs(model, ro.input_ids, ro.attention_mask, C)  # [B, C]
                for k, (label, (method, options)) in enumerate(specs.items()):
                    if callable(method):
                        w = method(ro).to(torch.float32)
                        if w.shape != ro.input_ids.shape:
                            raise ValueError(f"weighting {label!r} returned weights of shape {tuple(w.shape)}, "
                                             f"expected the rollouts' [B, T] {tuple(ro.input_ids.shape)}")
                    else:
                        w = token_weights(model, ro.input_ids, ro.attention_mask, reasoning_mask, answer_mask,
                                          method=method, **{**base, **options})
                    info["weights"][label] += [w[i][reasoning_mask[i]] for i in range(len(ro)) if scored[i]]
                    objective = (adv[:, None] * w[:, P:] * logp * ro.completion_mask).sum() / len(ro)
                    g = torch.autograd.grad(objective, params, retain_graph=k < len(specs) - 1, allow_unused=True)
                    grads[label].append(torch.cat([(x if x is not None else torch.zeros_like(p)).flatten().float()
                                                   for x, p in zip(g, params)]))
            if on_batch is not None:
                on_batch(b, info)
    return {label: torch.stack(gs) for label, gs in grads.items()}, info


def weight_mass_on(info: dict, mask_label: str = "relevant") -> dict[str, dict[str, float]]:
    """Where each weighting of `batch_gradients` puts its weight, against the tokens a 0/1
    weighting (``mask_label``, e.g. the toy's ``relevant`` labels) sets to 0: per label, the
    mean over scored rows of the share of the row's weight mass on those tokens
    (``irrelevant_mass``; uniform credit's is their share of the tokens) and of the effective
    share of tokens (sum w)^2 / (R sum w^2) (``effective_share``; 1 for uniform). Rows whose
    weights sum to 0 are left out."""
    if mask_label not in info["weights"]:
        raise ValueError(f"no weighting {mask_label!r} in info (has {sorted(info['weights'])}); pass the 0/1 one")
    masks = [w == 0 for w in info["weights"][mask_label]]
    out = {}
    for label, rows in info["weights"].items():
        if label == mask_label:
            continue
        mass, spread = [], []
        for w, off in zip(rows, masks):
            w = w.double()
            total = float(w.sum())
            if total <= 0:
                continue
            mass.append(float(w[off].sum()) / total)
            spread.append(effective_share(w))
        out[label] = {"irrelevant_mass": mean(mass), "effective_share": mean(spread), "rows": len(mass)}
    return out


def irrelevant_mask(rollouts, tokenizer=None) -> torch.Tensor:
    """``[B, T]`` bool over a `oar_lite.rollout.Rollouts`' columns: True on the completion tokens
    the reward does not depend on (`toy.NEUTRAL`: filler and scratch words, separators), False
    elsewhere and on every token of a completion that cannot be parsed. Weighting these tokens
    0 is the credit `variance_components` compares with GRPO."""
    tokenizer = tokenizer or oracle.toy_tokenizer()
    mask = torch.zeros(rollouts.input_ids.shape, dtype=torch.bool)
    P = rollouts.prompt_length
    for row, ids in enumerate(rollouts.completion_ids):
        labels = toy.token_labels(tokenizer, ids)
        if labels is not None:
            mask[row, P:P + len(ids)] = labels == toy.NEUTRAL
    return mask.to(rollouts.input_ids.device)


def blame_shares(rows: list[dict], weights: dict[str, list[torch.Tensor]], tokenizer=None) -> dict[str, dict]:
    """``{label: {"share", "n"}}``: `oar_lite.course.oracle.blame_share` per weighting,
    averaged over the wrong completions that have a wrong reasoning token, plus under
    ``"_tokens"`` the share of reasoning tokens that are wrong (what uniform credit gives).
    ``rows`` are the scored completions as `batch_gradients` records them (``prompt``,
    ``completion_ids``, ``(start, stop)`` of ``reasoning`` and ``answer`` in completion
    tokens); ``weights`` is ``{label: [R_i] reasoning weights per row}``, aligned with them."""
    tokenizer = tokenizer or oracle.toy_tokenizer()
    masks = []
    for row in rows:
        prompt_ids = tokenizer(row["prompt"])["input_ids"]
        ids = torch.tensor(prompt_ids + list(row["completion_ids"]))
        (start, stop), (a_start, a_stop) = ((p + len(prompt_ids) for p in row[k]) for k in ("reasoning", "answer"))
        wrong = oracle.wrong_tokens(ids, slice(start, stop), slice(a_start, a_stop), tokenizer)
        masks.append(wrong if wrong is not None and wrong.any() else None)
    out = {}
    for label, ws in weights.items():
        if len(ws) != len(rows):
            raise ValueError(f"{label!r}: {len(ws)} weight rows for {len(rows)} rows")
        shares = [oracle.blame_share(w.float(), m) for w, m in zip(ws, masks) if m is not None]
        out[label] = {"share": sum(shares) / len(shares) if shares else float("nan"), "n": len(shares)}
    tokens = [float(m.float().mean()) for m in masks if m is not None]
    out["_tokens"] = {"share": sum(tokens) / len(tokens) if tokens else float("nan"), "n": len(tokens)}
    return out


STATS_BLOCK_BYTES = 2**27
"""`gradient_stats` (by rows) and `snr_ratio_intervals` (by columns) read the gradients in
float64 blocks of about this many bytes."""


def _row_blocks(g: torch.Tensor):
    """``(rows, block [n, D] float64)`` over ``g`` ``[N, D]``, about `STATS_BLOCK_BYTES` at a time."""
    step = max(1, STATS_BLOCK_BYTES // (8 * max(1, g.shape[1])))
    for start in range(0, g.shape[0], step):
        yield torch.arange(start, min(start + step, g.shape[0])), g[start:start + step].double()


def _half_means(g: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The float64 means ``[D]`` of the even and of the odd rows of ``g`` ``[N, D]`` (the two
    halves the true gradient is estimated from), without a float64 copy of ``g``."""
    sums = [torch.zeros(g.shape[1], dtype=torch.float64) for _ in range(2)]
    for rows, block in _row_blocks(g):
        even = rows % 2 == 0
        sums[0] += block[even].sum(0)
        sums[1] += block[~even].sum(0)
    return sums[0] / ((g.shape[0] + 1) // 2), sums[1] / (g.shape[0] // 2)


def _cosine(dot, x_sq, y_sq) -> torch.Tensor:
    """Cosine similarity from the dot product and the two squared norms, by
    ``torch.nn.functional.cosine_similarity``'s formula: ``dot / sqrt(max(x_sq * y_sq, eps^2))``, eps = 1e-8."""
    return torch.as_tensor(dot, dtype=torch.float64) / torch.sqrt(torch.clamp(
        torch.as_tensor(x_sq, dtype=torch.float64) * torch.as_tensor(y_sq, dtype=torch.float64), min=1e-16))


def gradient_stats(gradients: Mapping[str, torch.Tensor], *, reference: str = "uniform") -> dict[str, dict]:
    """``{label: {"cosine", "cosine_std", "bias_cosine", "snr", "scale"}}`` (floats, module
    docstring) from ``gradients``, ``{label: [N, D]}`` per-batch gradients, row b of every
    label from the same batch b; ``reference`` (the uniform weighting) estimates g*.

    Computed in float64 over blocks of rows (`STATS_BLOCK_BYTES`), so the memory above the
    gradients themselves is a few ``[D]`` vectors and one block, not ``[N, D]`` copies."""
    if reference not in gradients:
        raise ValueError(f"gradients needs the reference weighting {reference!r}; got {sorted(gradients)}")
    ref = gradients[reference]
    N = ref.shape[0]
    if N < 2:
        raise ValueError(f"need at least 2 batches, got {N}")
    for label, g in gradients.items():
        if g.shape != ref.shape:
            raise ValueError(f"{label!r} has gradients of shape {tuple(g.shape)}, expected {tuple(ref.shape)} like {reference!r}")
    sizes = ((N + 1) // 2, N // 2)  # the even and the odd batches
    half_ref = _half_means(ref)
    half_ref_sq = torch.stack([h.pow(2).sum() for h in half_ref])  # [2]
    truth_norm = float(((half_ref[0] * sizes[0] + half_ref[1] * sizes[1]) / N).norm())
    out = {}
    for label, g in gradients.items():
        half_means = half_ref if g is ref else _half_means(g)  # the reference's were read above
        mean = (half_means[0] * sizes[0] + half_means[1] * sizes[1]) / N
        cos, noise = torch.empty(N, dtype=torch.float64), 0.0
        for rows, block in _row_blocks(g):
            other = (rows % 2 == 0).long()  # batch b is compared with the other half's reference mean
            dots = torch.stack([block @ half_ref[0], block @ half_ref[1]], dim=1).gather(1, other[:, None])[:, 0]
            cos[rows] = _cosine(dots, block.pow(2).sum(1), half_ref_sq[other])
            noise += float((block - mean).pow(2).sum())
        noise /= N - 1  # E|g_b - mean|^2, unbiased
        bias = [float(_cosine(half_means[i] @ half_ref[1 - i], half_means[i].pow(2).sum(), half_ref_sq[1 - i]))
                for i in (0, 1)]
        signal = max(float(mean.pow(2).sum()) - noise / N, 0.0)
        out[label] = {
            "cosine": float(cos.mean()),
            "cosine_std": float(cos.std()),
            "bias_cosine": sum(bias) / 2,
            "snr": signal / noise if noise > 0 else float("inf"),
            "scale": float(mean.norm() / truth_norm) if truth_norm > 0 else float("nan"),
        }
    return out


def _gram(a: torch.Tensor, b: torch.Tensor | None = None):
    """``a @ b.T`` ``[N, M]`` as a float64 numpy array (``b`` defaults to ``a``), summed over
    float64 blocks of columns of about `STATS_BLOCK_BYTES`, never a whole float64 copy."""
    b = a if b is None else b
    gram = torch.zeros(a.shape[0], b.shape[0], dtype=torch.float64)
    step = max(1, STATS_BLOCK_BYTES // (8 * max(a.shape[0], b.shape[0])))
    for start in range(0, a.shape[1], step):
        gram += a[:, start:start + step].double() @ b[:, start:start + step].double().T
    return gram.numpy()


def snr_ratio_intervals(gradients: Mapping[str, torch.Tensor], *, reference: str = "uniform", n_boot: int = 2000,
                        seed: int = 0, level: float = 0.95) -> dict[str, tuple[float, float]]:
    """Percentile bootstrap interval of each weighting's SNR divided by the reference's:
    batches resampled jointly for every weighting (they share rollouts), the SNR recomputed
    from each label's ``[N, N]`` Gram matrix (no pass over the D parameters per resample).
    ``gradients`` as for `gradient_stats`; ``n_boot`` resamples from ``seed``, coverage
    ``level``. Returns ``{label: (low, high)}`` of SNR(label) / SNR(reference), dropping the
    resamples where the reference's SNR is 0."""
    if reference not in gradients:
        raise ValueError(f"gradients needs the reference weighting {reference!r}; got {sorted(gradients)}")
    N = gradients[reference].shape[0]
    if N < 2:
        raise ValueError(f"a bootstrap over batches needs at least 2 batches, got {N}")
    counts = np.random.default_rng(seed).multinomial(N, np.full(N, 1 / N), size=n_boot).astype(float)  # [K, N]

    def snrs(g: torch.Tensor) -> np.ndarray:
        if g.shape[0] != N:
            raise ValueError(f"every weighting needs the same {N} batches, got {g.shape[0]}")
        # `_components` with one draw per batch: the noise is the whole variance, nothing within
        noise, _, _, signal = _components(_gram(g), np.zeros(N), 1, counts)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(noise > 0, np.maximum(signal, 0.0) / noise, np.inf)

    base = snrs(gradients[reference])
    with np.errstate(divide="ignore", invalid="ignore"):
        return {label: _finite_interval(snrs(g) / base, level) for label, g in gradients.items()}


def gradient_quality(model, tokenizer, problems: Sequence[dict], weightings: Mapping[str, object], **kwargs) -> dict:
    """`batch_gradients` then `gradient_stats`: ``{"stats": {label: {...}}, "info": {...}}``
    (``info`` without the raw gradients; see `batch_gradients` for the arguments)."""
    grads, info = batch_gradients(model, tokenizer, problems, weightings, **kwargs)
    return {"stats": gradient_stats(grads), "info": info}


# ----------------------------------------------------------------------------- the share credit can remove

VARIANCE_PARTS = ("prompts", "completions", "irrelevant")
"""The parts of a batch gradient's variance that `variance_components` returns (module docstring)."""


def _nested_stats(gram, draws: int):
    """From the Gram matrix ``[N * M, N * M]`` of nested batch gradients (rows n * M + m):
    ``(means_gram [N, N], within [N])``: the inner products of the prompt sets' mean gradients,
    and each set's unbiased within-set variance (trace) over its M draws."""
    N = gram.shape[0] // draws
    blocks = gram.reshape(N, draws, N, draws)
    means_gram = blocks.sum(axis=(1, 3)) / draws**2
    own = np.einsum("nmnm->nm", blocks).sum(1)  # sum over m of |x_nm|^2
    within = (own - draws * np.diag(means_gram)) / (draws - 1)
    return means_gram, within


def _components(means_gram, within, draws: int, counts):
    """Variance parts of the batch gradient for each row of ``counts`` ``[K, N]`` (how often
    each prompt set is drawn; all ones is the sample itself): ``(total, prompts, completions,
    signal)`` arrays ``[K]``. ANOVA: completions = the mean within-set variance; prompts = the
    variance of the set means minus completions / M; signal = |mean|^2 minus its own noise."""
    N = means_gram.shape[0]
    mean_sq = np.einsum("kn,nm,km->k", counts, means_gram, counts) / N**2
    between = (counts @ np.diag(means_gram) - N * mean_sq) / (N - 1)
    completions = counts @ within / N
    prompts = between - completions / draws
    return prompts + completions, prompts, completions, mean_sq - between / N


def variance_components(full: torch.Tensor, relevant: torch.Tensor, *, draws: int, n_boot: int = 2000,
                        seed: int = 0, level: float = 0.95) -> dict:
    """Split the variance of a batch gradient into prompts, completions and irrelevant tokens.

    Args:
        full: ``[N * M, D]`` batch gradients under uniform credit (GRPO), from ``N`` prompt
            sets with ``M = draws`` completion batches each, rows ``n * M + m``
            (`batch_gradients` with ``draws=M``).
        relevant: ``[N * M, D]`` the same batches' gradients with the irrelevant tokens
            weighted 0 (what the ideal credit computes).
        draws: M >= 2; n_boot, seed, level: the percentile bootstrap over prompt sets.

    Returns:
        ``{"prompt_sets", "draws", "variance": {"total", "prompts", "completions",
        "irrelevant"}, "shares": {part: variance / total}, "shares_ci": {part: (low, high)},
        "signal", "snr", "snr_relevant", "irrelevant_mean_share"}``. Variances are traces
        (E|g - E g|^2). ``irrelevant`` = total - the variance left with those tokens weighted
        0; ``prompts`` and ``completions`` split what is left. ``snr_relevant / snr`` is at
        most ``1 / (1 - shares["irrelevant"])``, equal when those tokens leave the mean
        unchanged, as they should: ``irrelevant_mean_share`` (|E u|^2 / |E g|^2, u = full -
        relevant) says how far from that the labels are.

    Raises:
        ValueError: shapes differ, ``draws`` < 2 or does not divide the rows, fewer than 2 sets.
    """
    if full.shape != relevant.shape or full.dim() != 2:
        raise ValueError(f"full and relevant must both be [N * M, D], got {tuple(full.shape)} and {tuple(relevant.shape)}")
    if not isinstance(draws, int) or draws < 2 or full.shape[0] % draws:
        raise ValueError(f"draws must be an int >= 2 that divides the {full.shape[0]} rows (M completion batches per "
                         f"prompt set), got {draws!r}")
    N = full.shape[0] // draws
    if N < 2:
        raise ValueError(f"need at least 2 prompt sets, got {N}")
    cross = _gram(full, relevant)
    grams = {"full": _gram(full), "relevant": _gram(relevant)}
    grams["irrelevant"] = grams["full"] - cross - cross.T + grams["relevant"]  # u = full - relevant
    stats = {k: _nested_stats(g, draws) for k, g in grams.items()}
    counts = np.vstack([np.ones(N), np.random.default_rng(seed).multinomial(N, np.full(N, 1 / N), size=n_boot)])
    parts = {k: _components(*stats[k], draws, counts) for k in grams}  # row 0: the sample itself
    total, _, _, signal = parts["full"]
    left, prompts, completions, signal_relevant = parts["relevant"]
    values = {"total": total, "prompts": prompts, "completions": completions, "irrelevant": total - left}
    with np.errstate(divide="ignore", invalid="ignore"):
        shares = {k: values[k] / total for k in VARIANCE_PARTS}
    sig, sig_r = max(float(signal[0]), 0.0), max(float(signal_relevant[0]), 0.0)
    return {
        "prompt_sets": N, "draws": draws,
        "variance": {k: float(v[0]) for k, v in values.items()},
        "shares": {k: float(v[0]) for k, v in shares.items()},
        "shares_ci": {k: _finite_interval(v[1:], level) for k, v in shares.items()},  # row 0 is the sample
        "signal": sig,
        "snr": sig / float(total[0]) if total[0] > 0 else float("nan"),
        "snr_relevant": sig_r / float(left[0]) if left[0] > 0 else float("nan"),
        "irrelevant_mean_share": max(float(parts["irrelevant"][3][0]), 0.0) / sig if sig > 0 else float("nan"),
    }


def completion_noise_shares(model, sequences, *, groups=None, n_boot: int = 2000, seed: int = 0,
                            level: float = 0.95) -> dict:
    """The share of completion noise carried by irrelevant tokens, from single labelled
    completions (no nested batches; SmolLM2's Monte-Carlo ground truth labels a few dozen).

    Per completion i with advantage A_i and score S_i = grad sum_t log pi(y_t) over its
    completion tokens, S_i = R_i + U_i with U_i the irrelevant tokens' part: its noise is
    |A_i S_i|^2, the part irrelevant tokens carry |A_i S_i|^2 - |A_i R_i|^2. The share is their
    ratio summed over completions. It leaves out the prompts' part and the signal (one draw
    per completion cannot separate them): a share of the completion noise, so at least the
    share of the whole variance that `variance_components` measures.

    Args:
        model: the policy (gradients by `torch.autograd.grad`; ``.grad`` and modes untouched).
        sequences: dicts with ``input_ids`` ``[T]`` (prompt + completion), ``completion``
            (a ``slice`` of T), ``irrelevant`` (``[T]`` bool, the tokens the reward does not
            depend on) and ``advantage`` (a float).
        groups: per sequence, the unit the bootstrap resamples (e.g. its problem; default:
            each sequence its own).
        n_boot, seed, level: the percentile bootstrap.

    Returns:
        ``{"share", "share_ci", "n", "per_completion": [{"noise", "irrelevant", "tokens",
        "irrelevant_tokens"}]}`` (``noise`` = |A S|^2, ``irrelevant`` = |A S|^2 - |A R|^2).
    """
    if not sequences:
        raise ValueError("sequences is empty; expected dicts with input_ids, completion, irrelevant and advantage")
    groups = list(range(len(sequences))) if groups is None else list(groups)
    if len(groups) != len(sequences):
        raise ValueError(f"{len(groups)} groups for {len(sequences)} sequences; expected one each")
    params = [p for p in model.parameters() if p.requires_grad]
    rows = []
    with eval_mode(model):
        for i, seq in enumerate(sequences):
            ids, span, irrelevant = seq["input_ids"], seq["completion"], seq["irrelevant"]
            if ids.dim() != 1 or irrelevant.shape != ids.shape or not 0 < span.start < span.stop <= ids.numel():
                raise ValueError(f"sequence {i}: expected input_ids [T], irrelevant [T] bool and a completion slice "
                                 f"inside (0, T]; got {tuple(ids.shape)}, {tuple(irrelevant.shape)}, {span}")
            C = span.stop - span.start
            with torch.enable_grad():
                logp = sequence_logprobs(model, ids[None, :span.stop], torch.ones(1, span.stop, dtype=torch.long), C)[0]
                keep = (~irrelevant[span]).to(logp.dtype)
                a = float(seq["advantage"])
                full = torch.autograd.grad(a * logp.sum(), params, retain_graph=True, allow_unused=True)
                rel = torch.autograd.grad(a * (logp * keep).sum(), params, allow_unused=True)
            noise, left = (sum(float(x.double().pow(2).sum()) for x in g if x is not None) for g in (full, rel))
            rows.append({"noise": noise, "irrelevant": noise - left, "tokens": C,
                         "irrelevant_tokens": int(irrelevant[span].sum())})
    units = sorted(set(groups), key=groups.index)
    by_unit = np.array([[sum(r[k] for r, g in zip(rows, groups) if g == u) for k in ("irrelevant", "noise")]
                        for u in units])  # [U, 2]
    total = by_unit.sum(0)
    share = float(total[0] / total[1]) if total[1] > 0 else float("nan")
    counts = np.random.default_rng(seed).multinomial(len(units), np.full(len(units), 1 / len(units)), size=n_boot)
    sums = counts @ by_unit  # [K, 2]
    boot = sums[:, 0][sums[:, 1] > 0] / sums[:, 1][sums[:, 1] > 0]
    ci = _finite_interval(boot, level)
    return {"share": share, "share_ci": ci, "n": len(rows), "units": len(units), "per_completion": rows}


def coordinate_shares(full: torch.Tensor, relevant: torch.Tensor, *, draws: int,
                      groups: Mapping[str, torch.Tensor] | None = None) -> dict:
    """The irrelevant share of `variance_components` parameter by parameter: what it is for an
    optimizer that scales each parameter's step by its own gradient's size (Adam), where the
    noise of one parameter does not shrink another's step.

    Args:
        full, relevant, draws: as for `variance_components` (``[N * M, D]``, rows ``n * M + m``).
        groups: ``{name: [D] bool}`` parameter groups (e.g. the embedding, the attention and
            MLP weights) whose shares are also given.

    Returns:
        ``{"mean": the mean over parameters of (Var_j(full) - Var_j(relevant)) / Var_j(full),
        "groups": {name: {"mean": the same over the group, "trace": the group's share of the
        summed variances (`variance_components`' share restricted to it), "variance": the
        group's part of the total variance}}}``; parameters whose gradient never varies are
        left out. Per parameter the estimate is noisy, its mean over many is not.
    """
    if full.shape != relevant.shape or full.dim() != 2:
        raise ValueError(f"full and relevant must both be [N * M, D], got {tuple(full.shape)} and {tuple(relevant.shape)}")
    if not isinstance(draws, int) or draws < 2 or full.shape[0] % draws or full.shape[0] // draws < 2:
        raise ValueError(f"draws must be an int >= 2 that divides the {full.shape[0]} rows into >= 2 prompt sets, "
                         f"got {draws!r}")
    N, D = full.shape[0] // draws, full.shape[1]

    def per_coordinate(x: torch.Tensor) -> torch.Tensor:  # [D] total variance (ANOVA, as `_components`)
        means = torch.zeros(N, D, dtype=torch.float64)
        within = torch.zeros(D, dtype=torch.float64)
        for n in range(N):
            rows = x[n * draws:(n + 1) * draws].double()
            means[n] = rows.mean(0)
            within += (rows - means[n]).pow(2).sum(0) / (draws - 1)
        within /= N
        between = (means - means.mean(0)).pow(2).sum(0) / (N - 1)
        return between - within / draws + within

    total, left = per_coordinate(full), per_coordinate(relevant)
    varies = total > 0
    share = torch.where(varies, (total - left) / torch.where(varies, total, torch.ones_like(total)), torch.zeros_like(total))
    out = {"mean": float(share[varies].mean()), "groups": {}}
    for name, mask in (groups or {}).items():
        mask = torch.as_tensor(mask, dtype=torch.bool)
        if mask.shape != (D,):
            raise ValueError(f"group {name!r} must be a [D] = [{D}] bool mask, got {tuple(mask.shape)}")
        m = mask & varies
        out["groups"][name] = {"mean": float(share[m].mean()) if m.any() else float("nan"),
                               "trace": float((total[m] - left[m]).sum() / total[m].sum()) if m.any() else float("nan"),
                               "variance": float(total[m].sum() / total[varies].sum())}
    return out


def parameter_groups(model) -> dict[str, torch.Tensor]:
    """``{"embedding", "attention", "mlp", "norms", "other"}`` -> ``[D]`` bool masks over the
    trainable parameters in `batch_gradients`' order (by name: ``embed``/``lm_head``,
    ``self_attn``/``attn``, ``mlp``, ``norm``), for `coordinate_shares`."""
    names = {"embedding": ("embed", "lm_head", "wte", "wpe"), "attention": ("attn",), "mlp": ("mlp",),
             "norms": ("norm", "ln_")}
    params = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    D = sum(p.numel() for _, p in params)
    out = {k: torch.zeros(D, dtype=torch.bool) for k in (*names, "other")}
    start = 0
    for n, p in params:
        key = next((k for k, parts in names.items() if any(part in n for part in parts)), "other")
        out[key][start:start + p.numel()] = True
        start += p.numel()
    return {k: v for k, v in out.items() if v.any()}
