"""Arithmetic word problems with exact integer answers (one to three steps about shopping,
ages, distances, time, sharing or saving), written by the project, and their prompts.

`make_problems` is deterministic in its seed, so a benchmark, a test and a notebook see the
same problems. `format_prompt` asks for step-by-step reasoning ending in ``The answer is N.``
(`oar_lite.segment`'s ``"answer_is"`` format); the reward is `oar_lite.reward.math_reward`
against ``problem.answer``. `load_gsm8k` gives GSM8K rows for TRL with the same prompts.
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Callable, Sequence

INSTRUCTION = 'Solve it step by step, then write "The answer is" and the number.'
"""Follows every question. (No placeholder such as ``<number>``: SmolLM2 copies it verbatim.)"""

SHOTS = (
    ("Kim buys 4 pens at $3 each. She pays with $20. How many dollars does she get back?",
     "The pens cost 4 * 3 = 12 dollars.\nShe gets back 20 - 12 = 8 dollars.\nThe answer is 8.", 8),
    ("A bus drives at 40 km per hour for 3 hours. How many km does it drive?",
     "It drives 40 * 3 = 120 km.\nThe answer is 120.", 120),
    ("Ben is 9 years old. His sister is 3 years older. What is the sum of their ages?",
     "His sister is 9 + 3 = 12 years old.\nTogether they are 9 + 12 = 21 years old.\nThe answer is 21.", 21),
)
"""Worked examples ``(question, solution, answer)``, shown as earlier chat turns: they teach
a small model the format and short, line-per-step solutions."""


@dataclass(frozen=True)
class Problem:
    """One word problem: its text, exact answer, `TEMPLATES` key, arithmetic steps (1 to 3)
    and the values the template drew, by name, so the answer can be checked."""

    question: str
    answer: int
    template: str
    steps: int
    numbers: dict = field(default_factory=dict)


_NAMES = ("Mia", "Leo", "Ava", "Noah", "Zoe", "Omar", "Lena", "Ravi", "Ines", "Tom", "Yuki", "Sam")
_ITEMS = ("pens", "notebooks", "apples", "tickets", "books", "cups")
_SHARE_ITEMS = ("cookies", "stickers", "marbles", "pencils", "cards", "stamps")


def _count(n: int, word: str) -> str:
    """``"1 hour"``, ``"3 hours"``."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _pronoun(name: str) -> str:
    return "she" if name in ("Mia", "Ava", "Zoe", "Lena", "Ines", "Yuki") else "he"


# Each template: rng -> (question, answer, numbers). Numbers are kept small (answers < 1000)
# so a 135M model has a fair chance; answers are positive integers by construction.

def _shopping_total(rng: random.Random):
    name, many = rng.choice(_NAMES), rng.choice(_ITEMS)
    n, price = rng.randint(2, 9), rng.randint(2, 12)
    q = f"{name} buys {n} {many} at ${price} each. How many dollars does {_pronoun(name)} spend?"
    return q, n * price, {"count": n, "price": price}


def _shopping_change(rng: random.Random):
    name, many = rng.choice(_NAMES), rng.choice(_ITEMS)
    n, price = rng.randint(2, 6), rng.randint(2, 9)
    money = n * price + rng.randint(1, 30)
    q = (f"{name} has ${money}. {_pronoun(name).capitalize()} buys {n} {many} at ${price} each. "
         f"How many dollars does {_pronoun(name)} have left?")
    return q, money - n * price, {"money": money, "count": n, "price": price}


def _shopping_two_items(rng: random.Random):
    name = rng.choice(_NAMES)
    many_a, many_b = rng.sample(_ITEMS, 2)
    a, pa, b, pb = rng.randint(2, 5), rng.randint(2, 9), rng.randint(2, 5), rng.randint(2, 9)
    q = (f"{name} buys {a} {many_a} at ${pa} each and {b} {many_b} at ${pb} each. "
         f"How many dollars does {_pronoun(name)} spend in total?")
    return q, a * pa + b * pb, {"count_a": a, "price_a": pa, "count_b": b, "price_b": pb}


def _ages_future(rng: random.Random):
    name = rng.choice(_NAMES)
    age, years = rng.randint(4, 40), rng.randint(2, 25)
    q = f"{name} is {age} years old. How old will {_pronoun(name)} be in {years} years?"
    return q, age + years, {"age": age, "years": years}


