"""The word-problem bank: answers checked independently, prompts, and the reward and
segmentation on completions SmolLM2-135M-Instruct really wrote."""
import re
from datetime import timedelta

import pytest

from oar_lite.course.problems import (
    INSTRUCTION,
    SHOTS,
    TEMPLATES,
    format_prompt,
    format_prompts,
    make_problems,
    prompt_messages,
)
from oar_lite.reward import math_reward
from oar_lite.segment import find_answer, segment_completion


# ----------------------------------------------------------------------------- answers

def _repeat_add(value, times):
    total = 0
    for _ in range(times):
        total += value
    return total


def _share(total, parts):
    each, rest = divmod(total, parts)
    assert rest == 0, f"{total} does not split evenly into {parts}"
    return each


def _minutes(delta):
    assert delta.total_seconds() % 60 == 0
    return int(delta.total_seconds() // 60)


# Each solver reads the integers in the question text, in order, and solves the problem its
# own way (repeated addition, divmod, timedelta), independently of the template's code.
SOLVERS = {
    "shopping_total": lambda n, price: _repeat_add(price, n),
    "shopping_change": lambda money, n, price: money - _repeat_add(price, n),
    "shopping_two_items": lambda a, pa, b, pb: _repeat_add(pa, a) + _repeat_add(pb, b),
    "ages_future": lambda age, years: age + years,
    "ages_times": lambda age, times, years: _repeat_add(age, times) + years,
    "ages_sum": lambda age, younger: age + (age - younger),
    "distance_speed": lambda speed, hours: _repeat_add(speed, hours),
    "distance_two_legs": lambda v1, h1, v2, h2: _repeat_add(v1, h1) + _repeat_add(v2, h2),
    "distance_left": lambda trip, speed, hours: trip - _repeat_add(speed, hours),
    "time_hours": lambda minutes, days: _share(_minutes(timedelta(minutes=minutes) * days), 60),
    "time_left": lambda hours, m1, m2: _minutes(timedelta(hours=hours) - timedelta(minutes=m1) - timedelta(minutes=m2)),
    "sharing_equal": lambda total, friends: _share(total, friends),
    "sharing_left": lambda total, each, kids: total - _repeat_add(each, kids),
    "sharing_groups": lambda red, blue, kids, away: _share(red + blue, kids) - away,
    "saving": lambda weekly, weeks, spent: _repeat_add(weekly, weeks) - spent,
}


def test_every_template_has_an_independent_solver():
    assert set(SOLVERS) == set(TEMPLATES)


@pytest.mark.parametrize("seed", range(40))
def test_answers_match_an_independent_solution_of_the_question_text(seed):
    for problem in make_problems(len(TEMPLATES), seed=seed):
        numbers = [int(x) for x in re.findall(r"\d+", problem.question)]
        expected = SOLVERS[problem.template](*numbers)
        assert problem.answer == expected, problem
        assert isinstance(problem.answer, int) and problem.answer > 0, problem
        # The numbers the template recorded are the ones the question states, in order.
        assert list(problem.numbers.values()) == numbers, problem


def test_bank_is_deterministic_and_covers_templates_evenly():
    a, b = make_problems(45, seed=3), make_problems(45, seed=3)
    assert a == b
    assert make_problems(45, seed=4) != a
    counts = {name: sum(p.template == name for p in a) for name in TEMPLATES}
    assert set(counts.values()) == {3}
    assert {p.steps for p in a} == {1, 2, 3}


def test_filters_by_template_and_steps():
    one_step = make_problems(20, seed=0, steps=1)
    assert {p.steps for p in one_step} == {1}
    assert {p.template for p in one_step} == {t for t, (s, _) in TEMPLATES.items() if s == 1}
    only = make_problems(5, seed=0, templates=["saving"])
    assert {p.template for p in only} == {"saving"}
    assert len(make_problems(0)) == 0


@pytest.mark.parametrize("kwargs, needle", [
    ({"n": -1}, "non-negative"),
    ({"n": 3, "templates": ["nope"]}, "unknown template"),
    ({"n": 3, "templates": []}, "unknown template"),
    ({"n": 3, "steps": 7}, "steps"),
])
def test_bad_arguments_raise(kwargs, needle):
    with pytest.raises(ValueError, match=needle):
        make_problems(**kwargs)


def test_shots_are_solved_correctly_in_the_expected_format():
    for question, solution, answer in SHOTS:
        assert math_reward(solution, answer) == 1.0
        assert find_answer(solution).format == "answer_is"
        # Every calculation line "a op b = c" in a worked example is right.
        for lhs, rhs in re.findall(r"(\d+(?: [-+*/] \d+)+) = (\d+)", solution):
            assert eval(lhs) == int(rhs), (lhs, rhs)  # noqa: S307 (our own literal text)


# ----------------------------------------------------------------------------- prompts

@pytest.fixture(scope="module")
def chat_tokenizer():
    """A tiny word-level tokenizer with a chat template, built in-process."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]")
    tok.chat_template = ("{% for m in messages %}<|{{ m.role }}|>{{ m.content }}\n{% endfor %}"
                         "{% if add_generation_prompt %}<|assistant|>{% endif %}")
    return tok


def test_prompt_messages_put_shots_before_the_question():
    p = make_problems(1, seed=0)[0]
    messages = prompt_messages(p, shots=2, system="Be brief.")
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert messages[-1]["content"] == f"{p.question}\n{INSTRUCTION}"
    assert messages[2]["content"] == SHOTS[0][1]
    assert [m["role"] for m in prompt_messages(p, shots=0)] == ["user"]
    with pytest.raises(ValueError, match="shots"):
        prompt_messages(p, shots=len(SHOTS) + 1)
    with pytest.raises(ValueError, match="question"):
        prompt_messages("  ")


def test_format_prompt_uses_the_chat_template_and_ends_with_the_assistant_turn(chat_tokenizer):
    p = make_problems(1, seed=0)[0]
    text = format_prompt(p, chat_tokenizer, shots=1)
    assert text.endswith("<|assistant|>")
    assert text.count("<|user|>") == 2 and p.question in text and SHOTS[0][0] in text
    assert format_prompts([p, p], chat_tokenizer, shots=1) == [text, text]


def test_format_prompt_without_chat_template_is_plain_text():
    class Plain:
        chat_template = None

    p = make_problems(1, seed=0)[0]
    text = format_prompt(p, Plain(), shots=0)
    assert text == f"Question: {p.question}\n{INSTRUCTION}\nAnswer:"
    assert format_prompt(p, Plain(), shots=1).count("Question:") == 2


# ----------------------------------------------------------------------------- real completions

# Completions SmolLM2-135M-Instruct (the Q4_1 wheel, float32) wrote for problems of this bank,
# greedy and sampled, copied verbatim (benchmarks/smollm2_baseline.py saves more). (completion, reference, reward,
# answer text or None when the completion has no parseable answer.)
REAL_COMPLETIONS = [
    ("It travels 6 * 40 = 240 km.\nThe answer is 240.", 240, 1.0, "240"),
    ("Zoe buys 9 apples at $10 each.\nShe spends 9 * 10 = 90 dollars.\nThe answer is 90.", 90, 1.0, "90"),
    ("Lena has $48 - 3 = $42 left.\nThe answer is 42.", 24, 0.0, "42"),
    ("In 22 years, she will be 22 * 39 = 892 years old.\nThe answer is 892.", 61, 0.0, "892"),
    ("To solve this problem, we need to find the total cost of the tickets and the total cost of the books.\n\n"
     "First, let's find the total cost of the tickets: 2 tickets * $9 each = $18\n"
     "Next, let's find the total cost of the books: 4 books * $5 each = $20\n\n"
     "Now, we add these two amounts together: 18 + 20 = 38\n\nSo, the answer is 38.\n\nThe answer is 38.", 38, 1.0, "38"),
    ("Noah cycles at 18 km per hour for 2 hours. To find out how many km he cycles, you can divide 18 km by "
     "2 hours, which gives 1.2 km. So, the answer is 1.2.", 62, 0.0, "1.2"),
    ("Solving this problem is a classic example of using logical thinking to find the solution. To begin, we "
     "need to determine the total cost of the 3 books. We can do this by multiplying the cost of 1 book by the "
     "price of 1 book. So, 3 * 6 = 18.\n\nNow, we need to find out how many dollars we have left. We can do this "
     "by dividing the total cost of 18 by the price of 1 book. This gives us 18 / 6 = 2.\n\nSo, Omar has $2 left."
     "\n\nThe answer is N = 2.", 15, 0.0, "2"),
    # Sampled at T=1: an equation and a unit after the marker (the second one's reference is
    # set to 90 here, not its problem's 2, to check that the unit does not cost the reward).
    ("Three cards are assigned to each child, with the other children having 8 other cards that are still in "
     "the toy box. Yuki has two 4-card hands total.\nEach child takes one of these four children's 4-card hands "
     "and so on until Yuki has 3 children left.\nThe answer is 3 * 4 = 12.", 15, 0.0, "12"),
    ("Tom practises 15 minutes each of 8 days * 1 day per... *... *... (doubling pattern) = 1 day * 2 * 30 days "
     "= 30 days * (doubling pattern) = 90 days * (base case) = 90 days * 1 day = 90 years total.\n"
     "The answer is 90 years.", 90, 1.0, "90"),
    ("Mia gives 2 stickers to each of 7 children to reduce them.\nMia will now have 37 - 2 = 23 stickers "
     "left.\nThe answer is 23.", 23, 1.0, "23"),
    # Off format: a truncated loop, and an answer stated without the marker.
    ("1. 10 x 4 = 40\n2. 40 + 23 = 63\n3. 10 x 4 = 40\n4. 40 + 23 = 63\n5. 10 x 4 = 40\n6. 40 + 23 = 63\n7. 10",
     17, 0.0, None),
    ("Tom practises piano for 15 minutes every day for 8 days. 15 * 8 = 120. 120 / 15 = 8.5. So, Tom practises "
     "piano for 8.5 hours every day.", 2, 0.0, None),
    ("1. First, we need to find out how many cookies Mia has left.\n6. So, the answer is 2 + 1 = 3.\n\nThe answe",
     1, 0.0, "3"),
]


@pytest.mark.parametrize("completion, reference, reward, answer", REAL_COMPLETIONS)
def test_reward_and_answer_on_real_smollm2_completions(completion, reference, reward, answer):
    assert math_reward(completion, reference) == reward
    match = find_answer(completion)
    assert (match.answer if match else None) == answer


def _char_offsets(text):
    """One "token" per character: exact offsets for a tokenizer-free check of the spans."""
    return [(i, i + 1) for i in range(len(text))]


@pytest.mark.parametrize("completion, reference, reward, answer", REAL_COMPLETIONS)
def test_segments_of_real_completions(completion, reference, reward, answer):
    seg = segment_completion(completion, _char_offsets(completion))
    if answer is None:
        assert seg is None
        return
    assert completion[seg.answer] == answer
    reasoning = completion[seg.reasoning]
    assert re.search(r"[Tt]he answer is", reasoning[-len("the answer is ") :]) is None
    assert completion[seg.reasoning.stop :].lower().startswith("the answer is")


def test_heldout_split_never_trains_on_a_heldout_question():
    from oar_lite.course.problems import heldout_split

    for by in ("numbers", "question"):
        train, held = heldout_split(per_template=5, train_size=400, by=by)
        assert not {p.question for p in train} & {p.question for p in held}
        templates = {p.template for p in held}
        assert templates == {t for t, (steps, _) in TEMPLATES.items() if steps == 1}
        assert all(sum(p.template == t for p in held) == 5 for t in templates)
        assert len({p.question for p in held}) == len(held)  # distinct questions
        assert heldout_split(per_template=5, train_size=400, by=by) == (train, held)  # deterministic
        assert len(train) < 400  # the pool lost the held-out questions it had drawn (distance_speed has only 50)
    with pytest.raises(ValueError, match="per_template"):
        heldout_split(per_template=0)
    with pytest.raises(ValueError, match=r"by must be one of \('numbers', 'question'\), got 'text'"):
        heldout_split(by="text")


def test_heldout_split_keeps_the_numbers_apart_and_the_old_split_did_not():
    """Issue 38: the SmolLM2 split removed held-out questions from the pool by their text only, so
    66 of its 96 held-out problems had a twin in the pool (same template and numbers, another
    name). The default split shares no (template, numbers) between held-out and pool, nor within
    the held-out set; ``by="question"`` still rebuilds the old one (the shipped runs used it)."""
    from oar_lite.course.problems import heldout_split, numbers_key

    settings = dict(steps=1, per_template=24, heldout_seed=2026, train_size=4096, train_seed=0)
    train, held = heldout_split(**settings)
    keys = [numbers_key(p) for p in held]
    assert len(held) == 96 and len(set(keys)) == 96
    assert not set(keys) & {numbers_key(p) for p in train}
    assert {p.template for p in train} == {p.template for p in held}  # every template still trains

    old_train, old_held = heldout_split(**settings, by="question")
    assert len(old_train) == 3541  # the shipped runs' pool (their settings say train_pool 3541)
    twins = [p for p in old_held if numbers_key(p) in {numbers_key(q) for q in old_train}]
    assert len(twins) == 66
    twin = twins[0]
    other = next(q for q in old_train if numbers_key(q) == numbers_key(twin))
    assert other.question != twin.question and other.answer == twin.answer  # another name, the same sum

    assert numbers_key(held[0]) == (held[0].template, tuple(sorted(held[0].numbers.items())))
    with pytest.raises(ValueError, match="expected a Problem"):
        numbers_key({"template": "x"})


def test_dataset_rows_are_chat_prompts_with_the_answer():
    from oar_lite.course.problems import dataset_rows

    problems = make_problems(3, seed=1)
    rows = dataset_rows(problems, shots=1)
    assert [r["answer"] for r in rows] == [str(p.answer) for p in problems]
    assert rows[0]["prompt"] == prompt_messages(problems[0], shots=1)
