"""Ground-truth credit in the toy world, and the controls any credit must beat (notebook 06).

The toy world (`oar_lite.course.toy`) knows what every token of a chain should have been, so it can
say which tokens of a *wrong* completion are to blame. Three scorers with the calling
convention of `oar_lite.attribution` (the model is not used): ``"oracle"`` (`oracle_scores`,
blame), ``"oracle-pivotal"`` (`pivotal_oracle_scores`, influence by construction) and
``"oracle-relevant"`` (`relevance_oracle_scores`: the tokens the reward depends on, in every
completion; the credit that removes the noise of the others, the lab's
`oar_lite.lab.gradient_quality.irrelevant_mask`). Their
scores are binary, so `oar_lite.reshape.bilevel_weights` gives a marked token ``1 + boost``
times the weight of the others before the mass is rescaled (``boost=9``: "0.1 elsewhere").

Importing this module registers the oracles (`ORACLES`) with the library's registry
(`oar_lite.attribution.register_scorer`; the library knows nothing of the toy world), and only
importing it: ``import oar_lite.course`` does not. The controls any credit must beat,
``"inverted:oracle"`` and ``"shuffled:oracle"``, are the lab's (`oar_lite.lab.controls`).
"""
from __future__ import annotations

import functools
import re

import torch

from . import toy
from ..attribution import register_scorer
from ..segment import completion_offsets

_PROMPT = re.compile(r"(\d+)\+(\d+):\s*$")

ORACLE_BOOST = 9.0
"""The reshaping boost that gives the oracles' binary scores "0.1 elsewhere" (a marked token weighs ``1 + 9`` times
the others before the mass is rescaled); the credit regime (`lab.compare.PROFILES["credit"]`) and benchmarks read it."""


@functools.lru_cache(maxsize=1)
def toy_tokenizer():
    """The toy tokenizer (`toy.build_tokenizer`), built once: the oracles' default."""
    return toy.build_tokenizer()


# ----------------------------------------------------------------------------- the toy world's truth

