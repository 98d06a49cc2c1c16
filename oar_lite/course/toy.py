"""The toy reasoning world: multi-digit addition whose chain of thought has known pivotal
tokens, and its shipped small Llama (notebook 00, section 2, teaches it).

The prompt is ``"473+258:"``; the completion writes one step ``a+b+c=kd`` per column from
the right (digits ``a`` and ``b``, carry in ``c``, carry out ``k``, result digit ``d``),
filler words between, then ``A=`` and the answer: the result digits read back, led by
the last carry when it is 1::

    3+8+0=11 hmm 7+5+1=13 4+2+1=07 so A=731

Ground-truth labels (`parse_chain`, `token_labels`) follow what was written, so a wrong
chain is labelled too:

- ``PIVOTAL`` (2): each result digit ``d`` and the last carry ``k``: the answer is copied
  from them. Pre-training chains sometimes write a wrong ``d`` that the answer copies
  (`chain_of_thought`'s ``noise``), so the model reads the answer off the chain rather
  than re-adding the operands, and these labels are true of the model, not only of the text.
- ``SUPPORT`` (1): what a step computes from (operand digits, carry in, carries out but
  the last): they decide the results, but once written the answer does not read them.
- ``NEUTRAL`` (0): filler words, spaces, ``+`` and ``=``.
- ``OUTSIDE`` (-1): ``A=``, the answer, end of text.

**Scratch words** (the positive-control world of notebook 06, not the shipped model): with
``chain_of_thought(..., scratch=k)`` a chain opens with ``k`` filler words drawn uniformly at
random, a scratch label the answer never reads (``"wait so ok ... 3+8+0=11 ... A=731"``). They
are words, so `parse_chain` labels them `NEUTRAL` like any filler: tokens the reward does not
depend on, with high entropy in a model pre-trained to write them
(``scripts/pretrain_toy.py --scratch k``).

The model (`load_model`) and the held-out problems (`load_eval_set`) are package data
written by ``scripts/pretrain_toy.py``; its settings and accuracies are in
``data/toy-model/pretrain_metrics.json`` (`evaluate` recomputes the greedy ones; the sampled
``temperature_1_group_8``, 0.2856, predates today's seeding of each batch, which gives 0.2875).
"""
from __future__ import annotations

import json
import random
from importlib import resources
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

import torch

from ..evaluate import evaluate as evaluate_model
from ..rollout import GREEDY
from ..reward import math_reward, math_rewards
from ..segment import completion_offsets, segment_completion_ids

DATA_DIR = Path(str(resources.files(__package__) / "data"))
"""``oar_lite/course/data`` (toy model, held-out set): package data, a real folder in every install."""
MODEL_DIR = DATA_DIR / "toy-model"
EVAL_PATH = DATA_DIR / "toy_eval.jsonl"
EVAL_SEED = 20260107
"""Seed of the held-out set `EVAL_PATH` (written by scripts/pretrain_toy.py)."""

FORMATS = ("a_equals",)
"""The answer format of the toy world, for `oar_lite.segment` and `oar_lite.reward`."""

NEUTRAL, SUPPORT, PIVOTAL, OUTSIDE = 0, 1, 2, -1
LABEL_NAMES = {NEUTRAL: "neutral", SUPPORT: "support", PIVOTAL: "pivotal", OUTSIDE: "outside"}

FILLER_WORDS = ("so", "ok", "hmm", "now", "then", "next", "well", "right", "good", "wait", "yes")
SPECIAL_TOKENS = ("<pad>", "<s>", "</s>", "<unk>")
SYMBOLS = tuple("0123456789+=:?. ")
MAX_DIGITS = 6


# ----------------------------------------------------------------------------- tokenizer

