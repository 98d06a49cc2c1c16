"""Held-out accuracy: how often a policy answers problems it was never trained on, greedy or
sampled. `evaluate` is the one evaluator (the trainers' evaluations, the toy world's
`oar_lite.course.toy.evaluate`, the TRL runs' held-out callback): it summarises the results and
keeps them per problem, so that an interval can be taken over problems as well as over seeds,
and two checkpoints can be compared on the same problems and the same draws.
"""
from __future__ import annotations

from typing import Callable, Sequence

import torch
from tqdm.auto import tqdm

from .settings import check_number
from .reward import math_rewards
from .rollout import GREEDY, SAMPLING, sample_completions
from .segment import FORMATS


def evaluate(model, tokenizer, problems: Sequence[dict], *, group_size: int = 1, temperature: float = GREEDY,
             seed: int = 0, max_new_tokens: int = SAMPLING.max_new_tokens, batch_size: int = 64,
             formats: Sequence[str] = FORMATS, add_special_tokens: bool = True,
             shares: dict[str, Callable[[str], bool]] | None = None, progress: bool = False) -> dict:
    """Answer every problem ``group_size`` times (greedy by default) and check each answer.

    Sampling does not disturb the caller's random state (a training run's sampling stream
    continues as if nothing happened): the batch that starts at problem i is sampled after
    ``torch.manual_seed(seed + i)`` inside `torch.random.fork_rng`, so the same ``seed`` and
    ``batch_size`` give the same draws for any policy and two checkpoints are compared on the
    same noise.

    Args:
        model, tokenizer: the policy (a peft model too) and its tokenizer.
        problems: ``[N]`` dicts with ``"prompt"`` and ``"answer"``.
        group_size: completions per problem; greedy decoding (``temperature=0``) gives one.
        batch_size: problems per `generate` call (``batch_size * group_size`` rows).
        add_special_tokens: passed to the tokenizer (False for chat-templated prompts).
        shares: ``{name: test(completion)}``, each reported as the share of completions that pass.

    Returns:
        ``{"accuracy", "answer_rate", "mixed", "solved", "failed", "mean_tokens", "n",
        "correct", "answered", "tokens"}`` and the ``shares``: the shares of completions right
        and with an answer in ``formats``; of problems whose group is mixed (0 when
        ``group_size == 1``), all right, all wrong; the mean completion length in tokens; the
        number of problems; and per problem ``[N][group_size]``: 0/1 right, 0/1 answered, lengths.

    Raises:
        ValueError: no problems, greedy with ``group_size > 1``, or a setting out of range.
    """
    if isinstance(problems, (str, dict)) or len(problems) == 0:
        raise ValueError("no problems to evaluate; expected a non-empty list of dicts with 'prompt' and 'answer'")
    check_number("evaluate", "group_size", group_size, integer=True, low=1)
    check_number("evaluate", "batch_size", batch_size, integer=True, low=1)
    check_number("evaluate", "temperature", temperature, low=0)
    check_number("evaluate", "seed", seed, integer=True)
    if temperature == GREEDY and group_size != 1:
        raise ValueError(f"greedy decoding (temperature=0) gives one answer per prompt; got group_size={group_size}")
    correct, answered, tokens, counts = [], [], [], dict.fromkeys(shares or {}, 0)
    starts = range(0, len(problems), batch_size)
    device = next(model.parameters()).device
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        for start in tqdm(starts, desc="eval", disable=not progress, leave=False):
            batch = list(problems[start:start + batch_size])
            rollouts = sample_completions(model, tokenizer, [p["prompt"] for p in batch], group_size=group_size,
                                          max_new_tokens=max_new_tokens, temperature=temperature, formats=formats,
                                          add_special_tokens=add_special_tokens, seed=seed + start)
            right = math_rewards(rollouts.completions, [p["answer"] for p in batch for _ in range(group_size)],
                                 formats=formats)
            for i in range(len(batch)):
                rows = range(i * group_size, (i + 1) * group_size)
                correct.append([int(right[r]) for r in rows])
                answered.append([int(rollouts.segments[r] is not None) for r in rows])
                tokens.append([len(rollouts.completion_ids[r]) for r in rows])
            for name, test in (shares or {}).items():
                counts[name] += sum(bool(test(c)) for c in rollouts.completions)
    n, completions = len(correct), len(correct) * group_size
    return {
        "accuracy": sum(map(sum, correct)) / completions,
        "answer_rate": sum(map(sum, answered)) / completions,
        "mixed": sum(0 < sum(g) < group_size for g in correct) / n if group_size > 1 else 0.0,
        "solved": sum(sum(g) == group_size for g in correct) / n,
        "failed": sum(sum(g) == 0 for g in correct) / n,
        "mean_tokens": sum(map(sum, tokens)) / completions,
        "n": n,
        **{name: count / completions for name, count in counts.items()},
        "correct": correct, "answered": answered, "tokens": tokens,
    }