def locally_wrong(chain: toy.Chain, a: int, b: int) -> list[int]:
    """Character positions of ``chain`` (a parsed completion of ``a + b``) that are wrong
    given what was written before them, so an error is blamed where it is made, not where
    it propagates.

    Step i (``x+y+c=kd``, rightmost column first) must copy the operands' column-i digits
    (0 past the last) into ``x`` and ``y`` and the carry the previous step *wrote* into
    ``c``, and ``kd`` must be its *written* ``x + y + c``. A step beyond the problem's last
    column is wrong in all its digits; a missing step or a miscopied answer leaves no wrong
    reasoning character (an empty list).
    """
    xs, ys = str(a)[::-1], str(b)[::-1]
    columns = max(len(xs), len(ys))
    wrong, carry = [], 0
    for i, s in enumerate(chain.steps):
        p = s.start
        if i >= columns:
            wrong += [p, p + 2, p + 4, p + 6, p + 7]
            continue
        x, y = int(xs[i]) if i < len(xs) else 0, int(ys[i]) if i < len(ys) else 0
        total = s.a + s.b + s.carry_in
        for ok, pos in ((s.a == x, p), (s.b == y, p + 2), (s.carry_in == carry, p + 4),
                        (s.carry_out == total // 10, p + 6), (s.digit == total % 10, p + 7)):
            if not ok:
                wrong.append(pos)
        carry = s.carry_out
    return wrong


def read_sequence(input_ids: torch.Tensor, reasoning: slice, answer: slice, tokenizer=None):
    """Decode one toy sequence (``input_ids [T]``, spans as for the scorers) into ``(a, b,
    chain, offsets)``: the operands from the prompt, the parsed completion (`toy.parse_chain`
    of reasoning + marker + answer, ``None`` when it does not parse) and each reasoning
    token's character span in it. ValueError when the prompt is not like ``"473+258:"``."""
    tokenizer = tokenizer or toy_tokenizer()
    ids = [int(i) for i in input_ids]
    prompt = tokenizer.decode(ids[: reasoning.start], skip_special_tokens=True)
    match = _PROMPT.search(prompt)
    if match is None:
        raise ValueError(f"the oracle needs a toy prompt such as '473+258:' before the reasoning, got {prompt!r} "
                         "(pass tokenizer= if the sequence was not encoded with the toy tokenizer)")
    text, offsets = completion_offsets(tokenizer, ids[reasoning.start : answer.stop])
    return int(match.group(1)), int(match.group(2)), toy.parse_chain(text), offsets[: reasoning.stop - reasoning.start]


def _mark(offsets, positions) -> torch.Tensor:
    positions = set(positions)
    return torch.tensor([float(any(c in positions for c in range(s, e))) for s, e in offsets])


def wrong_tokens(input_ids: torch.Tensor, reasoning: slice, answer: slice, tokenizer=None) -> torch.Tensor | None:
    """``[R]`` bool, the reasoning tokens of a *wrong* completion that hold a `locally_wrong`
    character; ``None`` when the completion is right or cannot be parsed (nothing to
    blame). A wrong completion with no wrong reasoning token gives all False."""
    a, b, chain, offsets = read_sequence(input_ids, reasoning, answer, tokenizer)
    if chain is None or chain.answer.lstrip("0") == str(a + b):
        return None
    return _mark(offsets, locally_wrong(chain, a, b)).bool()


def oracle_scores(model, input_ids: torch.Tensor, reasoning: slice, answer: slice, *, tokenizer=None) -> torch.Tensor:
    """Blame (``"oracle"``): ``[R]``, on a wrong completion 1 on its `wrong_tokens` and 0
    elsewhere; all 1 (plain GRPO) on a right completion, an unparseable one, or a wrong
    one with no wrong reasoning token. ``model`` is not used."""
    wrong = wrong_tokens(input_ids, reasoning, answer, tokenizer)
    return wrong.float() if wrong is not None and wrong.any() else torch.ones(reasoning.stop - reasoning.start)


def pivotal_oracle_scores(model, input_ids: torch.Tensor, reasoning: slice, answer: slice, *,
                          tokenizer=None) -> torch.Tensor:
    """Influence by construction (``"oracle-pivotal"``): ``[R]``, on a wrong completion 1 on
    the `toy.PIVOTAL` tokens (right or wrong), 0 elsewhere; all 1 on a right or
    unparseable completion. ``model`` is not used."""
    a, b, chain, offsets = read_sequence(input_ids, reasoning, answer, tokenizer)
    R = reasoning.stop - reasoning.start
    if chain is None or chain.answer.lstrip("0") == str(a + b):
        return torch.ones(R)
    scores = _mark(offsets, [i for i, label in enumerate(chain.labels) if label == toy.PIVOTAL])
    return scores if scores.any() else torch.ones(R)


RELEVANT_LABELS = (toy.SUPPORT, toy.PIVOTAL)
"""Toy labels of the reasoning tokens the reward depends on (operands, carries, result
digits); `toy.NEUTRAL` ones (filler and scratch words, ``+``, ``=``, spaces) it does not."""


def relevant_tokens(input_ids: torch.Tensor, reasoning: slice, answer: slice, tokenizer=None) -> torch.Tensor | None:
    """``[R]`` bool, the reasoning tokens the reward depends on (`RELEVANT_LABELS`), right or
    wrong; ``None`` when the completion cannot be parsed (nothing is known)."""
    _, _, chain, offsets = read_sequence(input_ids, reasoning, answer, tokenizer)
    if chain is None:
        return None
    return _mark(offsets, [i for i, label in enumerate(chain.labels) if label in RELEVANT_LABELS]).bool()


def relevance_oracle_scores(model, input_ids: torch.Tensor, reasoning: slice, answer: slice, *,
                            tokenizer=None) -> torch.Tensor:
    """Relevance (``"oracle-relevant"``): ``[R]``, 1 on the `relevant_tokens` and 0 on the
    others, on every completion, right or wrong (which tokens the reward depends on does not
    depend on the outcome); all 1 (plain GRPO) when the completion cannot be parsed or every
    token, or none, is relevant. ``model`` is not used."""
    relevant = relevant_tokens(input_ids, reasoning, answer, tokenizer)
    if relevant is None or bool(relevant.all()) or not bool(relevant.any()):
        return torch.ones(reasoning.stop - reasoning.start)
    return relevant.float()


ORACLES = {"oracle": oracle_scores, "oracle-pivotal": pivotal_oracle_scores, "oracle-relevant": relevance_oracle_scores}
"""The toy world's oracles by method name, registered when this module is imported."""
for _name, _scorer in ORACLES.items():
    register_scorer(_name, _scorer)


# ----------------------------------------------------------------------------- influence vs blame

def blame_share(weights: torch.Tensor, wrong: torch.Tensor) -> float:
    """Share of a wrong completion's advantage mass that lands on its erroneous tokens:
    ``sum(w[wrong]) / sum(w)`` over its reasoning tokens (``weights``, ``wrong``: ``[R]``).
    Uniform weights give the share of wrong tokens, ``wrong.mean()``."""
    if weights.shape != wrong.shape or weights.dim() != 1:
        raise ValueError(f"weights and wrong must both be [R], got {tuple(weights.shape)} and {tuple(wrong.shape)}")
    total = float(weights.sum())
    return float(weights[wrong.bool()].sum()) / total if total > 0 else 0.0
