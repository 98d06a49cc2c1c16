"""OAR-G, the input-gradient proxy of OAR-P (spec section 5; notebook 03 builds it):
`gradient_scores`, readable, for one sequence (the reference), and `gradient_scores_batch`
for a padded batch in one pass each way, equal to it up to rounding (tested)."""
from __future__ import annotations

import copy

import torch

from ..settings import Setting
from ..rollout import output_cache
from .kv import cache_kwargs, check_sampled_cache, per_layer_copy, prefix_reusable, tell_no_prefix_reuse
from .outcome import (check_mode, check_sequence, divergence, eval_mode, final_logits, outcome_span, p_final,
                      padded_rows, upcast)

NOISE_STD = Setting(1e-3, "OAR-G: sigma of the Gaussian noise on the reasoning embeddings (>= 0; the KL modes "
                          "have zero gradient without it).", dict(low=0), label="OAR-G noise std")

def gradient_scores(
    model,
    input_ids: torch.Tensor,
    reasoning: slice,
    answer: slice,
    *,
    mode: str = "answer_mean",
    noise_std: float = NOISE_STD.default,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """OAR-G: gradient-times-input saliency of the outcome, ``|<dJ/de~_t, e_t>|`` (spec section 5).

    The gradient is taken with `torch.autograd.grad` on the embeddings only: the model's
    parameter ``.grad`` and its train/eval mode are left as they were.

    Args:
        model: a causal LM accepting ``inputs_embeds`` and ``logits_to_keep``.
        input_ids: ``[T]`` one sequence, no padding.
        reasoning, answer: half-open spans into ``input_ids``.
        mode: a P_final mode (`MODES`).
        noise_std: sigma of the noise on the reasoning embeddings (the KL modes have zero
            gradient without it; ``answer_joint`` does not need it).
        generator: RNG for the noise (reproducible scores).

    Returns:
        ``[R]`` float32 scores, >= 0.

    Raises:
        ValueError: spans out of range or overlapping, an unknown mode, ``noise_std < 0``.
    """
    check_sequence(input_ids, reasoning, answer)
    check_mode(mode)
    if noise_std < 0:
        raise ValueError(f"noise_std must be >= 0, got {noise_std}")
    end, keep = outcome_span(answer, mode)
    answer_ids = input_ids[answer]
    with eval_mode(model):
        with torch.no_grad():
            clean = p_final(final_logits(model, input_ids=input_ids[None, :end], keep=keep), answer_ids, mode)
            embeds = model.get_input_embeddings()(input_ids[None, :end]).detach()
            noise_shape = (reasoning.stop - reasoning.start, embeds.shape[-1])
            noise_device = generator.device if generator is not None else embeds.device
            noise = torch.randn(noise_shape, generator=generator, device=noise_device, dtype=torch.float32)
            noisy = embeds.clone()
            noisy[0, reasoning] += (noise_std * noise).to(embeds.device, embeds.dtype)
        noisy.requires_grad_(True)
        with torch.enable_grad():
            logits = final_logits(model, inputs_embeds=noisy, keep=keep)
            objective = divergence(clean, p_final(logits, answer_ids, mode), mode).sum()
            (grad,) = torch.autograd.grad(objective, noisy)
    saliency = (upcast(grad[0, reasoning]) * upcast(embeds[0, reasoning])).sum(-1).abs()
    return saliency.detach().float()


def gradient_scores_batch(
    model,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    reasoning: list[slice],
    answer: list[slice],
    *,
    mode: str = "answer_mean",
    noise_std: float = NOISE_STD.default,
    generator: torch.Generator | None = None,
    reuse_prefix: bool = True,
    sampled_cache=None,
) -> list[torch.Tensor]:
    """OAR-G for every row of a padded batch: the scores `gradient_scores` gives each row
    alone, from one clean forward pass and one forward + backward pass.

    Position ids come from the attention mask, so a row sees the positions it has alone. The
    noise is drawn row by row, in order, from ``generator``, as a per-row loop would. Equal
    to the per-row scores up to floating-point rounding (padding and a cached prefix change
    the order of the sums; the KL modes, second order in the noise, amplify it), which
    tests/attribution/test_oar_g.py bounds. The parameters' ``.grad``, ``requires_grad`` and
    train/eval modes are left as they were.

    Args:
        model: a causal LM accepting ``inputs_embeds``, ``position_ids``, a KV cache and
            ``logits_to_keep``.
        input_ids, attention_mask: ``[B, T]``, padded; one contiguous run of 1s per row.
        reasoning, answer: per row, half-open spans into the *padded* row.
        mode, noise_std, generator: as `gradient_scores`.
        reuse_prefix: run the columns before every row's reasoning (the prompts) once per
            distinct prefix, without grad, and continue both passes from their KV cache
            (the gradient never needs the prompt's embeddings). A model whose cache cannot
            have its rows selected (Mamba or linear-attention layers:
            `oar_lite.attribution.kv.prefix_reusable`) runs both passes from column 0
            instead, with a one-time warning giving the cost.
        sampled_cache: a KV cache of the model's forward over these very rows and columns
            (the sampling's, `oar_lite.rollout.sample_completions` ``keep_cache``), at least
            up to the last column P_final reads: the prompt columns are taken from it, and
            the clean pass runs only from the first column P_final reads (equal up to
            rounding). None, or a cache without per-layer tensors: computed here.

    Returns:
        B float32 tensors ``[R_i]``, >= 0.

    Raises:
        ValueError: bad settings, or a ``sampled_cache`` too short for these rows.
    """
    check_mode(mode)
    if noise_std < 0:
        raise ValueError(f"noise_std must be >= 0, got {noise_std}")
    if not padded_rows(input_ids, attention_mask, reasoning, answer):
        return []
    spans = [outcome_span(a, mode) for a in answer]  # (end, keep) per row, in padded columns
    T = max(end for end, _ in spans)
    ids, attn = input_ids[:, :T], attention_mask[:, :T].long()
    position_ids = (attn.cumsum(-1) - 1).clamp(min=0)
    wanted = sorted({p for end, keep in spans for p in range(end - keep, end)})  # the positions some P_final reads
    first_read = wanted[0]
    if sampled_cache is not None:
        check_sampled_cache(sampled_cache, first_read)
    prefix = min(r.start for r in reasoning) if reuse_prefix else 0
    sampled_prefix = per_layer_copy(sampled_cache, lambda t: t[:, :, :prefix]) if prefix > 0 else None
    sampled_head = per_layer_copy(sampled_cache, lambda t: t[:, :, :first_read])
    with eval_mode(model), torch.no_grad():
        cache = sampled_prefix
        if cache is None and prefix > 0:
            # One pass per distinct prefix (rows of a group share their prompt), then one cache row per row.
            heads, row_of = torch.unique(torch.cat([ids[:, :prefix], attn[:, :prefix]], dim=1), dim=0,
                                         return_inverse=True)
            out = model(input_ids=heads[:, :prefix], attention_mask=heads[:, prefix:],
                        position_ids=(heads[:, prefix:].cumsum(-1) - 1).clamp(min=0), use_cache=True,
                        logits_to_keep=1)
            cache = output_cache(out)
            if prefix_reusable(cache):
                cache.batch_select_indices(row_of.to(ids.device))
            else:  # a recurrent state (Mamba, linear attention): both passes run from column 0
                tell_no_prefix_reuse(model, "OAR-G", 2 * ids.numel(), len(heads) * prefix + 2 * len(ids) * (T - prefix))
                prefix, cache = 0, None
    # The LM head only at the positions some row's P_final reads, as columns of the input after the prefix.
    keep_idx = torch.tensor([p - prefix for p in wanted], device=ids.device)
    column = {p: i for i, p in enumerate(wanted)}
    rows_cols = [[column[p] for p in range(end - keep, end)] for end, keep in spans]
    own = [slice(r.start - prefix, r.stop - prefix) for r in reasoning]  # per row, its reasoning columns after the prefix

    def outcomes(logits: torch.Tensor) -> list[torch.Tensor]:  # [B, len(wanted), V] -> per row P_final
        return [p_final(logits[i : i + 1, cols], input_ids[i, answer[i]], mode) for i, cols in enumerate(rows_cols)]

    def forward(cache, start: int = prefix, **inputs):  # the columns from ``start`` on, continuing from ``cache``
        return model(attention_mask=attn, position_ids=position_ids[:, start:], logits_to_keep=keep_idx + prefix - start,
                     **inputs, **cache_kwargs(model, cache)).logits

    with eval_mode(model):
        with torch.no_grad():
            if sampled_head is not None:  # the clean pass: only the columns from the first one read
                clean = outcomes(forward(sampled_head, first_read, input_ids=ids[:, first_read:]))
            else:
                clean = outcomes(forward(copy.deepcopy(cache), input_ids=ids[:, prefix:]))  # the pass appends to its cache
            embeds = model.get_input_embeddings()(ids[:, prefix:]).detach()
            noisy = embeds.clone()
            noise_device = generator.device if generator is not None else embeds.device
            for i, cols in enumerate(own):
                noise = torch.randn((cols.stop - cols.start, embeds.shape[-1]), generator=generator, device=noise_device,
                                    dtype=torch.float32)
                noisy[i, cols] += (noise_std * noise).to(embeds.device, embeds.dtype)
        noisy.requires_grad_(True)
        with torch.enable_grad():
            changed = outcomes(forward(cache, inputs_embeds=noisy))
            objective = sum(divergence(c, o, mode).sum() for c, o in zip(clean, changed))
            (grad,) = torch.autograd.grad(objective, noisy)
    return [(upcast(grad[i, cols]) * upcast(embeds[i, cols])).sum(-1).abs().detach().float() for i, cols in enumerate(own)]