def _ages_times(rng: random.Random):
    name = rng.choice(_NAMES)
    age, times, years = rng.randint(3, 12), rng.randint(2, 4), rng.randint(2, 15)
    q = (f"{name} is {age} years old. {name}'s aunt is {times} times as old as {name}. "
         f"How old will the aunt be in {years} years?")
    return q, age * times + years, {"age": age, "times": times, "years": years}


def _ages_sum(rng: random.Random):
    a, b = rng.sample(_NAMES, 2)
    age, younger = rng.randint(8, 40), rng.randint(1, 7)
    q = f"{a} is {age} years old. {b} is {_count(younger, 'year')} younger than {a}. What is the sum of their ages?"
    return q, age + (age - younger), {"age": age, "younger": younger}


def _distance_speed(rng: random.Random):
    speed, hours = rng.randint(3, 12) * 5, rng.randint(2, 6)
    q = f"A train travels at {speed} km per hour for {hours} hours. How many km does it travel?"
    return q, speed * hours, {"speed": speed, "hours": hours}


def _distance_two_legs(rng: random.Random):
    name = rng.choice(_NAMES)
    v1, h1, v2, h2 = rng.randint(8, 20), rng.randint(1, 4), rng.randint(8, 20), rng.randint(1, 4)
    q = (f"{name} cycles at {v1} km per hour for {_count(h1, 'hour')}, then at {v2} km per hour for {_count(h2, 'hour')}. "
         f"How many km does {_pronoun(name)} cycle in total?")
    return q, v1 * h1 + v2 * h2, {"speed_1": v1, "hours_1": h1, "speed_2": v2, "hours_2": h2}


def _distance_left(rng: random.Random):
    speed, hours = rng.randint(4, 12) * 10, rng.randint(2, 5)
    trip = speed * hours + rng.randint(1, 20) * 10
    q = (f"A trip is {trip} km long. A car drives at {speed} km per hour for {hours} hours. "
         f"How many km of the trip are left?")
    return q, trip - speed * hours, {"trip": trip, "speed": speed, "hours": hours}