def build_tokenizer():
    """The toy ``PreTrainedTokenizerFast``: ``<pad>=0 <s>=1 </s>=2 <unk>=3``, one token per
    digit, symbol and space, one per word (``A``, filler words; others are ``<unk>``).
    Encoding prepends ``<s>``; decoding concatenates, so ``decode(encode(text)) == text``
    and character offsets are exact."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {t: i for i, t in enumerate(SPECIAL_TOKENS + SYMBOLS + ("A",) + FILLER_WORDS)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[A-Za-z]+|[^A-Za-z]"), behavior="isolated")
    tok.decoder = decoders.Fuse()
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A $B",
                                                       special_tokens=[("<s>", vocab["<s>"])])
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", bos_token="<s>", eos_token="</s>",
                                   unk_token="<unk>", clean_up_tokenization_spaces=False, model_max_length=256)


# ----------------------------------------------------------------------------- problems

def digit_range(digits) -> tuple[int, int]:
    """``(low, high)`` from an int or an inclusive pair, checked against `MAX_DIGITS`."""
    lo, hi = (digits, digits) if isinstance(digits, int) else tuple(digits)
    if not (isinstance(lo, int) and isinstance(hi, int)) or not 1 <= lo <= hi <= MAX_DIGITS:
        raise ValueError(f"digits must be an int or a (low, high) pair with 1 <= low <= high <= {MAX_DIGITS}, "
                         f"got {digits!r}")
    return lo, hi


def make_prompt(a: int, b: int) -> str:
    """The prompt of ``a + b``: ``"473+258:"``."""
    return f"{a}+{b}:"


def make_problems(n: int, *, seed: int, digits: int | tuple[int, int] = (2, 4),
                  exclude: Iterable[str | dict] = ()) -> list[dict]:
    """``n`` distinct addition problems, the same ones in the same order for a ``seed``.

    Args:
        digits: digits of both operands, an int or an inclusive ``(low, high)`` range
            drawn uniformly per problem.
        exclude: prompts (or problem dicts) to skip, e.g. ``load_eval_set()``.

    Returns:
        dicts ``{"prompt": "473+258:", "answer": "731", "a": 473, "b": 258, "digits": 3}``.

    Raises:
        ValueError: a bad ``n`` or ``digits``, or more problems than the digits allow.
    """
    if not isinstance(n, int) or n < 0:
        raise ValueError(f"n must be a non-negative int, got {n!r}")
    lo, hi = digit_range(digits)
    capacity = sum((9 * 10 ** (d - 1)) ** 2 for d in range(lo, hi + 1))
    skip = {p["prompt"] if isinstance(p, dict) else p for p in exclude}
    if n > capacity - len(skip):
        raise ValueError(f"asked for {n} distinct problems but digits={digits!r} allows at most {capacity - len(skip)}")
    rng = random.Random(seed)
    problems, seen = [], set(skip)
    while len(problems) < n:
        d = rng.randint(lo, hi)
        a, b = rng.randint(10 ** (d - 1), 10 ** d - 1), rng.randint(10 ** (d - 1), 10 ** d - 1)
        prompt = make_prompt(a, b)
        if prompt in seen:
            continue
        seen.add(prompt)
        problems.append({"prompt": prompt, "answer": str(a + b), "a": a, "b": b, "digits": d})
    return problems


def chain_of_thought(a: int, b: int, *, rng: random.Random | None = None, filler_rate: float = 0.3,
                     max_fillers: int = 2, noise: float = 0.0, scratch: int = 0,
                     scratch_rng: random.Random | None = None) -> str:
    """A completion for ``a + b`` (no end-of-text token), correct unless ``noise > 0``.

    Args:
        a, b: non-negative operands with the same number of digits.
        rng: source of fillers and noise (default ``random.Random(0)``).
        filler_rate: chance of a filler word in each gap (before every step and ``A=``),
            tried again after each one, up to ``max_fillers`` per gap.
        noise: chance that a step writes a wrong result digit (its carry stays right); the
            answer copies the written digits, which makes them pivotal (module docstring).
        scratch: the chain opens with this many scratch words, each uniform over
            `FILLER_WORDS` (module docstring); 0 (default) draws nothing.
        scratch_rng: their source (default ``rng``); a separate one leaves the fillers and
            noise drawn from ``rng`` exactly those of ``scratch=0``.

    Returns:
        e.g. ``"3+8+0=11 hmm 7+5+1=13 4+2+1=07 A=731"``; with ``scratch=3`` e.g.
        ``"wait so ok 3+8+0=11 hmm 7+5+1=13 4+2+1=07 A=731"``.
    """
    if a < 0 or b < 0 or len(str(a)) != len(str(b)):
        raise ValueError(f"operands must be non-negative with the same number of digits, got {a} and {b}")
    if not 0 <= filler_rate < 1:
        raise ValueError(f"filler_rate must be in [0, 1), got {filler_rate}")
    if not 0 <= noise <= 1:
        raise ValueError(f"noise must be in [0, 1], got {noise}")
    if not isinstance(scratch, int) or scratch < 0:
        raise ValueError(f"scratch must be a non-negative int (scratch words before the chain), got {scratch!r}")
    rng = rng or random.Random(0)
    draw = scratch_rng or rng
    items, written, carry = [draw.choice(FILLER_WORDS) for _ in range(scratch)], [], 0

    def fillers():
        k = 0
        while k < max_fillers and rng.random() < filler_rate:
            items.append(rng.choice(FILLER_WORDS))
            k += 1

    for x, y in zip(reversed(str(a)), reversed(str(b))):
        fillers()
        s = int(x) + int(y) + carry
        digit = s % 10
        if noise and rng.random() < noise:
            digit = rng.choice([d for d in range(10) if d != s % 10])
        items.append(f"{x}+{y}+{carry}={s // 10}{digit}")
        written.append(str(digit))
        carry = s // 10
    fillers()
    answer = ("1" if carry else "") + "".join(reversed(written))
    return " ".join(items) + f" A={int(answer)}"


# ----------------------------------------------------------------------------- labels

@dataclass(frozen=True)
class Step:
    """One column as written: ``a+b+carry_in=carry_out digit`` starting at character ``start``."""

    a: int
    b: int
    carry_in: int
    carry_out: int
    digit: int
    start: int

    @property
    def correct(self) -> bool:
        """Whether the step's own arithmetic is right (whatever its inputs)."""
        return self.a + self.b + self.carry_in == 10 * self.carry_out + self.digit


