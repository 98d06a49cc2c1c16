"""`oar_lite.evaluation`: held-out accuracy, and the toy world's wrapper of it."""
import pytest

from oar_lite import toy


def test_evaluate_reports_accuracy_and_mixed_groups(shipped):
    model, tokenizer = shipped
    problems = toy.load_eval_set(n=4)
    out = toy.evaluate(model, tokenizer, problems, group_size=4, temperature=1.0, seed=0)
    assert out["n"] == 4 and 0 <= out["accuracy"] <= 1 and 0 < out["parsed"] <= 1
    assert out["mixed"] + out["solved"] + out["failed"] == pytest.approx(1.0)
    assert out == toy.evaluate(model, tokenizer, problems, group_size=4, temperature=1.0, seed=0)


def test_toy_evaluate_is_train_evaluate_with_the_toy_settings():
    from oar_lite.evaluation import evaluate

    model, tokenizer = toy.load_model()
    problems = toy.load_eval_set(n=6)
    cap = max(toy.max_new_tokens(p["digits"]) for p in problems)
    general = evaluate(model, tokenizer, problems, group_size=3, temperature=1.0, seed=0, max_new_tokens=cap,
                       batch_size=4, formats=toy.FORMATS)
    assert set(general) == {"accuracy", "answer_rate", "mixed", "solved", "failed", "mean_tokens", "n"}
    on_toy = toy.evaluate(model, tokenizer, problems, group_size=3, temperature=1.0, seed=0, batch_size=4)
    assert on_toy == {**general, "parsed": on_toy["parsed"]} and 0 < on_toy["parsed"] <= 1
    assert general["mixed"] + general["solved"] + general["failed"] == pytest.approx(1.0)
