"""Verifiable rewards: 1.0 when the completion's final answer equals the reference, else 0.0
(notebook 01, section 1). The answer is located with `oar_lite.segment.find_answer` (the
spans credit assignment uses) and compared by `math_verify`; model text is parsed, never run.

Only the located answer is parsed: with LaTeX (a backslash or brace) as ``\\boxed{answer}``,
since math-verify reads LaTeX only in a math environment; else as plain text, which reads the
leading number and drops a unit. math-verify's timeout uses ``signal.alarm``, so it applies
on the main thread only (`TIMEOUT_SECONDS`); elsewhere `MAX_ANSWER_CHARS` bounds the work.
math-verify (and the sympy it parses with, most of ``import oar_lite``'s cost beyond torch) is
imported on the first answer parsed, not with the package.
"""
from __future__ import annotations

import functools
import threading
from typing import Sequence

from .segment import FORMATS, check_formats, find_answer

TIMEOUT_SECONDS = 5
"""math-verify's timeout for one parse or comparison, on the main thread."""

MAX_ANSWER_CHARS = 1000
"""Longer final answers (or references) are not parsed: they score 0."""


@functools.cache
def _math_verify():
    """math-verify's ``(parse, verify, LaTeX extraction, plain extraction)``, imported once, on first use."""
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

    return parse, verify, (LatexExtractionConfig(boxed_match_priority=0),), (ExprExtractionConfig(),)


def _timeout() -> int | None:
    return TIMEOUT_SECONDS if threading.current_thread() is threading.main_thread() else None


def parse_answer(answer: str) -> list:
    """math-verify's parse of one final answer or reference (see the module docstring): sympy
    objects and strings, empty when nothing parses."""
    answer = str(answer).replace("\u2212", "-").strip()
    if not answer or len(answer) > MAX_ANSWER_CHARS:
        return []
    parse, _, latex, plain = _math_verify()
    if "\\" in answer or "{" in answer:
        return parse("\\boxed{" + answer + "}", extraction_config=latex, parsing_timeout=_timeout())
    return parse(answer, extraction_config=plain, parsing_timeout=_timeout())


def math_reward(completion: str, reference: str | int | float, *, formats: Sequence[str] = FORMATS) -> float:
    """1.0 if the completion's final answer is mathematically equal to ``reference``, else 0.0
    (also when no answer in ``formats`` is found); safe from any thread."""
    match = find_answer(completion, formats)
    if match is None:
        return 0.0
    predicted = parse_answer(match.answer)
    gold = parse_answer(str(reference))
    if not predicted or not gold:
        return 0.0
    verify = _math_verify()[1]
    return 1.0 if verify(gold, predicted, timeout_seconds=_timeout()) else 0.0


def math_rewards(completions: Sequence[str], references: Sequence[str | int | float], *,
                 formats: Sequence[str] = FORMATS) -> list[float]:
    """`math_reward` for a batch; ``completions`` and ``references`` align one to one."""
    if len(completions) != len(references):
        raise ValueError(f"{len(completions)} completions but {len(references)} references; expected one each")
    return [math_reward(c, r, formats=formats) for c, r in zip(completions, references)]


def accuracy_reward(formats: Sequence[str] = FORMATS):
    """A TRL reward function, `math_reward` against each row's ``answer`` column, called as
    ``reward(completions, answer=[...], **other_columns)``; a completion is a string or chat
    messages whose last ``content`` is the text."""
    formats = check_formats(formats)

    def accuracy(completions, answer, **kwargs):
        texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
        return math_rewards(texts, [str(a) for a in answer], formats=formats)

    return accuracy


def format_reward(formats: Sequence[str] = FORMATS):
    """A TRL reward function: 1.0 when the completion states a final answer in one of
    ``formats`` (right or wrong), else 0.0. Give it weight 0 (``reward_weights``) to log the
    format rate (``rewards/format/mean``) without training on it."""
    formats = check_formats(formats)

    def format(completions, **kwargs):  # noqa: A001  (TRL logs a reward under its function's name)
        texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
        return [0.0 if find_answer(text, formats) is None else 1.0 for text in texts]

    return format
