"""Sampling groups of completions: `sample_completions` is the one place that turns prompts
into a `Rollouts` batch, laid out with the masks that scoring and training need.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import torch

from .settings import Setting, check_number
from .seeding import derive_seed, pick_problems
from .segment import FORMATS, Segments, segment_completion_ids, segments_to_masks


@dataclass(frozen=True)
class Sampling:
    """How completions are sampled where a caller does not say, declared once: `sample_completions`,
    `oar_lite.evaluate.evaluate`, `oar_lite.train.TrainConfig` and the lab read `SAMPLING`."""

    temperature: float = 1.0
    """The policy as it is: GRPO samples at temperature 1 (0 is greedy, `GREEDY`)."""
    top_p: float = 1.0
    """Nucleus sampling's p: 1 keeps every token."""
    top_k: int = 0
    """Top-k sampling's k: 0 keeps every token."""
    max_new_tokens: int = 64
    """Most new tokens per completion."""


SAMPLING = Sampling()
"""The sampling defaults (`Sampling`)."""
SAMPLING_SETTINGS = {
    "temperature": Setting(SAMPLING.temperature, "Sampling temperature (> 0: greedy gives every row of a group the "
                                                 "same text).", dict(low=0, low_open=True)),
    "top_p": Setting(SAMPLING.top_p, "Nucleus sampling's p, in (0, 1].", dict(low=0, high=1, low_open=True)),
}
"""The sampling settings a trainer's config checks: `oar_lite.train.TrainConfig`'s fields,
the ranges of `oar_lite.trl.OARConfig`'s TRL fields of the same meaning."""
GREEDY = 0.0
"""The temperature of greedy decoding, held-out evaluation's default (`oar_lite.evaluate.evaluate`)."""


def output_cache(out):
    """The KV cache a forward pass or ``generate`` returned (``out.cache``, or the older
    ``past_key_values``); OAR-P and OAR-G continue from it (`oar_lite.attribution.kv`)."""
    cache = getattr(out, "cache", None)
    return out.past_key_values if cache is None else cache


