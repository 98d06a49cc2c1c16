"""`oar_lite.attribution.outcome` and `spans`: P_final's modes, eval mode, and the input checks."""
import pytest
import torch
from conftest import PAD, tiny_llama

import oar_lite as ol


def test_eval_mode_reaches_every_submodule_and_restores_each():
    """A model in eval mode with one submodule left in train mode (as after a user's
    ``model.layers[0].train()``) is all eval inside the block, and each module gets its own
    mode back after; an all-eval model is left alone (``eval()`` not called)."""
    model = tiny_llama().eval()
    model.model.layers[0].train()
    modes = [m.training for m in model.modules()]
    with ol.attribution.eval_mode(model):
        assert not any(m.training for m in model.modules())
    assert [m.training for m in model.modules()] == modes
    model.eval()
    model.eval = None  # calling it would raise
    with ol.attribution.eval_mode(model):
        assert not any(m.training for m in model.modules())


@pytest.mark.parametrize("reasoning,answer,match", [
    (slice(5, 5), slice(24, 27), "empty or out of range"),
    (slice(5, 22), slice(24, 40), "empty or out of range"),
    (slice(5, 22), slice(10, 12), "must start at or after"),
    (slice(-3, 22), slice(24, 27), "empty or out of range"),
    ((5, 22), slice(24, 27), "must be a slice"),
])
def test_bad_spans_raise(llama, sequence, reasoning, answer, match):
    ids, _, _ = sequence
    with pytest.raises(ValueError, match=match):
        ol.perturbation_scores(llama, ids, reasoning, answer, pad_token_id=PAD)
    with pytest.raises(ValueError, match=match):
        ol.gradient_scores(llama, ids, reasoning, answer)


def test_bad_mode_method_and_shapes(llama, sequence):
    ids, reasoning, answer = sequence
    with pytest.raises(ValueError, match="unknown P_final mode"):
        ol.perturbation_scores(llama, ids, reasoning, answer, mode="first", pad_token_id=PAD)
    with pytest.raises(ValueError, match="unknown method"):
        ol.token_scores("oar-x", llama, ids, reasoning, answer)
    with pytest.raises(ValueError, match="takes no P_final mode"):
        ol.method_of("entropy:last")
    with pytest.raises(ValueError, match=r"1-D tensor \[T\]"):
        ol.perturbation_scores(llama, ids[None], reasoning, answer, pad_token_id=PAD)
    bad = torch.zeros(1, 30, dtype=torch.bool); bad[0, [24, 26]] = True  # an answer must be one run
    ok = torch.zeros(1, 30, dtype=torch.bool); ok[0, 3:9] = True  # (the reasoning may have holes: test_scoring)
    with pytest.raises(ValueError, match="answer_mask row must be one contiguous run"):
        ol.token_weights(llama, ids[None], torch.ones(1, 30), ok, bad, method="oar-p", pad_token_id=PAD)


def test_final_outcome_is_what_the_naive_loop_reads(sequence):
    """`final_outcome` is P_final of the whole sequence: for ``last`` the log-probs at the
    position before the answer, for ``answer_joint`` the mean log-prob of the answer tokens."""
    import torch.nn.functional as F

    model = tiny_llama()
    ids, _, answer = sequence
    with torch.no_grad():
        logits = model(ids[None]).logits[0]
    torch.testing.assert_close(ol.final_outcome(model, ids, answer, mode="last"),
                               F.log_softmax(logits[answer.start - 1], -1))
    reads = F.log_softmax(logits[answer.start - 1: answer.stop - 1], -1).gather(-1, ids[answer][:, None])
    torch.testing.assert_close(ol.final_outcome(model, ids, answer, mode="answer_joint"), reads.mean())
    with pytest.raises(ValueError):
        ol.final_outcome(model, ids, answer, mode="median")
