"""Answer segmentation and the verifiable reward."""
import pytest
import torch
from conftest import char_tokenizer

from oar_lite import (find_answer, math_reward, math_rewards, segment_completion, segment_completion_ids,
                      segments_to_masks)


def char_offsets(text):
    return [(i, i + 1) for i in range(len(text))]


@pytest.mark.parametrize("text,fmt,answer,marker", [
    ("3+4=7 carry 0 A=127", "a_equals", "127", "A="),
    ("so x = 2 and \\boxed{\\frac{1}{2}} done", "boxed", "\\frac{1}{2}", "\\boxed{"),
    ("Step 1: 5*3 = 15.\nThe answer is 15.", "answer_is", "15", "The answer is"),
    ("He pays 3.5 dollars. The final answer is 3.5.", "answer_is", "3.5", "The final answer is"),
    ("The answer is $42$.", "answer_is", "42", "The answer is"),
    ("48/2 = 24 clips\n#### 72", "hash", "72", "####"),
])
def test_find_answer_formats(text, fmt, answer, marker):
    m = find_answer(text)
    assert m.format == fmt and m.answer == answer
    assert text[m.answer_start : m.answer_end] == answer
    assert text[m.marker_start :].startswith(marker)


def test_last_answer_wins_and_boxed_preferred():
    assert find_answer("A=12 no wait A=13").answer == "13"
    assert find_answer("The answer is \\boxed{5}.").format == "boxed"
    assert find_answer("\\boxed{1} then \\boxed{2}").answer == "2"
    assert find_answer("\\boxed{ unbalanced", ("boxed",)) is None


@pytest.mark.parametrize("text", ["", "I think it is seven", "A= nothing", "The answer is", "\\boxed{}"])
def test_no_answer_is_none(text):
    assert find_answer(text) is None
    assert segment_completion(text, char_offsets(text)) is None


def test_token_spans_with_multi_char_tokens():
    text = "7+5=12 so A=12"
    # tokens: "7+5", "=12", " so ", "A", "=1", "2"
    cuts = [(0, 3), (3, 6), (6, 10), (10, 11), (11, 13), (13, 14)]
    seg = segment_completion(text, cuts)
    assert seg.reasoning == slice(0, 3) and seg.answer == slice(4, 6) and seg.answer_text == "12"


def test_segment_ids_with_a_real_tokenizer(chars):
    ids = chars("12+5=17 A=17").input_ids
    seg = segment_completion_ids(chars, ids)
    assert chars.decode(ids[seg.reasoning]) == "12+5=17 "
    assert chars.decode(ids[seg.answer]) == "17"
    shifted = seg.shift(3)
    assert shifted.answer == slice(seg.answer.start + 3, seg.answer.stop + 3)


def test_segments_to_masks():
    seg = segment_completion("ab A=5", char_offsets("ab A=5"))
    reasoning, answer = segments_to_masks([seg, None], 2, 10)
    assert reasoning.shape == (2, 10) and reasoning.dtype == torch.bool
    assert reasoning[0].nonzero().flatten().tolist() == [2, 3, 4]
    assert answer[0].nonzero().flatten().tolist() == [7]
    assert not reasoning[1].any() and not answer[1].any()
    with pytest.raises(ValueError, match="past seq_len"):
        segments_to_masks([seg], 8, 10)


def test_bad_formats_raise():
    with pytest.raises(ValueError, match="unknown answer format"):
        find_answer("A=1", ("latex",))
    with pytest.raises(ValueError, match="sequence of format names"):
        find_answer("A=1", "a_equals")


@pytest.mark.parametrize("completion,gold,reward", [
    ("carry 1 A=127", "127", 1.0),
    ("carry 1 A=128", "127", 0.0),
    ("The answer is 1,234.", 1234, 1.0),
    ("The answer is \\boxed{\\frac{1}{2}}", "0.5", 1.0),
    ("#### 72", "72", 1.0),
    ("no answer here 127", "127", 0.0),
])
def test_math_reward(completion, gold, reward):
    assert math_reward(completion, gold) == reward


def test_reward_never_executes_model_text(tmp_path):
    target = tmp_path / "pwned"
    evil = f"The answer is __import__('pathlib').Path('{target}').touch()."
    assert math_reward(evil, "1") == 0.0
    assert not target.exists()
    assert math_rewards(["A=1", "A=2"], [1, 1]) == [1.0, 0.0]
    with pytest.raises(ValueError, match="one each"):
        math_rewards(["A=1"], [1, 2])
