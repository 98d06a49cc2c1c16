"""Verifiable rewards: 1.0 when the completion's final answer equals the reference, else 0.0.

The answer is located with `oar_lite.segment.find_answer` (the same spans the credit
assignment uses) and parsed and compared by `math_verify` (symbolic equivalence:
``1,234 == 1234``, ``0.5 == \\frac{1}{2} == \\dfrac{2}{4}``, ``\\sqrt{12} == 2\\sqrt{3}``,
``\\$18 == 18``, ``18 \\text{ dollars} == 18``). Model text is parsed, never evaluated as code.

How an answer is handed to math-verify: math-verify reads LaTeX only inside a math
environment, and the located answer *is* the final answer, which is what ``\\boxed{}``
marks for it. So an answer (or a reference) that contains LaTeX (a backslash or a brace)
is parsed as ``\\boxed{answer}`` with `math_verify.LatexExtractionConfig`; plain text
("1,234", "$18", "90 years") with `math_verify.ExprExtractionConfig`, which reads the
leading number and drops a unit after it. A Unicode minus sign (U+2212) reads as ``-``.

Threads: math-verify's own timeout uses ``signal.alarm``, which works only on the main
thread; there it is used (`TIMEOUT_SECONDS`). Off the main thread (data loaders, TRL
reward workers) parsing runs without that timeout; what bounds the work is that only the
located answer is parsed, and an answer longer than `MAX_ANSWER_CHARS` scores 0.
"""
from __future__ import annotations

import threading
from typing import Sequence

from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

from .segment import FORMATS, check_formats, find_answer

TIMEOUT_SECONDS = 5
"""math-verify's timeout for one parse or comparison, on the main thread."""

MAX_ANSWER_CHARS = 1000
"""Longer final answers (or references) are not parsed: they score 0."""

_LATEX = (LatexExtractionConfig(boxed_match_priority=0),)
_PLAIN = (ExprExtractionConfig(),)


def _timeout() -> int | None:
    return TIMEOUT_SECONDS if threading.current_thread() is threading.main_thread() else None


def parse_answer(answer: str) -> list:
    """math-verify's parse of one final answer (or reference): a list of sympy objects
    and strings, empty when nothing parses. See the module docstring for how."""
    answer = str(answer).replace("\u2212", "-").strip()
    if not answer or len(answer) > MAX_ANSWER_CHARS:
        return []
    if "\\" in answer or "{" in answer:
        return parse("\\boxed{" + answer + "}", extraction_config=_LATEX, parsing_timeout=_timeout())
    return parse(answer, extraction_config=_PLAIN, parsing_timeout=_timeout())


def math_reward(completion: str, reference: str | int | float, *, formats: Sequence[str] = FORMATS) -> float:
    """Reward of one completion: 1.0 if its final answer is mathematically equal to
    ``reference``, 0.0 otherwise (also when no answer in ``formats`` is found). Safe to
    call from any thread."""
    match = find_answer(completion, formats)
    if match is None:
        return 0.0
    predicted = parse_answer(match.answer)
    gold = parse_answer(str(reference))
    if not predicted or not gold:
        return 0.0
    return 1.0 if verify(gold, predicted, timeout_seconds=_timeout()) else 0.0


def math_rewards(completions: Sequence[str], references: Sequence[str | int | float], *,
                 formats: Sequence[str] = FORMATS) -> list[float]:
    """`math_reward` for a batch; ``completions`` and ``references`` align one to one."""
    if len(completions) != len(references):
        raise ValueError(f"{len(completions)} completions but {len(references)} references; expected one each")
    return [math_reward(c, r, formats=formats) for c, r in zip(completions, references)]


def accuracy_reward(formats: Sequence[str] = FORMATS):
    """A TRL reward function: 1.0 when a completion's final answer equals its row's
    ``answer`` column (`math_reward`, with math-verify), else 0.0.

    TRL calls it as ``reward(completions, answer=[...], **other_columns)``; a completion is
    a string, or chat messages whose last ``content`` is the text (conversational datasets).
    """
    formats = check_formats(formats)

    def accuracy(completions, answer, **kwargs):
        texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
        return math_rewards(texts, [str(a) for a in answer], formats=formats)

    return accuracy