@dataclass(frozen=True)
class Chain:
    """A parsed completion.

    Attributes:
        steps: the columns in the order written (rightmost column first).
        answer: the answer text after ``A=``.
        marker_start: character index of ``A=``.
        labels: ``[len(text)]`` one label per character (`PIVOTAL`, `SUPPORT`,
            `NEUTRAL`, `OUTSIDE`).
    """

    steps: tuple[Step, ...]
    answer: str
    marker_start: int
    labels: tuple[int, ...]

    @property
    def implied_answer(self) -> str:
        """The answer the written results imply (last carry, if 1, then the digits)."""
        lead = "1" if self.steps[-1].carry_out == 1 else ""
        return lead + "".join(str(s.digit) for s in reversed(self.steps))

    def matches(self, a: int, b: int) -> bool:
        """Whether the steps copy the digits of ``a`` and ``b`` and chain the carries."""
        xs, ys = str(a)[::-1], str(b)[::-1]
        if len(self.steps) != max(len(xs), len(ys)):
            return False
        carry = 0
        for i, s in enumerate(self.steps):
            x = int(xs[i]) if i < len(xs) else 0
            y = int(ys[i]) if i < len(ys) else 0
            if (s.a, s.b, s.carry_in) != (x, y, carry):
                return False
            carry = s.carry_out
        return True


_STEP = re.compile(r"(\d)\+(\d)\+(\d)=(\d)(\d)")
_WORD = re.compile(r"[a-z]+")
_ANSWER = re.compile(r"A=(\d+)\s*$")
# Character labels inside a step "a+b+c=kd" (k of the last step is set to PIVOTAL after).
_STEP_LABELS = (SUPPORT, NEUTRAL, SUPPORT, NEUTRAL, SUPPORT, NEUTRAL, SUPPORT, PIVOTAL)


