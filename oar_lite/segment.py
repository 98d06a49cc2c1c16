"""Answer segmentation: reasoning | conclude marker | answer | rest (OAR-SPEC section 2).

`find_answer` gives character spans, `segment_completion` token spans, and
`segments_to_masks` the ``[B, T]`` masks of a batch; no parseable answer gives ``None``.
Formats are tried in the order given, the last occurrence of the first that matches wins
(so "The answer is \\boxed{5}." is read as boxed):

- ``"boxed"``: ``\\boxed{...}`` with balanced braces; the answer is the inside.
- ``"hash"``: GSM8K's ``#### 42``; the answer runs to the end of the line.
- ``"answer_is"``: ``The answer is 42.`` (also "The final answer is"); the answer runs to
  the end of the sentence or line; of ``3 * 4 = 12`` it is ``12``, of ``90 years`` ``90``.
- ``"a_equals"``: the toy world's ``A=123``; the answer is the number.
"""
from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import Sequence

import torch

FORMATS = ("boxed", "hash", "answer_is", "a_equals")
"""All answer formats, in the default order of preference."""


@dataclass(frozen=True)
class AnswerMatch:
    """Character spans of one answer in a text: ``text[marker_start:answer_start]`` is the
    conclude marker (e.g. ``"A="``), ``text[answer_start:answer_end]`` the answer."""

    format: str
    marker_start: int
    answer_start: int
    answer_end: int
    answer: str


@dataclass(frozen=True)
class Segments:
    """Token spans in the completion's own tokens: ``reasoning = slice(0, k)`` before the
    conclude marker, ``answer`` the tokens that overlap the answer text (`shift` by the
    prompt length to index ``prompt + completion``)."""

    reasoning: slice
    answer: slice
    answer_text: str
    format: str

    def shift(self, offset: int) -> "Segments":
        """The same segments, moved right by ``offset`` tokens (e.g. the prompt length)."""
        return Segments(slice(self.reasoning.start + offset, self.reasoning.stop + offset),
                        slice(self.answer.start + offset, self.answer.stop + offset), self.answer_text, self.format)


_NUMBER = r"[-\u2212]?\d[\d,]*(?:\.\d+)?"  # a Unicode minus (U+2212) is a minus too
_A_EQUALS = re.compile(r"A=\s*(" + _NUMBER + ")")
_ANSWER_IS = re.compile(r"[Tt]he (?:final )?answer is\s*:?\s*")
_ANSWER_IS_END = re.compile(r"\.(?=\s|$)|\n|$")
_NUMBER_THEN_WORD = re.compile(r"(" + _NUMBER + r")\s+[A-Za-z]")


def _last_boxed(text: str) -> AnswerMatch | None:
    """The last ``\\boxed{...}`` with balanced braces and a non-blank inside (one pass)."""
    opener = "\\boxed{"
    if opener not in text:
        return None
    closing: dict[int, int] = {}
    stack: list[int] = []
    for j, ch in enumerate(text):
        if ch == "{":
            stack.append(j)
        elif ch == "}" and stack:
            closing[stack.pop()] = j
    start = text.rfind(opener)
    while start != -1:
        i = start + len(opener)
        j = closing.get(i - 1)
        if j is not None and text[i:j].strip():
            return AnswerMatch("boxed", start, i, j, text[i:j])
        start = text.rfind(opener, 0, start)
    return None


def _last_answer_is(text: str) -> AnswerMatch | None:
    for marker in reversed(list(_ANSWER_IS.finditer(text))):
        rest_start = marker.end()
        if text[rest_start : rest_start + 1] == "$":
            rest_start += 1
        end = _ANSWER_IS_END.search(text, rest_start).start()
        answer = text[rest_start:end].rstrip().rstrip("$").rstrip()
        # Small models write "The answer is 3 * 4 = 12." or "The answer is 90 years.": the
        # answer is the right-hand side of the last "=", and a number without its unit.
        eq = answer.rfind("=")
        if eq != -1 and answer[eq + 1 :].strip(" $"):
            rhs = answer[eq + 1 :]
            skip = eq + 1 + len(rhs) - len(rhs.lstrip(" $"))
            rest_start, answer = rest_start + skip, answer[skip:]
        unit = _NUMBER_THEN_WORD.match(answer)
        if unit:
            answer = unit.group(1)
        if answer:
            return AnswerMatch("answer_is", marker.start(), rest_start, rest_start + len(answer), answer)
    return None


def _last_a_equals(text: str) -> AnswerMatch | None:
    matches = list(_A_EQUALS.finditer(text))
    if not matches:
        return None
    m = matches[-1]
    return AnswerMatch("a_equals", m.start(), m.start(1), m.end(1), m.group(1))


def _last_hash(text: str) -> AnswerMatch | None:
    """GSM8K's ``#### answer``: the last line holding ``####`` with text after it; the
    answer is the rest of that line after its first ``####``, without a closing period.
    Each line is looked at once (a regex with ``[^\\n]*\\S`` backtracks quadratically)."""
    end = len(text)
    while True:
        last = text.rfind("####", 0, end)
        if last == -1:
            return None
        line_start = text.rfind("\n", 0, last) + 1
        line_end = text.find("\n", last)
        line_end = len(text) if line_end == -1 else line_end
        first = text.find("####", line_start, line_end)
        begin = first + 4
        while begin < line_end and text[begin] in " \t":
            begin += 1
        answer = text[begin:line_end].rstrip().rstrip(".").rstrip()
        if answer:
            return AnswerMatch("hash", first, begin, begin + len(answer), answer)
        end = line_start


