"""Held-out accuracy: `evaluate` samples completions (greedy by default) and checks their
answers with `oar_lite.reward.math_rewards`; the trainers, the toy world and the benchmarks
share it."""
from __future__ import annotations

from typing import Callable, Sequence

from tqdm.auto import tqdm

from .reward import math_rewards
from .rollout import sample_completions
from .segment import FORMATS


def evaluate(model, tokenizer, problems: Sequence[dict], *, group_size: int = 1, temperature: float = 0.0,
             seed: int | None = None, max_new_tokens: int = 64, batch_size: int = 64,
             formats: Sequence[str] = FORMATS, add_special_tokens: bool = True,
             shares: dict[str, Callable[[str], bool]] | None = None, progress: bool = False) -> dict:
    """Accuracy on held-out problems: greedy by default, or ``group_size`` samples each.

    ``seed``: batch k is sampled after ``torch.manual_seed(seed + k)`` (None: the global RNG is
    left alone). ``shares``: ``{name: test(completion)}``, each reported as the share that passes.

    Returns ``{"accuracy", "answer_rate", "mixed", "solved", "failed", "mean_tokens", "n"}`` and
    the ``shares``: the shares of completions right and with a parseable answer; of problems
    whose group is mixed (0 when ``group_size == 1``), all right, all wrong; the mean completion
    length in tokens; the number of problems.
    """
    if len(problems) == 0:
        raise ValueError("no problems to evaluate; expected dicts with 'prompt' and 'answer'")
    if batch_size < 1 or group_size < 1:
        raise ValueError(f"batch_size and group_size must be >= 1, got {batch_size} and {group_size}")
    groups, answered, lengths, counts = [], 0, [], dict.fromkeys(shares or {}, 0)
    batches = range(0, len(problems), batch_size)
    for k, i in enumerate(tqdm(batches, desc="eval", disable=not progress, leave=False)):
        batch = problems[i:i + batch_size]
        rollouts = sample_completions(model, tokenizer, [p["prompt"] for p in batch], group_size=group_size,
                                      max_new_tokens=max_new_tokens, temperature=temperature, formats=formats,
                                      add_special_tokens=add_special_tokens, seed=None if seed is None else seed + k)
        right = math_rewards(rollouts.completions, [p["answer"] for p in batch for _ in range(group_size)],
                             formats=formats)
        groups += [right[j:j + group_size] for j in range(0, len(right), group_size)]
        answered += sum(s is not None for s in rollouts.segments)
        lengths += [len(ids) for ids in rollouts.completion_ids]
        for name, test in (shares or {}).items():
            counts[name] += sum(bool(test(c)) for c in rollouts.completions)
    n, completions = len(groups), len(groups) * group_size
    return {
        "accuracy": sum(map(sum, groups)) / completions,
        "answer_rate": answered / completions,
        "mixed": sum(0 < sum(g) < group_size for g in groups) / n if group_size > 1 else 0.0,
        "solved": sum(sum(g) == group_size for g in groups) / n,
        "failed": sum(sum(g) == 0 for g in groups) / n,
        "mean_tokens": sum(lengths) / len(lengths),
        "n": n,
        **{name: count / completions for name, count in counts.items()},
    }
