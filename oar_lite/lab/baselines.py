"""The baselines OAR is compared with, with the scorers' calling convention: chance
(``"random"``), the policy's entropy (``"entropy"``; ``"entropy-top"``, TRL's
``top_entropy_quantile``: the entropies with its mask, `top_quantile_weights`, as their own
weighting), an external peer (Captum's integrated gradients, ``"captum-ig"``) and ARCA's adapter
residual (``"adapter-residual"``). `oar_lite.lab.scorers` registers them (`BASELINES`); plain
GRPO's ``"uniform"`` is the library's."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from ..attribution.outcome import check_mode, check_sequence, eval_mode, final_logits, outcome_span, p_final, upcast


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


def adapter_residual_scores(model, input_ids: torch.Tensor, reasoning: slice, answer: slice) -> torch.Tensor:
    """ARCA's signal (Lafuente-Mercado 2026, arXiv 2606.00257): how much a LoRA adapter changes
    the model at each reasoning token, ``||h_adapted - h_base||_2`` of the last layer's hidden
    state, from one forward with the adapter and one with it off (peft's ``disable_adapter()``).

    The state compared for token t is the one that produced it (position t - 1, as for
    `entropy_scores`: the state the policy-gradient term of token t depends on). ``[R]``
    float32 >= 0; all 0 for a freshly initialised adapter (LoRA's B starts at 0): uniform
    weights until the adapter has learned something. Needs ``reasoning.start >= 1`` and a
    model with ``disable_adapter()`` (a peft model), ValueError otherwise.
    """
    check_sequence(input_ids, reasoning, answer)
    if reasoning.start < 1:
        raise ValueError("adapter-residual scores need reasoning.start >= 1 (a token before the first reasoning token)")
    if not callable(getattr(model, "disable_adapter", None)):
        raise ValueError(f"adapter-residual scores need a model with a LoRA adapter (a peft model with "
                         f"disable_adapter()), got {type(model).__name__}")
    ids = input_ids[None, : reasoning.stop - 1]
    positions = slice(reasoning.start - 1, reasoning.stop - 1)
    with torch.no_grad(), eval_mode(model):
        adapted = upcast(model(input_ids=ids, output_hidden_states=True).hidden_states[-1][0, positions])
        with model.disable_adapter():
            base = upcast(model(input_ids=ids, output_hidden_states=True).hidden_states[-1][0, positions])
    return (adapted - base).norm(dim=-1).float()


def top_quantile_weights(scores: torch.Tensor, *, quantile: float) -> torch.Tensor:
    """TRL's high-entropy mask as weights (``GRPOConfig.top_entropy_quantile`` = rho, the
    "Beyond the 80/20 rule" rule): 1 on the tokens whose score is at or above
    ``torch.quantile(scores, quantile)`` (linear interpolation, ties kept), 0 elsewhere, not
    rescaled (TRL multiplies the per-token loss by the mask and keeps its normaliser).

    ``quantile`` is the reshaping's q, the share of tokens below the threshold, so TRL's rho
    is ``1 - quantile`` (TRL's recommended rho = 0.2 is ``quantile=0.8``; 1 keeps only the
    highest score, as TRL's rho = 0). Where TRL pools the threshold over every completion
    token of the batch and of all ranks, this takes it over one completion's reasoning tokens
    (the scorers' row convention; answer tokens keep weight 1 as for every method here).

    ``[R]`` float32 in {0, 1}; an empty row gives an empty one. ValueError: not ``[R]``, not
    finite, or ``quantile`` outside [0, 1].
    """
    if not torch.is_tensor(scores) or scores.dim() != 1:
        raise ValueError(f"scores must be a 1-D tensor [R], got {getattr(scores, 'shape', type(scores).__name__)}")
    if isinstance(quantile, bool) or not isinstance(quantile, (int, float)) or not 0 <= quantile <= 1:
        raise ValueError(f"quantile must be a number in [0, 1] (the share below the threshold; TRL's rho is "
                         f"1 - quantile), got {quantile!r}")
    if scores.numel() == 0:
        return scores.float()
    work = scores.float()
    if not torch.isfinite(work).all():
        raise ValueError("scores contain NaN or infinite values; expected finite scores")
    return (work >= torch.quantile(work, float(quantile))).float()


def random_scores(model, input_ids: torch.Tensor, reasoning: slice, answer: slice, *,
                  generator: torch.Generator | None = None) -> torch.Tensor:
    """Baseline: uniform random scores ``[R]`` (chance level for any ranking metric)."""
    check_sequence(input_ids, reasoning, answer)
    return torch.rand(reasoning.stop - reasoning.start, generator=generator)


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


BASELINES = {"random": random_scores, "entropy": entropy_scores, "captum-ig": integrated_gradients_scores,
             "adapter-residual": adapter_residual_scores}
"""The baselines whose scores go through the bilevel reshaping like OAR's, by method name
(``"entropy-top"``, the `entropy_scores` with `top_quantile_weights` as their own weighting, is
registered apart: `oar_lite.lab.scorers`)."""