def _time_hours(rng: random.Random):
    name = rng.choice(_NAMES)
    minutes = rng.choice((15, 20, 30, 45, 60, 90))
    unit = 60 // math.gcd(minutes, 60)  # days must make a whole number of hours
    days = unit * rng.randint(1, max(1, 12 // unit))
    q = (f"{name} practises piano for {minutes} minutes every day for {_count(days, 'day')}. "
         f"How many hours does {_pronoun(name)} practise in total?")
    return q, minutes * days // 60, {"minutes": minutes, "days": days}


def _time_left(rng: random.Random):
    name = rng.choice(_NAMES)
    hours, m1, m2 = rng.randint(2, 4), rng.randint(2, 6) * 10, rng.randint(2, 6) * 5
    q = (f"{name} has {hours} hours of free time. {_pronoun(name).capitalize()} reads for {m1} minutes "
         f"and then draws for {m2} minutes. How many minutes of free time are left?")
    return q, hours * 60 - m1 - m2, {"hours": hours, "minutes_1": m1, "minutes_2": m2}


def _sharing_equal(rng: random.Random):
    things = rng.choice(_SHARE_ITEMS)
    friends, each = rng.randint(2, 9), rng.randint(2, 12)
    q = f"{friends * each} {things} are shared equally among {friends} friends. How many {things} does each friend get?"
    return q, each, {"total": friends * each, "friends": friends}


def _sharing_left(rng: random.Random):
    name, things = rng.choice(_NAMES), rng.choice(_SHARE_ITEMS)
    kids, each = rng.randint(3, 9), rng.randint(2, 6)
    total = kids * each + rng.randint(1, 25)
    q = (f"{name} has {total} {things}. {_pronoun(name).capitalize()} gives {each} {things} to each of "
         f"{kids} children. How many {things} does {name} have left?")
    return q, total - kids * each, {"total": total, "each": each, "kids": kids}


def _sharing_groups(rng: random.Random):
    kids, each, away = rng.randint(2, 6), rng.randint(4, 10), rng.randint(1, 3)
    red = rng.randint(1, kids * each - 1)
    blue = kids * each - red
    q = (f"A box has {red} red marbles and {blue} blue marbles. They are shared equally among {kids} "
         f"children. Each child then gives away {_count(away, 'marble')}. How many marbles does each child have now?")
    return q, (red + blue) // kids - away, {"red": red, "blue": blue, "kids": kids, "away": away}


def _saving(rng: random.Random):
    name = rng.choice(_NAMES)
    weekly, weeks = rng.randint(3, 15), rng.randint(3, 10)
    spent = rng.randint(1, weekly * weeks - 1)
    q = (f"{name} saves ${weekly} every week for {weeks} weeks. Then {_pronoun(name)} spends ${spent} "
         f"on a gift. How many dollars does {_pronoun(name)} have left?")
    return q, weekly * weeks - spent, {"weekly": weekly, "weeks": weeks, "spent": spent}


TEMPLATES: dict[str, tuple[int, Callable[[random.Random], tuple]]] = {
    "shopping_total": (1, _shopping_total),
    "shopping_change": (2, _shopping_change),
    "shopping_two_items": (3, _shopping_two_items),
    "ages_future": (1, _ages_future),
    "ages_times": (2, _ages_times),
    "ages_sum": (2, _ages_sum),
    "distance_speed": (1, _distance_speed),
    "distance_two_legs": (3, _distance_two_legs),
    "distance_left": (2, _distance_left),
    "time_hours": (2, _time_hours),
    "time_left": (3, _time_left),
    "sharing_equal": (1, _sharing_equal),
    "sharing_left": (2, _sharing_left),
    "sharing_groups": (3, _sharing_groups),
    "saving": (2, _saving),
}
"""Template name -> (steps, generator). Steps = arithmetic operations to the answer."""


def make_problems(
    n: int,
    *,
    seed: int = 0,
    templates: Sequence[str] | None = None,
    steps: int | Sequence[int] | None = None,
) -> list[Problem]:
    """``n`` `Problem`s, the same ones for the same arguments.

    Templates take turns (a seeded shuffle of their order, repeated), so any ``n`` covers
    them evenly. ``templates`` limits them to these `TEMPLATES` names, ``steps`` to those
    with this many steps (an int or a collection); a ValueError when none is left.
    """
    if not isinstance(n, int) or n < 0:
        raise ValueError(f"n must be a non-negative int, got {n!r}")
    names = list(TEMPLATES) if templates is None else list(templates)
    unknown = [t for t in names if t not in TEMPLATES]
    if unknown or (templates is not None and not names):
        raise ValueError(f"unknown template(s) {unknown or names!r}; expected names from {sorted(TEMPLATES)}")
    if steps is not None:
        wanted = {steps} if isinstance(steps, int) else set(steps)
        names = [t for t in names if TEMPLATES[t][0] in wanted]
        if not names:
            raise ValueError(f"no template has steps in {sorted(wanted)}; templates have 1, 2 or 3 steps")
    rng = random.Random(seed)
    order = rng.sample(names, len(names))
    problems = []
    for i in range(n):
        name = order[i % len(order)]
        n_steps, generate = TEMPLATES[name]
        question, answer, numbers = generate(rng)
        problems.append(Problem(question, int(answer), name, n_steps, numbers))
    return problems


def numbers_key(problem: Problem) -> tuple:
    """``(template, ((name, value), ...))``: what a problem asks, whatever its name and items.
    Two problems with the same key have the same answer (``"Mia buys 3 pens at $4"`` and
    ``"Leo buys 3 cups at $4"``): one trained on teaches the other's sum."""
    if not isinstance(problem, Problem):
        raise ValueError(f"expected a Problem, got {type(problem).__name__}")
    return problem.template, tuple(sorted(problem.numbers.items()))


SPLIT_BY = ("numbers", "question")
"""What `heldout_split` keeps apart: ``"numbers"`` (`numbers_key`, the default) or ``"question"``
(the text only: the split of the SmolLM2 runs shipped before issue 38, kept to reconstruct them)."""


def heldout_split(*, steps: int | Sequence[int] | None = 1, per_template: int = 24, heldout_seed: int = 2026,
                  train_size: int = 4096, train_seed: int = 0, by: str = "numbers") -> tuple[list[Problem], list[Problem]]:
    """``(train, heldout)``: ``per_template`` distinct problems of each template with ``steps``
    steps, drawn with ``heldout_seed``, and a training pool of ``train_size`` draws with
    ``train_seed`` from which every held-out problem is removed, so none is ever trained on.

    ``by="numbers"`` (the default) keeps the held-out problems apart by `numbers_key`: no two
    held-out problems and no pool problem share a template and its numbers, so no held-out
    answer is trained on under another name. ``by="question"`` compares the text only (the
    SmolLM2 runs shipped before issue 38 used it: 66 of their 96 held-out problems have a twin
    in that pool, another name with the same numbers). A template with fewer distinct problems
    gives what it has (``distance_speed`` has 50), and the pool then keeps fewer of that template.
    """
    for name, value, low in (("per_template", per_template, 1), ("train_size", train_size, 0)):
        if not isinstance(value, int) or value < low:
            raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
    if by not in SPLIT_BY:
        raise ValueError(f"by must be one of {SPLIT_BY}, got {by!r}")
    key = numbers_key if by == "numbers" else (lambda p: p.question)
    seen, heldout = set(), []
    for p in make_problems(40 * per_template, seed=heldout_seed, steps=steps):
        if key(p) in seen or sum(q.template == p.template for q in heldout) >= per_template:
            continue
        seen.add(key(p))
        heldout.append(p)
    train = [p for p in make_problems(train_size, seed=train_seed, steps=steps) if key(p) not in seen]
    return train, heldout


def dataset_rows(problems: Sequence[Problem], *, shots: int = 2) -> list[dict]:
    """TRL rows, ``{"prompt": chat messages (`prompt_messages`), "answer": "N"}``, one per problem."""
    return [{"prompt": prompt_messages(p, shots=shots), "answer": str(p.answer)} for p in problems]


def prompt_messages(
    problem: Problem | str, *, shots: int = 2, instruction: str = INSTRUCTION, system: str | None = None
) -> list[dict]:
    """The chat messages (TRL's conversational format) for one problem: an optional system
    turn, ``shots`` worked examples from `SHOTS`, then the question and ``instruction``."""
    question = problem.question if isinstance(problem, Problem) else problem
    if not isinstance(question, str) or not question.strip():
        raise ValueError(f"problem must be a Problem or a non-empty question string, got {problem!r}")
    if not isinstance(shots, int) or not 0 <= shots <= len(SHOTS):
        raise ValueError(f"shots must be an int in [0, {len(SHOTS)}], got {shots!r}")

    def ask(q: str) -> dict:
        return {"role": "user", "content": f"{q}\n{instruction}" if instruction else q}

    messages = [{"role": "system", "content": system}] if system else []
    for shot_question, solution, _ in SHOTS[:shots]:
        messages += [ask(shot_question), {"role": "assistant", "content": solution}]
    messages.append(ask(question))
    return messages


def format_prompt(
    problem: Problem | str, tokenizer, *, shots: int = 2, instruction: str = INSTRUCTION, system: str | None = None
) -> str:
    """The prompt text of `prompt_messages` for `oar_lite.rollout.sample_completions`: through
    the tokenizer's chat template, opening the assistant turn (sample with
    ``add_special_tokens=False``), or without one as ``"Question: ...\nAnswer:"`` turns.
    """
    messages = prompt_messages(problem, shots=shots, instruction=instruction, system=system)
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    parts = [m["content"] for m in messages if m["role"] == "system"]
    for m in messages:
        if m["role"] == "user":
            parts.append(f"Question: {m['content']}")
        elif m["role"] == "assistant":
            parts[-1] += f"\nAnswer: {m['content']}"
    return "\n\n".join(parts) + "\nAnswer:"


def format_prompts(problems: Sequence[Problem], tokenizer, **options) -> list[str]:
    """`format_prompt` for each problem."""
    return [format_prompt(p, tokenizer, **options) for p in problems]


# ----------------------------------------------------------------------------- GSM8K, for TRL

GSM8K_FORMATS = ("answer_is", "boxed", "hash")
"""Where a GSM8K answer is looked for: the asked-for format, then what math models also write."""


def gsm8k_example(example: dict, *, shots: int = 2) -> dict:
    """One ``openai/gsm8k`` row (an ``answer`` ending in ``#### N``) as a TRL row: ``prompt``
    (`prompt_messages`) and ``answer``, ``N`` without thousands separators."""
    if not isinstance(example, dict) or "question" not in example or "####" not in str(example.get("answer", "")):
        raise ValueError("expected a GSM8K row with 'question' and an 'answer' that ends in '#### <number>', "
                         f"got {example!r:.200}")
    return {"prompt": prompt_messages(example["question"], shots=shots),
            "answer": example["answer"].split("####")[-1].strip().replace(",", "")}


def load_gsm8k(split: str = "train", *, n: int | None = None, shots: int = 2):
    """GSM8K (``openai/gsm8k``, config ``main``) through `datasets` as TRL rows
    (`gsm8k_example`); the first ``n`` rows if given. Needs the Hugging Face hub."""
    from datasets import load_dataset

    data = load_dataset("openai/gsm8k", "main", split=split)
    if n is not None:
        data = data.select(range(min(n, len(data))))
    return data.map(lambda ex: gsm8k_example(ex, shots=shots), remove_columns=data.column_names)
