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
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import torch

from .attribution import eval_mode, token_weights
from .grpo import group_advantages, sequence_logprobs
from .reward import math_reward
from .rollout import sample_batch


def _weighting(spec) -> tuple[str, dict]:
    """``"oar-p:answer_mean"`` or ``("oracle", {"boost": 9})`` -> (method, reshaping options)."""
    if isinstance(spec, str):
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
    seed: int = 0,
    max_new_tokens: int = 66,
    temperature: float = 1.0,
    formats: Sequence[str] = ("a_equals",),
    reshape: Mapping | None = None,
    on_batch=None,
) -> tuple[dict[str, torch.Tensor], dict]:
    """Per-batch policy gradients of J_w (module docstring) under each weighting, from the
    same batches: batch b samples ``group_size`` completions for each of ``prompts`` problems
    (`oar_lite.rollout.sample_batch` of ``(seed, b)``, as training step b), rewarded by
    `math_reward`; one forward pass serves all weightings.

    Args:
        model, tokenizer: the policy (left unchanged: no optimizer step, ``.grad`` untouched).
        problems: dicts with ``"prompt"`` and ``"answer"``.
        weightings: ``{label: method}``, ``method`` a name `token_weights` takes or a
            ``(method, options)`` pair whose options override ``reshape``
            (``("oracle", {"boost": 9})``). Must include ``"uniform"`` for `gradient_stats`.
        batches, prompts, group_size: N >= 2 batches of ``prompts x group_size`` completions.
        seed, max_new_tokens, temperature, formats: sampling.
        reshape: `CreditConfig` fields and scorer options for every weighting (`token_weights`).
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
    if not weightings:
        raise ValueError("weightings is empty; expected e.g. {'uniform': 'uniform', 'oracle': 'oracle'}")
    specs = {label: _weighting(spec) for label, spec in weightings.items()}
    base = {"pad_token_id": tokenizer.pad_token_id, **(reshape or {})}
    params = [p for p in model.parameters() if p.requires_grad]
    grads = {label: [] for label in specs}
    info = {"rewards": [], "mixed": [], "weights": {label: [] for label in specs}, "rows": []}
    with eval_mode(model):
        for b in range(batches):
            rows, ro = sample_batch(model, tokenizer, problems, prompts=prompts, group_size=group_size, seed=seed, step=b,
                                    max_new_tokens=max_new_tokens, temperature=temperature, formats=formats)
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
        gram = torch.zeros(N, N, dtype=torch.float64)  # [N, N], summed over blocks of columns in float64
        step = max(1, STATS_BLOCK_BYTES // (8 * N))
        for start in range(0, g.shape[1], step):
            block = g[:, start:start + step].double()
            gram += block @ block.T
        gram = gram.numpy()
        mean_sq = np.einsum("kn,nm,km->k", counts, gram, counts) / N**2  # |mean of the resample|^2
        noise = (counts @ np.diag(gram) - N * mean_sq) / (N - 1)
        signal = np.maximum(mean_sq - noise / N, 0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(noise > 0, signal / noise, np.inf)

    base = snrs(gradients[reference])
    alpha = (1 - level) / 2
    out = {}
    for label, g in gradients.items():
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = snrs(g) / base
        ratio = ratio[np.isfinite(ratio)]
        out[label] = (float(np.quantile(ratio, alpha)), float(np.quantile(ratio, 1 - alpha))) if len(ratio) else (
            float("nan"), float("nan"))
    return out


def gradient_quality(model, tokenizer, problems: Sequence[dict], weightings: Mapping[str, object], **kwargs) -> dict:
    """`batch_gradients` then `gradient_stats`: ``{"stats": {label: {...}}, "info": {...}}``
    (``info`` without the raw gradients; see `batch_gradients` for the arguments)."""
    grads, info = batch_gradients(model, tokenizer, problems, weightings, **kwargs)
    return {"stats": gradient_stats(grads), "info": info}