_FINDERS = {"boxed": _last_boxed, "hash": _last_hash, "answer_is": _last_answer_is, "a_equals": _last_a_equals}


def find_answer(text: str, formats: Sequence[str] = FORMATS) -> AnswerMatch | None:
    """Find the final answer in ``text``; ``None`` when no format in ``formats`` matches."""
    for name in check_formats(formats):
        found = _FINDERS[name](text)
        if found is not None:
            return found
    return None


def check_formats(formats: Sequence[str], name: str = "formats") -> tuple[str, ...]:
    """``formats`` as a tuple if it is a non-empty sequence of names from `FORMATS`, else a
    ValueError naming the argument ``name``: the one check of answer formats."""
    if isinstance(formats, str):
        raise ValueError(f"{name} must be a sequence of format names, got the string {formats!r}; "
                         f"wrap it: [{formats!r}]")
    formats = tuple(formats)
    unknown = [f for f in formats if f not in FORMATS]
    if unknown or not formats:
        raise ValueError(f"{name} has an unknown answer format or none (unknown or no answer formats: "
                         f"{unknown or list(formats)}); expected a non-empty subset of {list(FORMATS)}")
    return formats


def segment_completion(
    text: str, offsets: Sequence[tuple[int, int]], formats: Sequence[str] = FORMATS
) -> Segments | None:
    """`Segments` of one completion's ``text`` given each token's character span
    ``offsets`` (``[(start, end)]``, e.g. from `completion_offsets`); ``None`` when no
    answer in ``formats`` is found or no token covers it."""
    match = find_answer(text, formats)
    if match is None:
        return None
    ends = [int(e) for _, e in offsets]
    starts = [int(s) for s, _ in offsets]
    # First token that reaches into the marker / the answer; last token that starts in the answer.
    marker_tok = next((i for i, e in enumerate(ends) if e > match.marker_start), None)
    answer_first = next((i for i, e in enumerate(ends) if e > match.answer_start), None)
    if marker_tok is None or answer_first is None:
        return None
    answer_last = max((i for i, s in enumerate(starts) if s < match.answer_end), default=None)
    if answer_last is None or answer_last < answer_first:
        return None
    return Segments(slice(0, marker_tok), slice(answer_first, answer_last + 1), match.answer, match.format)


_OFFSET_WINDOW = 8
"""Tokens of left context decoded with each token in `completion_offsets`."""


def completion_offsets(tokenizer, completion_ids: Sequence[int]) -> tuple[str, list[tuple[int, int]]]:
    """``(text, offsets)``: generated ids decoded, and each token's ``(start, end)`` span.

    A span is what the token adds to the decoded text before it, so it is right for any
    tokenizer and needs no re-tokenisation (which could split the text differently from
    what the model generated). It is measured on a window of `_OFFSET_WINDOW` tokens
    (linear time), falling back to whole prefixes (quadratic) if the windows do not add up.
    """
    ids = [int(i) for i in completion_ids]

    def decode(part):
        return tokenizer.decode(part, skip_special_tokens=False, clean_up_tokenization_spaces=False)

    text = decode(ids)
    lengths, length = [], 0  # the decoded text's length after each token
    for k in range(len(ids)):
        window = ids[max(0, k - _OFFSET_WINDOW):k]
        length += len(decode(window + [ids[k]])) - (len(decode(window)) if window else 0)
        lengths.append(length)
    if ids and length != len(text):  # the windows missed some context: decode whole prefixes
        lengths = [len(decode(ids[:k])) for k in range(1, len(ids) + 1)]
    ends = list(itertools.accumulate(lengths, max, initial=0))  # a token's span never ends before the previous one's
    return text, list(zip(ends[:-1], ends[1:]))


def segment_completion_ids(
    tokenizer, completion_ids: Sequence[int], formats: Sequence[str] = FORMATS
) -> Segments | None:
    """`segment_completion` for generated ids (completion tokens only, no prompt)."""
    text, offsets = completion_offsets(tokenizer, completion_ids)
    return segment_completion(text, offsets, formats)


def segments_to_masks(
    segments: Sequence[Segments | None], completion_start: int | Sequence[int], seq_len: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(reasoning_mask, answer_mask)``, each ``[B, T]`` bool, of a batch ``prompt + completion``.

    Args:
        segments: B `Segments` (completion-token indices) or ``None`` (an all-False row).
        completion_start: each row's first completion column, or one int for all rows.
        seq_len: T, the padded sequence length.

    Raises:
        ValueError: ``completion_start`` not one per row, or an answer past ``seq_len``.
    """
    batch = len(segments)
    starts = [int(completion_start)] * batch if isinstance(completion_start, int) else [int(s) for s in completion_start]
    if len(starts) != batch:
        raise ValueError(f"completion_start has {len(starts)} entries for {batch} segments")
    reasoning_mask = torch.zeros(batch, seq_len, dtype=torch.bool)
    answer_mask = torch.zeros(batch, seq_len, dtype=torch.bool)
    for row, (seg, start) in enumerate(zip(segments, starts)):
        if seg is None:
            continue
        seg = seg.shift(start)
        if seg.answer.stop > seq_len:
            raise ValueError(f"row {row}: answer ends at token {seg.answer.stop}, past seq_len={seq_len}")
        reasoning_mask[row, seg.reasoning] = True
        answer_mask[row, seg.answer] = True
    return reasoning_mask, answer_mask