def parse_chain(text: str) -> Chain | None:
    """Parse a toy completion and label every character (see the module docstring).

    Args:
        text: the completion text (a trailing ``</s>`` is labelled `OUTSIDE`).

    Returns:
        a `Chain`, or ``None`` unless ``text`` is ``item( item)* A=<digits>``, items being
        steps ``d+d+d=dd`` or lower-case words, at least one step.
    """
    if not isinstance(text, str):
        raise ValueError(f"text must be a str, got {type(text).__name__}")
    body = text[: -len("</s>")] if text.endswith("</s>") else text
    labels = [OUTSIDE] * len(text)
    steps, pos = [], 0
    while True:
        answer = _ANSWER.match(body, pos)
        if answer is not None:
            break
        step = _STEP.match(body, pos)
        if step is not None:
            a, b, c, k, d = (int(g) for g in step.groups())
            steps.append(Step(a, b, c, k, d, pos))
            labels[pos : step.end()] = _STEP_LABELS
            pos = step.end()
        else:
            word = _WORD.match(body, pos)
            if word is None:
                return None
            labels[pos : word.end()] = [NEUTRAL] * (word.end() - pos)
            pos = word.end()
        if body[pos : pos + 1] != " ":
            return None
        labels[pos] = NEUTRAL
        pos += 1
    if not steps:
        return None
    labels[steps[-1].start + 6] = PIVOTAL  # the last carry out: the answer's leading digit (or its absence)
    return Chain(tuple(steps), answer.group(1), pos, tuple(labels))


def token_labels(tokenizer, completion_ids: Sequence[int]) -> torch.Tensor | None:
    """Ground-truth label of every completion token, or ``None`` if it cannot be parsed.

    Args:
        tokenizer: the toy tokenizer (any whose decode round-trips).
        completion_ids: ``[C]`` the completion's ids (no prompt; a trailing EOS is fine).

    Returns:
        ``[C]`` long tensor: the highest label among each token's characters, `OUTSIDE`
        for the marker, the answer, EOS and tokens with no text.
    """
    ids = [int(i) for i in completion_ids]
    if ids and ids[-1] == tokenizer.eos_token_id:
        ids = ids[:-1]
    text, offsets = completion_offsets(tokenizer, ids)
    chain = parse_chain(text)
    if chain is None:
        return None
    labels = [max(chain.labels[s:e], default=OUTSIDE) for s, e in offsets]
    labels += [OUTSIDE] * (len(completion_ids) - len(ids))
    return torch.tensor(labels, dtype=torch.long)


def example(tokenizer, prompt: str, completion: str | Sequence[int]) -> dict | None:
    """One completion laid out for the scorers with its ground truth: the record
    `oar_lite.lab.credit.credit_benchmark` builds per sample.

    Args:
        prompt: e.g. ``"473+258:"`` (encoded with ``<s>`` in front, as sampling does).
        completion: its text, or its generated ids (a trailing EOS is kept).

    Returns:
        ``{"input_ids": [T] prompt + completion, "reasoning": slice, "answer": slice,
        "labels": [R] labels of the reasoning tokens, "completion", "prompt"}``, or
        ``None`` when the completion cannot be parsed or has no answer.
    """
    if not isinstance(prompt, str) or not prompt:
        raise ValueError(f"prompt must be a non-empty str such as '473+258:', got {prompt!r}")
    if isinstance(completion, str):
        ids = tokenizer(completion, add_special_tokens=False)["input_ids"]
    else:
        ids = [int(i) for i in completion]
    body = ids[:-1] if ids and ids[-1] == tokenizer.eos_token_id else ids
    labels = token_labels(tokenizer, ids)
    segments = segment_completion_ids(tokenizer, body, FORMATS)
    if labels is None or segments is None:
        return None
    prompt_ids = tokenizer(prompt)["input_ids"]
    shifted = segments.shift(len(prompt_ids))
    return {"input_ids": torch.tensor(prompt_ids + ids, dtype=torch.long), "reasoning": shifted.reasoning,
            "answer": shifted.answer, "labels": labels[segments.reasoning], "completion": tokenizer.decode(body),
            "prompt": prompt}


# ----------------------------------------------------------------------------- reward

def _reference(answer: str | int | dict) -> str | int:
    return answer["answer"] if isinstance(answer, dict) else answer


def reward(completion: str, answer: str | int | dict) -> float:
    """1.0 if the completion's ``A=`` answer equals ``answer`` (a number or a problem dict),
    else 0.0; parsed with `oar_lite.reward.math_reward`, never evaluated."""
    return math_reward(completion, _reference(answer), formats=FORMATS)


