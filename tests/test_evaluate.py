"""Held-out accuracy (`oar_lite.evaluate`): `evaluate`, the one evaluator, and the toy world's
wrapper of it; its per-problem results equal the reward of the sampled completions, with fixed
draws for a seed and the caller's random state left alone."""
import pytest
import torch

from oar_lite.course import toy
from oar_lite.evaluate import evaluate
from oar_lite.reward import math_reward
from oar_lite.rollout import sample_completions


@pytest.fixture(scope="module")
def toy_policy():
    return toy.load_model()


def _problems(n=5):
    held = toy.make_problems(n, seed=3, digits=2)
    return [p["prompt"] for p in held], [p["answer"] for p in held]


def heldout(model, tok, prompts, answers, **options):
    return evaluate(model, tok, [{"prompt": p, "answer": a} for p, a in zip(prompts, answers)], **options)


OPTIONS = dict(max_new_tokens=toy.max_new_tokens(2), formats=toy.FORMATS, add_special_tokens=True)


def test_results_are_the_rewards_of_the_completions(toy_policy):
    model, tok = toy_policy
    prompts, answers = _problems()
    got = heldout(model, tok, prompts, answers, temperature=1.0, group_size=3, seed=11, batch_size=2, **OPTIONS)
    # The same draws by hand: one call per chunk of 2 prompts, seeded seed + start.
    want, lengths = [], []
    for start in range(0, 5, 2):
        r = sample_completions(model, tok, prompts[start:start + 2], group_size=3, temperature=1.0, seed=11 + start,
                               max_new_tokens=OPTIONS["max_new_tokens"], formats=toy.FORMATS)
        for i in range(len(r) // 3):
            want.append([int(math_reward(r.completions[i * 3 + k], answers[start + i], formats=toy.FORMATS))
                         for k in range(3)])
            lengths.append([len(r.completion_ids[i * 3 + k]) for k in range(3)])
    assert got["correct"] == want and got["tokens"] == lengths
    assert got["accuracy"] == pytest.approx(sum(map(sum, want)) / 15)
    assert 0 < got["answer_rate"] <= 1  # the shipped toy model writes A=...


def test_same_seed_same_draws_and_the_callers_random_state_is_kept(toy_policy):
    model, tok = toy_policy
    prompts, answers = _problems()
    torch.manual_seed(0)
    first = heldout(model, tok, prompts, answers, temperature=1.0, group_size=2, seed=4, **OPTIONS)
    after = torch.rand(3)
    torch.manual_seed(0)
    second = heldout(model, tok, prompts, answers, temperature=1.0, group_size=2, seed=4, **OPTIONS)
    assert first == second
    torch.manual_seed(0)
    assert torch.equal(torch.rand(3), after)  # as if no evaluation had run
    other = heldout(model, tok, prompts, answers, temperature=1.0, group_size=2, seed=5, **OPTIONS)
    assert other["tokens"] != first["tokens"] or other["correct"] != first["correct"]


def test_greedy_is_deterministic_and_bad_input_is_refused(toy_policy):
    model, tok = toy_policy
    prompts, answers = _problems()
    a = heldout(model, tok, prompts, answers, **OPTIONS)
    assert a == heldout(model, tok, prompts, answers, seed=99, **OPTIONS)
    with pytest.raises(ValueError, match="one answer per prompt"):
        heldout(model, tok, prompts, answers, group_size=2, **OPTIONS)
    with pytest.raises(ValueError, match="no problems"):
        heldout(model, tok, [], [], **OPTIONS)
    with pytest.raises(ValueError, match="group_size"):
        heldout(model, tok, prompts, answers, temperature=1.0, group_size=0, **OPTIONS)


def test_evaluate_reports_accuracy_and_mixed_groups(shipped):
    model, tokenizer = shipped
    problems = toy.load_eval_set(n=4)
    out = toy.evaluate(model, tokenizer, problems, group_size=4, temperature=1.0, seed=0)
    assert out["n"] == 4 and 0 <= out["accuracy"] <= 1 and 0 < out["parsed"] <= 1
    assert out["mixed"] + out["solved"] + out["failed"] == pytest.approx(1.0)
    assert out == toy.evaluate(model, tokenizer, problems, group_size=4, temperature=1.0, seed=0)


def test_toy_evaluate_is_train_evaluate_with_the_toy_settings():
    model, tokenizer = toy.load_model()
    problems = toy.load_eval_set(n=6)
    cap = max(toy.max_new_tokens(p["digits"]) for p in problems)
    general = evaluate(model, tokenizer, problems, group_size=3, temperature=1.0, seed=0, max_new_tokens=cap,
                       batch_size=4, formats=toy.FORMATS)
    assert set(general) == {"accuracy", "answer_rate", "mixed", "solved", "failed", "mean_tokens", "n", "correct",
                            "answered", "tokens"}
    assert general["accuracy"] == sum(map(sum, general["correct"])) / 18 and len(general["tokens"]) == 6
    on_toy = toy.evaluate(model, tokenizer, problems, group_size=3, temperature=1.0, seed=0, batch_size=4)
    assert on_toy == {**general, "parsed": on_toy["parsed"]} and 0 < on_toy["parsed"] <= 1
    assert general["mixed"] + general["solved"] + general["failed"] == pytest.approx(1.0)
