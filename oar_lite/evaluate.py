"""Held-out accuracy: how often a policy answers problems it was never trained on, per
problem, greedy or sampled (notebook 07, `benchmarks/smollm2_learning.py`).

Per-problem results (not only the mean) are kept so that an interval can be taken over
problems as well as over seeds, and two checkpoints can be compared on the same problems.
"""
from __future__ import annotations

from typing import Sequence

import torch

from .checks import check_number
from .reward import math_reward
from .rollout import sample_completions
from .segment import FORMATS


def heldout_accuracy(
    model,
    tokenizer,
    prompts: Sequence[str],
    answers: Sequence[str | int],
    *,
    temperature: float = 0.0,
    samples: int = 1,
    max_new_tokens: int = 64,
    rows_per_batch: int = 32,
    seed: int = 0,
    formats: Sequence[str] = FORMATS,
    add_special_tokens: bool = False,
) -> dict:
    """Answer every prompt ``samples`` times and check each answer with `math_reward`.

    Sampling does not disturb the caller's random state (a training run's sampling stream
    continues as if nothing happened), and the same ``seed`` gives the same draws for any
    policy, so two checkpoints are compared on the same noise.

    Args:
        model, tokenizer: the policy (a peft model too) and its tokenizer.
        prompts: ``[N]`` prompt texts (chat-formatted, hence ``add_special_tokens=False``).
        answers: ``[N]`` reference answers.
        temperature: 0 is greedy (then ``samples`` must be 1).
        samples: completions per prompt.
        rows_per_batch: rows per `generate` call (memory and speed).

    Returns:
        ``{"correct": [N][samples] 0/1, "answered": [N][samples] 0/1 (an answer in
        ``formats`` was found), "tokens": [N][samples] completion lengths, "accuracy",
        "answered_rate", "mean_tokens"}``.

    Raises:
        ValueError: prompts and answers differ in length or are empty; greedy with samples > 1;
            a setting out of range.
    """
    if isinstance(prompts, str) or len(prompts) != len(answers) or not prompts:
        raise ValueError(f"expected equally long, non-empty lists of prompts and answers, got "
                         f"{len(prompts)} prompts and {len(answers)} answers")
    check_number("heldout_accuracy", "samples", samples, integer=True, low=1)
    check_number("heldout_accuracy", "rows_per_batch", rows_per_batch, integer=True, low=1)
    check_number("heldout_accuracy", "temperature", temperature, low=0)
    if temperature == 0 and samples != 1:
        raise ValueError(f"greedy decoding (temperature=0) gives one answer per prompt; got samples={samples}")
    per_call = max(1, rows_per_batch // samples)
    correct, answered, tokens = [], [], []
    with torch.random.fork_rng(devices=[]):
        for start in range(0, len(prompts), per_call):
            chunk = list(prompts[start : start + per_call])
            rollouts = sample_completions(model, tokenizer, chunk, group_size=samples, max_new_tokens=max_new_tokens,
                                          temperature=temperature, formats=formats,
                                          add_special_tokens=add_special_tokens, seed=seed + start)
            for i in range(len(chunk)):
                rows = range(i * samples, (i + 1) * samples)
                answer = answers[start + i]
                correct.append([int(math_reward(rollouts.completions[r], answer, formats=formats)) for r in rows])
                answered.append([int(rollouts.segments[r] is not None) for r in rows])
                tokens.append([len(rollouts.completion_ids[r]) for r in rows])
    n = len(prompts) * samples
    return {"correct": correct, "answered": answered, "tokens": tokens,
            "accuracy": sum(map(sum, correct)) / n, "answered_rate": sum(map(sum, answered)) / n,
            "mean_tokens": sum(map(sum, tokens)) / n}
