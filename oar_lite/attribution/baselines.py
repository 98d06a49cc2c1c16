"""Baselines with the scorers' calling convention: plain GRPO's uniform credit, chance
(random), the policy's entropy, and an external peer, Captum's integrated gradients."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from .outcome import check_mode, check_sequence, eval_mode, final_logits, outcome_span, p_final, upcast

def entropy_scores(model, input_ids: torch.Tensor, reasoning: slice, answer: slice) -> torch.Tensor:
    """Baseline: entropy of the policy's distribution at each reasoning token (the
    "high-entropy minority" heuristic). ``[R]``; needs ``reasoning.start >= 1``."""
    check_sequence(input_ids, reasoning, answer)
    if reasoning.start < 1:
        raise ValueError("entropy scores need reasoning.start >= 1 (a token before the first reasoning token)")
    R = reasoning.stop - reasoning.start
    with torch.no_grad(), eval_mode(model):
        logits = upcast(final_logits(model, input_ids=input_ids[None, : reasoning.stop - 1], keep=R)[0])
    logp = F.log_softmax(logits, -1)
    return (-(logp.exp() * logp).sum(-1)).float()


def random_scores(model, input_ids: torch.Tensor, reasoning: slice, answer: slice, *,
                  generator: torch.Generator | None = None) -> torch.Tensor:
    """Baseline: uniform random scores ``[R]`` (chance level for any ranking metric)."""
    check_sequence(input_ids, reasoning, answer)
    return torch.rand(reasoning.stop - reasoning.start, generator=generator)


def uniform_scores(model, input_ids: torch.Tensor, reasoning: slice, answer: slice) -> torch.Tensor:
    """Plain GRPO: every reasoning token equally important (all weights become 1)."""
    check_sequence(input_ids, reasoning, answer)
    return torch.ones(reasoning.stop - reasoning.start)


def integrated_gradients_scores(model, input_ids: torch.Tensor, reasoning: slice, answer: slice, *,
                                mode: str = "answer_joint", pad_token_id: int, n_steps: int = 16) -> torch.Tensor:
    """External peer: Captum's ``LayerIntegratedGradients`` on the input embeddings, ``[R]``
    float32 scores >= 0 (|attribution| summed over the hidden dimension).

    Target: the log-probability of the answer the model wrote, phi for ``answer_joint``, the
    first answer token's for ``last`` (``answer_mean`` is no scalar: ValueError). Baseline:
    every reasoning token replaced by ``pad_token_id`` (OAR-P's perturbation, all at once),
    reached in ``n_steps``. Captum is imported on the first call.
    """
    from captum.attr import LayerIntegratedGradients

    check_sequence(input_ids, reasoning, answer)
    check_mode(mode)
    if mode == "answer_mean":
        raise ValueError("captum-ig needs a scalar target: mode 'last' or 'answer_joint', got 'answer_mean' "
                         "('answer_mean' is a distribution, not a scalar)")
    answer_ids = input_ids[answer]
    end, keep = outcome_span(answer, mode)

    def target(ids: torch.Tensor) -> torch.Tensor:  # [b, end] -> [b] log-probability of the answer
        outcome = p_final(final_logits(model, input_ids=ids, keep=keep), answer_ids, mode)
        return outcome[:, answer_ids[0]] if mode == "last" else outcome

    inputs = input_ids[None, :end]
    baseline = inputs.clone()
    baseline[0, reasoning] = pad_token_id
    with eval_mode(model):
        lig = LayerIntegratedGradients(target, model.get_input_embeddings())
        attributions = lig.attribute(inputs, baselines=baseline, n_steps=n_steps, internal_batch_size=n_steps)
    return attributions[0, reasoning].sum(-1).abs().float().detach()
