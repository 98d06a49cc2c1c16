"""GRPO, the baseline (spec section 1, notebook 01): group-relative advantages, the per-token
advantages OAR reshapes (`token_advantages`) and the clipped surrogate (`policy_loss`).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from .settings import Setting

SCALES = ("group", "batch", "none")
LOSS_TYPES = ("grpo", "dapo")
UPDATE = {
    "learning_rate": Setting(1e-4, "Learning rate (AdamW).", dict(low=0, high=1, low_open=True), label="learning rate"),
    "weight_decay": Setting(0.0, "Weight decay (AdamW).", dict(low=0)),
    "num_iterations": Setting(1, "Optimizer steps per batch (PPO epochs); > 1 makes the ratio matter.",
                              dict(integer=True, low=1)),
    "clip_eps": Setting(0.2, "Clip range epsilon of the ratio, in (0, 1).",
                        dict(low=0, high=1, low_open=True, high_open=True)),
    "clip_eps_high": Setting(None, "DAPO's clip-higher (None: same as clip_eps).",
                             dict(low=0, low_open=True, optional=True)),
    "beta": Setting(0.0, "KL coefficient to the initial model (0: no reference kept).", dict(low=0)),
}
"""The GRPO update's settings, declared once: `oar_lite.train.TrainConfig` takes its fields from
here, `oar_lite.trl.OARConfig` the ranges of TRL's fields of the same meaning."""


def group_advantages(rewards: torch.Tensor, group_size: int, *, scale: str = "group", eps: float = 1e-4) -> torch.Tensor:
    """``[N]`` float advantages ``(r_i - mean(r_group)) / (std + eps)``.

    Args:
        rewards: ``[N]``, N = prompts * ``group_size``, one prompt's completions consecutive.
        group_size: G, completions per prompt.
        scale: ``"group"`` divides by each group's std, ``"batch"`` by the std of all
            rewards, ``"none"`` only centres (TRL's ``scale_rewards``).
        eps: added to the std; a group of equal rewards gets advantage 0, never NaN.
    """
    rewards = torch.as_tensor(rewards, dtype=torch.float32) if not torch.is_tensor(rewards) else rewards.float()
    if rewards.dim() != 1:
        raise ValueError(f"rewards must be 1-D [N], got shape {tuple(rewards.shape)}")
    if group_size < 1 or rewards.numel() % group_size != 0:
        raise ValueError(f"group_size={group_size} must be >= 1 and divide the number of rewards ({rewards.numel()})")
    if scale not in SCALES:
        raise ValueError(f"unknown scale {scale!r}; expected one of {SCALES}")
    if not torch.isfinite(rewards).all():
        raise ValueError("rewards contain NaN or infinite values")
    grouped = rewards.view(-1, group_size)
    centred = (grouped - grouped.mean(dim=1, keepdim=True)).view(-1)
    if scale == "none":
        return centred
    if scale == "group":
        std = grouped.std(dim=1, keepdim=True) if group_size > 1 else torch.zeros_like(grouped)
        std = std.expand_as(grouped).reshape(-1)
    else:
        std = rewards.std() if rewards.numel() > 1 else rewards.new_zeros(())
    return centred / (std + eps)


def token_advantages(advantages: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """``[B, T]`` token advantages ``A_{i,t} = A_i * w_{i,t}`` from ``advantages [B]`` and
    ``weights [B, T]`` (`token_weights`), in the floating dtype of the two (the default float
    dtype when both are integer)."""
    if advantages.dim() != 1 or weights.dim() != 2 or weights.shape[0] != advantages.shape[0]:
        raise ValueError(f"expected advantages [B] and weights [B, T], got {tuple(advantages.shape)} and {tuple(weights.shape)}")
    dtype = torch.promote_types(advantages.dtype, weights.dtype)
    dtype = dtype if dtype.is_floating_point else torch.get_default_dtype()
    return advantages[:, None].to(dtype) * weights.to(dtype)


def selective_log_softmax(logits: torch.Tensor, token_ids: torch.Tensor) -> torch.Tensor:
    """``log softmax(logits)[..., token_ids]``: logits ``[..., V]``, ids ``[...]`` -> ``[...]``."""
    return torch.gather(F.log_softmax(logits.float(), dim=-1), -1, token_ids.unsqueeze(-1)).squeeze(-1)


def sequence_logprobs(model, input_ids: torch.Tensor, attention_mask: torch.Tensor, logits_to_keep: int,
                      *, return_entropy: bool = False):
    """``[B, C]`` log pi(y_t | y_<t) of the last C = ``logits_to_keep`` tokens of each row of
    ``input_ids [B, T]`` (prompt + completion, left padding fine) under ``attention_mask
    [B, T]``; only those logits are computed. With ``return_entropy``, also the policy's
    entropy ``[B, C]`` at those positions (no grad, same forward pass)."""
    position_ids = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)
    logits = model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                   logits_to_keep=logits_to_keep + 1).logits[:, :-1]
    logprobs = selective_log_softmax(logits, input_ids[:, -logits_to_keep:])
    if not return_entropy:
        return logprobs
    with torch.no_grad():
        logp = F.log_softmax(logits.float(), dim=-1)
        entropy = -(logp.exp() * logp).sum(-1)
    return logprobs, entropy