@dataclass
class Rollouts:
    """A batch of sampled completions, ``B = len(prompts) * group_size`` rows.

    Attributes:
        input_ids: ``[B, T]`` prompt (left-padded to P tokens) + completion (right-padded).
        attention_mask: ``[B, T]``, 1 on real tokens.
        completion_mask: ``[B, C]`` with C = T - P, 1 on completion tokens up to and
            including the end-of-sequence token.
        prompt_length: P, the padded prompt length (completions start at column P).
        group_size: G, completions per prompt (rows of one prompt are consecutive).
        completions: the ``B`` completion texts (special tokens removed).
        completion_ids: the ``B`` completions as id lists (no padding, EOS kept).
        prompts: the ``B`` prompts (each repeated G times).
        segments: per row, `Segments` in completion-token indices or ``None``.
        cache: with ``keep_cache``, the sampling's KV cache: keys and values of the first
            ``T - 1`` columns of ``input_ids`` (the last sampled token was never fed back),
            which OAR-P and OAR-G continue from (`oar_lite.attribution.token_weights`'s
            ``sampled_cache``); else None.
    """

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    completion_mask: torch.Tensor
    prompt_length: int
    group_size: int
    completions: list[str]
    completion_ids: list[list[int]]
    prompts: list[str]
    segments: list[Segments | None] = field(default_factory=list)
    cache: object | None = field(default=None, repr=False)

    def __len__(self) -> int:
        return self.input_ids.shape[0]

    def sequence(self, row: int) -> tuple[torch.Tensor, slice | None, slice | None]:
        """``(input_ids [T], reasoning, answer)``: row ``row`` without padding and its two spans
        into it (``None`` without a parseable answer), as the scorers take them:
        ``ol.perturbation_scores(model, *rollouts.sequence(i), pad_token_id=...)``."""
        if not isinstance(row, int) or not 0 <= row < len(self):
            raise ValueError(f"row must be an int in [0, {len(self)}), got {row!r}")
        ids = self.input_ids[row][self.attention_mask[row].bool()]
        segments = self.segments[row] if self.segments else None
        if segments is None:
            return ids, None, None
        prompt_tokens = int(self.attention_mask[row, : self.prompt_length].sum())  # the prompt without left padding
        shifted = segments.shift(prompt_tokens)
        return ids, shifted.reasoning, shifted.answer

    def masks(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(reasoning_mask, answer_mask)``, each ``[B, T]`` bool, from `segments`."""
        reasoning, answer = segments_to_masks(self.segments, self.prompt_length, self.input_ids.shape[1])
        return reasoning.to(self.input_ids.device), answer.to(self.input_ids.device)


def sample_completions(
    model,
    tokenizer,
    prompts: Sequence[str],
    *,
    group_size: int = 1,
    max_new_tokens: int = SAMPLING.max_new_tokens,
    temperature: float = SAMPLING.temperature,
    top_p: float = SAMPLING.top_p,
    formats: Sequence[str] = FORMATS,
    add_special_tokens: bool = True,
    seed: int | None = None,
    keep_cache: bool = False,
) -> Rollouts:
    """`Rollouts` of ``group_size`` completions per prompt (greedy when ``temperature == 0``).

    Args:
        model, tokenizer: a causal LM and its tokenizer (which needs a pad token).
        prompts: a list of prompt texts (chat-formatted if the model needs it); one string
            is refused rather than read as one-character prompts.
        top_p: in (0, 1].
        formats: answer formats for segmentation (`oar_lite.segment.FORMATS`).
        add_special_tokens: passed to the tokenizer (False for chat-templated text).
        seed: if given, ``torch.manual_seed(seed)`` first.
        keep_cache: keep the sampling's KV cache in ``Rollouts.cache`` (memory: a forward's
            cache of the whole batch), for OAR-P and OAR-G to reuse.

    Raises:
        ValueError: bad prompts, a setting out of range, or no pad token.
    """
    if isinstance(prompts, str):
        raise ValueError(f"prompts must be a list of prompt strings, got one string {prompts[:50]!r}; "
                         f"for one prompt pass [prompt]")
    if not prompts:
        raise ValueError("prompts is empty; expected at least one prompt")
    check_number("sample_completions", "group_size", group_size, integer=True, low=1)
    check_number("sample_completions", "max_new_tokens", max_new_tokens, integer=True, low=1)
    check_number("sample_completions", "temperature", temperature, low=0)
    check_number("sample_completions", "top_p", top_p, low=0, high=1, low_open=True)
    if tokenizer.pad_token_id is None:
        raise ValueError("the tokenizer has no pad token; set tokenizer.pad_token first")
    if seed is not None:
        torch.manual_seed(seed)
    device = next(model.parameters()).device
    enc = tokenizer(list(prompts), return_tensors="pt", padding=True, padding_side="left",
                    add_special_tokens=add_special_tokens).to(device)
    greedy = temperature == 0
    sampling = {} if greedy else {"temperature": temperature, "top_p": top_p, "top_k": SAMPLING.top_k}
    prompt_mask = enc["attention_mask"].repeat_interleave(group_size, dim=0)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            out = model.generate(
                input_ids=enc["input_ids"].repeat_interleave(group_size, dim=0),
                attention_mask=prompt_mask,
                do_sample=not greedy,
                max_new_tokens=max_new_tokens,
                pad_token_id=tokenizer.pad_token_id,
                eos_token_id=tokenizer.eos_token_id,
                return_dict_in_generate=keep_cache,
                **sampling,
            )
    finally:
        model.train(was_training)
    out, cache = (out.sequences, output_cache(out)) if keep_cache else (out, None)
    P = enc["input_ids"].shape[1]
    completion = out[:, P:]
    is_eos = completion == tokenizer.eos_token_id
    has_eos = is_eos.any(dim=1)
    first_eos = torch.where(has_eos, is_eos.int().argmax(dim=1), torch.full_like(has_eos, completion.shape[1], dtype=torch.long))
    cols = torch.arange(completion.shape[1], device=completion.device)
    completion_mask = (cols[None, :] <= first_eos[:, None]).long()
    attention_mask = torch.cat([prompt_mask, completion_mask], dim=1)
    completion_ids = [row[: int(m.sum())].tolist() for row, m in zip(completion, completion_mask)]
    texts = tokenizer.batch_decode(completion_ids, skip_special_tokens=True)
    # Segment without the trailing EOS: its text ("</s>", "<|im_end|>") is not part of the answer.
    segments = [segment_completion_ids(tokenizer, ids[:-1] if ids and ids[-1] == tokenizer.eos_token_id else ids, formats)
                for ids in completion_ids]
    return Rollouts(input_ids=out, attention_mask=attention_mask, completion_mask=completion_mask, prompt_length=P,
                    group_size=group_size, completions=texts, completion_ids=completion_ids,
                    prompts=[p for p in prompts for _ in range(group_size)], segments=segments,
                    cache=cache)


def sample_batch(model, tokenizer, problems: Sequence[dict], *, prompts: int, group_size: int, seed: int, step: int,
                 problem_step: int | None = None, **sampling) -> tuple[list[dict], Rollouts]:
    """The batch of step ``step`` of a run seeded ``seed``: ``prompts`` problems (`pick_problems`),
    ``group_size`` completions of each sampled from the step's seed (`derive_seed`), so every
    method, a resumed run and gradient quality's batch ``step`` see the same. ``problem_step``
    (default ``step``) takes the problems of another step: nested batches, several completion
    draws of one prompt set. ``sampling``: the other keywords of `sample_completions`. Returns
    ``(problem of each row [B], rollouts)``."""
    chosen = pick_problems(problems, prompts, seed=seed, step=step if problem_step is None else problem_step)
    rollouts = sample_completions(model, tokenizer, [p["prompt"] for p in chosen], group_size=group_size,
                                  seed=derive_seed(seed, step), **sampling)
    return [p for p in chosen for _ in range(group_size)], rollouts
