"""GRAIL beside OAR (Pala, Toh, Poria 2026, "GRAIL: Gradient-Reweighted Advantages for
Reinforcement Learning with Verifiable Rewards", arXiv 2606.04889; code ``declare-lab/grail``,
read at commit 749aa4c): a token's advantage is reweighted by its *gradient-activation
saliency*, how locally sensitive the final answer is to it. The lab's method ``"grail"``
(`oar_lite.lab.scorers` registers it), with its own weighting (not OAR's bi-level reshaping).

What their code computes (``GrailTrainerV2.compute_grail_weights`` in ``src/train/grail_trainer.py``,
the same in ``src/eval/compute_checkpoint_stats.py``), and what this module keeps:

- **the objective**: the negative log-likelihood of the answer tokens, summed,
  ``L = -sum_k log pi(y_k | y_<k)`` over the ``\\boxed{...}`` span (here: the completion's
  answer span, `oar_lite.segment`'s), logits at the sampling temperature (1 in their configs
  and here). No noise on the embeddings (unlike OAR-G's KL objective), one forward and one
  backward pass;
- **the leaf**: the input embeddings ``e`` of every position (``grail_leaf_source:
  "embeddings"``, their configs' choice), the gradient taken on them only;
- **the saliency**: ``s = || dL/de ⊙ e ||_2``, the L2 norm over the hidden dimension of
  gradient times input (OAR-G sums the product and takes its absolute value instead);
- **the alignment**: the score of completion token ``t`` is the saliency of the embedding at
  position ``t - 1``, the input that predicts it (their ``grads[:, -(C + 1):-1]``, the window of
  the logits; the lab's entropy and adapter-residual scores use the same convention);
- **the weights** (`saliency_weights`): per completion, the z-score of ``log(s + 1e-8)``
  (``std = sqrt(var + 1e-8)``), mapped to ``grail_mean + grail_std * z`` and clamped to
  ``[grail_w_min, grail_w_max]``: 1 + 0.5 z in [0.5, 5] in their shipped ``qwen3_grail.yaml``
  (`SHIPPED_CONFIG`). Not mass-preserving: the mean weight is not held at 1.

Where the lab's scorer differs, by the scorers' calling convention (one completion, its
reasoning tokens): the z-score is taken over the reasoning tokens, where theirs runs over
every completion token (answer and what follows included); the answer tokens keep weight 1,
where theirs sets the answer's content to ``grail_w_max`` and its ``\\boxed{``/``}`` to 1; and
every row is reweighted, where their shipped config (``grail_rollout_symmetry: "wrong"``)
reweights only rows whose advantage is <= 0 (the scorer does not see the advantage; their
dataclass default ``"both"`` and their checkpoint statistics do as here). Rows without an answer
get weight 1 in both. Their trainer computes the weights inside ``_compute_loss``, on every one
of ``num_iterations: 4`` loss calls; the lab's training loop computes them once per generation
batch, before the update (docs/oar-spec.md section 9, row 4).

`saliency_scores` is one sequence (the reference), `saliency_scores_batch` a padded batch in
one forward and one backward pass (equal up to rounding; tests/lab/test_grail.py checks both
against a per-token loop).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from ..attribution.outcome import check_sequence, eval_mode, final_logits, outcome_span, padded_rows, upcast

SHIPPED_CONFIG = {"grail_mean": 1.0, "grail_std": 0.5, "grail_w_min": 0.5, "grail_w_max": 5.0}
"""GRAIL's weighting in ``src/train/training_configs/qwen3_grail.yaml`` (declare-lab/grail at
749aa4c), the one its README gives; `saliency_weights`' defaults."""
LOG_EPS = 1e-8
"""Their ``log(scores + 1e-8)`` and ``sqrt(variance + 1e-8)``."""


def _check_shift(reasoning: slice, first: int = 0) -> None:
    if reasoning.start < first + 1:
        raise ValueError("grail scores need a token before the first reasoning token (the score of token t is the "
                         f"saliency of the embedding at t - 1), got reasoning starting at {reasoning.start - first}")


def _answer_nll(logits: torch.Tensor, answer_ids: torch.Tensor) -> torch.Tensor:
    """``-sum_k log pi(y_k)`` of ``logits [A, V]`` (the ones predicting the answer) at ``answer_ids [A]``."""
    logp = F.log_softmax(upcast(logits), dim=-1)
    return -logp.gather(-1, answer_ids[:, None]).sum()


def saliency_scores(model, input_ids: torch.Tensor, reasoning: slice, answer: slice) -> torch.Tensor:
    """GRAIL's gradient-activation saliency of each reasoning token, ``[R]`` float32 >= 0.

    ``s_t = || dL/de_{t-1} ⊙ e_{t-1} ||_2`` with ``L`` the answer tokens' summed negative
    log-likelihood and ``e`` the input embeddings (the module docstring gives their code's
    lines of reasoning). One forward and one backward pass over ``input_ids[:answer.stop - 1]``
    (what follows the answer cannot reach its logits). The gradient is taken with
    `torch.autograd.grad` on the embeddings only: the parameters' ``.grad`` and the modules'
    train/eval modes are left as they were.

    Args:
        model: a causal LM accepting ``inputs_embeds`` and ``logits_to_keep`` (a peft model's
            adapter stays on, as in their trainer).
        input_ids: ``[T]`` one sequence, no padding.
        reasoning, answer: half-open spans into ``input_ids``; ``reasoning.start >= 1``.

    Raises:
        ValueError: spans out of range or overlapping, or reasoning starting at position 0.
    """
    check_sequence(input_ids, reasoning, answer)
    _check_shift(reasoning)
    end, keep = outcome_span(answer, "answer_joint")  # x[:answer.stop - 1], its last A logits predict the answer
    with eval_mode(model):
        with torch.no_grad():
            embeds = model.get_input_embeddings()(input_ids[None, :end]).detach()
        leaf = embeds.clone().requires_grad_(True)
        with torch.enable_grad():
            loss = _answer_nll(final_logits(model, inputs_embeds=leaf, keep=keep)[0], input_ids[answer])
            (grad,) = torch.autograd.grad(loss, leaf)
    inputs = slice(reasoning.start - 1, reasoning.stop - 1)
    return (upcast(grad[0, inputs]) * upcast(embeds[0, inputs])).norm(dim=-1).detach().float()


