"""Verifiable rewards: 1.0 when the completion's final answer equals the reference, else 0.0.

The answer is located with `oar_lite.segment.find_answer` (the same spans the credit
assignment uses) and compared with `math_verify` (symbolic equivalence: ``1,234 == 1234``,
``0.5 == \\frac{1}{2}``). Model text is parsed, never evaluated as code.
"""
from __future__ import annotations

from typing import Sequence

from math_verify import parse, verify

from .segment import FORMATS, find_answer


def math_reward(completion: str, reference: str | int | float, *, formats: Sequence[str] = FORMATS) -> float:
    """Reward of one completion: 1.0 if its final answer is mathematically equal to
    ``reference``, 0.0 otherwise (also when no answer in ``formats`` is found)."""
    match = find_answer(completion, formats)
    if match is None:
        return 0.0
    predicted = parse(match.answer)
    gold = parse(str(reference))
    if not predicted or not gold:
        return 0.0
    return 1.0 if verify(gold, predicted) else 0.0


def math_rewards(completions: Sequence[str], references: Sequence[str | int | float], *,
                 formats: Sequence[str] = FORMATS) -> list[float]:
    """`math_reward` for a batch; ``completions`` and ``references`` align one to one."""
    if len(completions) != len(references):
        raise ValueError(f"{len(completions)} completions but {len(references)} references; expected one each")
    return [math_reward(c, r, formats=formats) for c, r in zip(completions, references)]