def policy_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    completion_mask: torch.Tensor,
    *,
    ref_logprobs: torch.Tensor | None = None,
    beta: float = 0.0,
    clip_eps: float = 0.2,
    clip_eps_high: float | None = None,
    loss_type: str = "grpo",
) -> tuple[torch.Tensor, dict[str, float]]:
    """The clipped GRPO surrogate, plus ``beta`` times the k3 KL estimate
    ``exp(ref - logp) - (ref - logp) - 1`` to a reference policy.

    Args:
        logprobs: ``[B, T]`` log pi_theta of the completion tokens (with grad).
        old_logprobs: ``[B, T]`` log pi_old (the policy that sampled; no grad).
        advantages: ``[B]`` (plain GRPO) or ``[B, T]`` (token advantages, e.g. OAR).
        completion_mask: ``[B, T]``, 1 on real completion tokens (masked positions may hold
            any log-prob, -inf included; they are ignored).
        ref_logprobs: ``[B, T]`` log pi_ref; required when ``beta > 0``.
        beta: KL coefficient (TRL's name).
        clip_eps, clip_eps_high: ratio clipped to ``[1 - clip_eps, 1 + clip_eps_high]``
            (``clip_eps_high`` defaults to ``clip_eps``; DAPO's clip-higher sets it larger).
        loss_type: ``"grpo"`` averages tokens per sequence then over the batch;
            ``"dapo"`` averages over all tokens of the batch.

    Returns:
        ``(loss, metrics)``: a scalar tensor, and floats ``clip_fraction``, ``kl``,
        ``ratio_mean``, ``advantage_mean``.
    """
    if loss_type not in LOSS_TYPES:
        raise ValueError(f"unknown loss_type {loss_type!r}; expected one of {LOSS_TYPES}")
    if logprobs.shape != old_logprobs.shape or logprobs.shape != completion_mask.shape or logprobs.dim() != 2:
        raise ValueError(f"logprobs, old_logprobs and completion_mask must all be [B, T]; got "
                         f"{tuple(logprobs.shape)}, {tuple(old_logprobs.shape)}, {tuple(completion_mask.shape)}")
    if advantages.dim() == 1:
        advantages = advantages[:, None]
    if advantages.shape[0] != logprobs.shape[0] or advantages.shape[1] not in (1, logprobs.shape[1]):
        raise ValueError(f"advantages must be [B] or [B, T] matching logprobs {tuple(logprobs.shape)}, got {tuple(advantages.shape)}")
    if logprobs.shape[0] == 0:
        raise ValueError("empty batch: logprobs has no rows (shape [0, T]); expected at least one completion")
    if beta > 0 and ref_logprobs is None:
        raise ValueError("beta > 0 needs ref_logprobs [B, T]")
    if ref_logprobs is not None and ref_logprobs.shape != logprobs.shape:
        raise ValueError(f"ref_logprobs must be [B, T] like logprobs {tuple(logprobs.shape)}, got {tuple(ref_logprobs.shape)}")
    eps_high = clip_eps if clip_eps_high is None else clip_eps_high
    real = completion_mask.bool()
    mask = real.to(logprobs.dtype)
    advantages = advantages.to(logprobs.dtype)
    # Padding may hold any log-prob (-inf included); it is replaced by 0 before any arithmetic,
    # so it can neither turn the loss NaN nor send a NaN gradient back. On real tokens a
    # non-finite log-prob is an error upstream (a sampled token has probability > 0).
    for name, value in (("logprobs", logprobs), ("old_logprobs", old_logprobs), ("ref_logprobs", ref_logprobs)):
        if value is not None and not bool(torch.isfinite(value[real]).all()):
            raise ValueError(f"{name} is not finite (-inf or NaN) at {int((~torch.isfinite(value) & real).sum())} "
                             "completion token(s); expected finite log-probs wherever completion_mask is 1")
    logprobs, old_logprobs = logprobs.masked_fill(~real, 0.0), old_logprobs.masked_fill(~real, 0.0)
    if ref_logprobs is not None:
        ref_logprobs = ref_logprobs.masked_fill(~real, 0.0)

    ratio = torch.exp(logprobs - old_logprobs)
    clipped = torch.clamp(ratio, 1 - clip_eps, 1 + eps_high)
    per_token = -torch.min(ratio * advantages, clipped * advantages)
    kl = None
    if ref_logprobs is not None:
        delta = ref_logprobs - logprobs
        kl = torch.exp(delta) - delta - 1
        if beta > 0:
            per_token = per_token + beta * kl

    if loss_type == "grpo":
        loss = ((per_token * mask).sum(1) / mask.sum(1).clamp(min=1)).mean()
    else:
        loss = (per_token * mask).sum() / mask.sum().clamp(min=1)

    with torch.no_grad():
        n = mask.sum().clamp(min=1)
        is_clipped = ((ratio < 1 - clip_eps) & (advantages < 0)) | ((ratio > 1 + eps_high) & (advantages > 0))
        metrics = {
            "clip_fraction": float((is_clipped.to(mask.dtype) * mask).sum() / n),
            "ratio_mean": float((ratio * mask).sum() / n),
            "advantage_mean": float((advantages.expand_as(mask) * mask).sum() / n),
            "kl": float((kl * mask).sum() / n) if kl is not None else 0.0,
        }
    return loss, metrics