def saliency_scores_batch(model, input_ids: torch.Tensor, attention_mask: torch.Tensor, reasoning: list[slice],
                          answer: list[slice], *, mode: None = None) -> list[torch.Tensor]:
    """`saliency_scores` of every row of a padded batch, from one forward and one backward pass
    (the rows' losses summed, as their trainer does: a row's loss reaches only its own
    embeddings). Position ids come from the attention mask, so a row sees the positions it has
    alone; the LM head runs only at the columns some row's answer is predicted from. Equal to
    the per-row scores up to floating-point rounding (tested).

    Args:
        model: a causal LM accepting ``inputs_embeds``, ``position_ids`` and ``logits_to_keep``.
        input_ids, attention_mask: ``[B, T]``, padded; one contiguous run of 1s per row.
        reasoning, answer: per row, half-open spans into the *padded* row; each reasoning span
            starts after the row's first attended token.
        mode: None, always (`oar_lite.attribution.score_rows` passes every batched scorer its
            method's P_final mode; GRAIL has one objective, the answer's likelihood, and no mode).

    Returns:
        B float32 tensors ``[R_i]``, >= 0.
    """
    if mode is not None:
        raise ValueError(f"grail takes no P_final mode (its objective is the answer's likelihood), got {mode!r}")
    rows = padded_rows(input_ids, attention_mask, reasoning, answer)
    if not rows:
        return []
    for (valid, _, _), r in zip(rows, reasoning):
        _check_shift(r, valid.start)
    spans = [outcome_span(a, "answer_joint") for a in answer]
    T = max(end for end, _ in spans)
    ids, attn = input_ids[:, :T], attention_mask[:, :T].long()
    position_ids = (attn.cumsum(-1) - 1).clamp(min=0)
    wanted = sorted({p for end, keep in spans for p in range(end - keep, end)})
    column = {p: i for i, p in enumerate(wanted)}
    with eval_mode(model):
        with torch.no_grad():
            embeds = model.get_input_embeddings()(ids).detach()
        leaf = embeds.clone().requires_grad_(True)
        with torch.enable_grad():
            logits = model(inputs_embeds=leaf, attention_mask=attn, position_ids=position_ids,
                           logits_to_keep=torch.tensor(wanted, device=ids.device)).logits
            loss = sum(_answer_nll(logits[i, [column[p] for p in range(end - keep, end)]], input_ids[i, answer[i]])
                       for i, (end, keep) in enumerate(spans))
            (grad,) = torch.autograd.grad(loss, leaf)
    return [(upcast(grad[i, r.start - 1 : r.stop - 1]) * upcast(embeds[i, r.start - 1 : r.stop - 1])).norm(dim=-1)
            .detach().float() for i, r in enumerate(reasoning)]


def saliency_weights(scores: torch.Tensor, *, grail_mean: float = SHIPPED_CONFIG["grail_mean"],
                     grail_std: float = SHIPPED_CONFIG["grail_std"], grail_w_min: float = SHIPPED_CONFIG["grail_w_min"],
                     grail_w_max: float = SHIPPED_CONFIG["grail_w_max"]) -> torch.Tensor:
    """GRAIL's weights from one completion's saliencies ``[R]``: ``z`` the z-score of
    ``log(s + 1e-8)`` over the row (population variance, ``+ 1e-8`` under the root), then
    ``clamp(grail_mean + grail_std * z, grail_w_min, grail_w_max)`` (their names; defaults:
    `SHIPPED_CONFIG`). A row of equal scores, or of one token, gets ``grail_mean``.

    ``[R]`` float32; an empty row gives an empty one. ValueError: not ``[R]``, scores negative or
    not finite, ``grail_std <= 0`` (their code raises too: the z-scaling needs a spread) or
    ``grail_w_min > grail_w_max``.
    """
    if not torch.is_tensor(scores) or scores.dim() != 1:
        raise ValueError(f"scores must be a 1-D tensor [R], got {getattr(scores, 'shape', type(scores).__name__)}")
    if not grail_std > 0:
        raise ValueError(f"grail_std must be > 0 (the spread of the z-scaled weights), got {grail_std!r}")
    if not grail_w_min <= grail_w_max:
        raise ValueError(f"grail_w_min ({grail_w_min}) must be <= grail_w_max ({grail_w_max})")
    if scores.numel() == 0:
        return scores.float()
    s = scores.double()
    if not torch.isfinite(s).all() or (s < 0).any():
        raise ValueError("saliency scores must be finite and >= 0 (norms)")
    log = torch.log(s + LOG_EPS)
    centred = log - log.mean()
    z = centred / torch.sqrt((centred ** 2).mean() + LOG_EPS)
    return (grail_mean + grail_std * z).clamp(grail_w_min, grail_w_max).float()