def rewards(completions: Sequence[str], answers: Sequence[str | int | dict]) -> list[float]:
    """`reward` for a batch, one answer (or problem) per completion."""
    return math_rewards(completions, [_reference(a) for a in answers], formats=FORMATS)


# ----------------------------------------------------------------------------- model and data

def model_config(vocab_size: int | None = None, **overrides):
    """The toy ``LlamaConfig``: 4 layers, width 128, 4 heads; ``overrides`` replace fields."""
    from transformers import LlamaConfig

    tok_vocab = len(SPECIAL_TOKENS) + len(SYMBOLS) + 1 + len(FILLER_WORDS)
    cfg = dict(vocab_size=vocab_size or tok_vocab, hidden_size=128, intermediate_size=384, num_hidden_layers=4,
               num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=128, rope_theta=10000.0,
               tie_word_embeddings=True, pad_token_id=0, bos_token_id=1, eos_token_id=2)
    cfg.update(overrides)
    return LlamaConfig(**cfg)


def load_model(path: str | Path | None = None, *, dtype: torch.dtype = torch.float32):
    """The shipped toy model in eval mode and its tokenizer, offline: ``(model, tokenizer)``.

    ``path`` is a ``save_pretrained`` folder (default `MODEL_DIR`). Raises ValueError when
    it is missing or damaged (unreadable, or NaN weights)."""
    from transformers import LlamaForCausalLM

    path = Path(path) if path is not None else MODEL_DIR
    if not (path / "config.json").exists():
        raise ValueError(f"no toy model in {path} (expected config.json, model.safetensors and tokenizer files; "
                         "run scripts/pretrain_toy.py)")
    from .models import load_saved_model

    fix = "restore the folder (reinstall oar-lite, or run scripts/pretrain_toy.py to write it again)"
    model, tokenizer = load_saved_model(path, fix, LlamaForCausalLM, dtype, local_files_only=True)
    return model.eval(), tokenizer


def load_eval_set(path: str | Path | None = None, n: int | None = None) -> list[dict]:
    """The held-out problems (``oar_lite/course/data/toy_eval.jsonl``), optionally only the first ``n``."""
    path = Path(path) if path is not None else EVAL_PATH
    if not path.exists():
        raise ValueError(f"no evaluation set at {path}; run scripts/pretrain_toy.py to write it")
    with open(path) as f:
        problems = [json.loads(line) for line in f if line.strip()]
    return problems[:n] if n is not None else problems


def write_eval_set(problems: Sequence[dict], path: str | Path | None = None) -> Path:
    """Write problems as JSONL (one dict a line); returns the path."""
    path = Path(path) if path is not None else EVAL_PATH
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        f.writelines(json.dumps(p, sort_keys=True) + "\n" for p in problems)
    return path


def max_new_tokens(digits: int, filler_rate: float = 0.3, max_fillers: int = 2, scratch: int = 0) -> int:
    """A completion length cap that a well-formed chain for ``digits``-digit operands fits
    (with ``scratch`` scratch words in front: one token each, the space after it another)."""
    return digits * 9 + (digits + 1) * 2 * max_fillers + digits + 6 + 2 * scratch


@torch.no_grad()
def evaluate(model, tokenizer, problems: Sequence[dict], *, group_size: int = 1, temperature: float = GREEDY,
             batch_size: int = 64, seed: int = 0, max_new: int | None = None, progress: bool = False) -> dict:
    """`oar_lite.evaluate.evaluate` on toy problems with the toy's answer format and room for
    the longest chain (`max_new_tokens`) unless ``max_new``; its keys plus ``parsed``, the
    share of completions `parse_chain` reads."""
    if not problems:
        raise ValueError("problems is empty")
    cap = max_new or max(max_new_tokens(p.get("digits", len(str(p["a"])))) for p in problems)
    return evaluate_model(model, tokenizer, problems, group_size=group_size, temperature=temperature, seed=seed,
                          max_new_tokens=cap, batch_size=batch_size, formats=FORMATS,
                          shares={"parsed": lambda c: parse_chain(c) is not None}, progress=progress)
