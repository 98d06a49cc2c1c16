"""Sampling groups of completions: layout, masks and reproducibility."""
import pytest
import torch
from conftest import tiny_llama

from oar_lite import sample_completions


@pytest.fixture(scope="module")
def model():
    return tiny_llama(dtype=torch.float32)


def test_layout_and_masks(model, chars):
    prompts = ["12+5=", "7+30="]
    ro = sample_completions(model, chars, prompts, group_size=3, max_new_tokens=12, seed=0)
    B = len(ro)
    assert B == 6 and ro.prompts == [p for p in prompts for _ in range(3)]
    P = ro.prompt_length
    assert ro.input_ids.shape[1] == P + ro.completion_mask.shape[1]
    assert torch.equal(ro.attention_mask[:, P:], ro.completion_mask)
    assert ro.attention_mask[0, :P].sum() == len(chars("12+5=").input_ids)
    for row in range(B):
        n = int(ro.completion_mask[row].sum())
        assert ro.completion_ids[row] == ro.input_ids[row, P : P + n].tolist()
        assert ro.completion_mask[row, :n].all() and not ro.completion_mask[row, n:].any()
        if chars.eos_token_id in ro.completion_ids[row]:
            assert ro.completion_ids[row].index(chars.eos_token_id) == n - 1
    reasoning, answer = ro.masks()
    assert reasoning.shape == ro.input_ids.shape and not (reasoning & answer).any()


def test_seed_reproduces_and_greedy_is_deterministic(model, chars):
    a = sample_completions(model, chars, ["1+1="], group_size=4, max_new_tokens=8, seed=3)
    b = sample_completions(model, chars, ["1+1="], group_size=4, max_new_tokens=8, seed=3)
    assert torch.equal(a.input_ids, b.input_ids)
    g = sample_completions(model, chars, ["1+1="], group_size=2, max_new_tokens=8, temperature=0)
    assert g.completion_ids[0] == g.completion_ids[1]


def test_bad_arguments(model, chars):
    with pytest.raises(ValueError, match="prompts is empty"):
        sample_completions(model, chars, [])
    with pytest.raises(ValueError, match="group_size"):
        sample_completions(model, chars, ["1+1="], group_size=0)


def test_sequence_unpads_a_row_and_shifts_its_spans():
    from oar_lite import find_answer
    from oar_lite.course import toy

    model, tok = toy.load_model()
    prompts = ["49+20:", "2626+4546:"]  # different lengths: the first row is left-padded
    ro = sample_completions(model, tok, prompts, group_size=2, max_new_tokens=60, temperature=0,
                            formats=toy.FORMATS, seed=0)
    checked = 0
    for row in range(len(ro)):
        ids, reasoning, answer = ro.sequence(row)
        assert ids.tolist() == tok(ro.prompts[row]).input_ids + ro.completion_ids[row]
        ex = toy.example(tok, ro.prompts[row], ro.completion_ids[row])
        if ex is not None:
            assert (reasoning, answer) == (ex["reasoning"], ex["answer"])
            assert tok.decode(ids[answer]) == find_answer(ro.completions[row], toy.FORMATS).answer
            checked += 1
    assert checked >= 2
    ro.segments[0] = None
    assert ro.sequence(0)[1:] == (None, None)
    with pytest.raises(ValueError, match="row"):
        ro.sequence(len(ro))



def test_a_string_prompt_is_refused(model, chars):
    with pytest.raises(ValueError, match="a list of prompt strings"):
        sample_completions(model, chars, "12+5=", group_size=2, max_new_tokens=3)


@pytest.mark.parametrize("top_p", [0.0, -0.5, 1.5, float("nan")])
def test_bad_top_p_is_refused(model, chars, top_p):
    with pytest.raises(ValueError, match="top_p"):
        sample_completions(model, chars, ["12+5="], group_size=2, max_new_tokens=3, top_p=top_p)


@pytest.mark.parametrize("setting", [dict(temperature=float("nan")), dict(temperature=float("inf")),
                                     dict(group_size=0), dict(max_new_tokens=0)])
def test_bad_sampling_settings_are_refused(model, chars, setting):
    with pytest.raises(ValueError, match=next(iter(setting))):
        sample_completions(model, chars, ["12+5="], **{"group_size": 2, "max_new_tokens": 3, **setting})
