"""The toy world: tokenizer, problems, chains, ground-truth labels, shipped model, benchmark."""
import random

import pytest
import torch

import oar_lite as ol
from oar_lite.course import toy
from oar_lite.course.toy import NEUTRAL as N, OUTSIDE as O, PIVOTAL as P, SUPPORT as S


# ------------------------------------------------------------------ tokenizer

def test_tokenizer_round_trip_and_offsets(tok):
    text = "473+258:3+8+0=11 hmm 7+5+1=13 4+2+1=07 so A=731"
    enc = tok(text, return_offsets_mapping=True)
    assert enc.input_ids[0] == tok.bos_token_id and enc.offset_mapping[0] == (0, 0)
    assert tok.decode(enc.input_ids, skip_special_tokens=True) == text
    pieces = [text[s:e] for s, e in enc.offset_mapping[1:]]
    assert "".join(pieces) == text
    assert "hmm" in pieces and "7" in pieces and " " in pieces  # words whole, digits and spaces single
    assert all(len(p) == 1 for p in pieces if not p.isalpha())
    ids = tok(text[8:], add_special_tokens=False).input_ids
    decoded, offsets = ol.completion_offsets(tok, ids)
    assert decoded == text[8:] and [decoded[s:e] for s, e in offsets] == pieces[8:]
    assert (tok.pad_token_id, tok.bos_token_id, tok.eos_token_id) == (0, 1, 2)
    assert tok("zebra").input_ids[1] == tok.unk_token_id


def test_tokenizer_saves_and_loads_offline(tok, tmp_path):
    from transformers import AutoTokenizer

    tok.save_pretrained(tmp_path)
    again = AutoTokenizer.from_pretrained(tmp_path, local_files_only=True)
    text = "12+34:2+4+0=06 ok 1+3+0=04 A=46"
    assert again(text).input_ids == tok(text).input_ids and again.pad_token == "<pad>"


# ------------------------------------------------------------------ problems and chains

def test_problems_are_reproducible_and_well_formed():
    a, b = toy.make_problems(50, seed=3, digits=(2, 5)), toy.make_problems(50, seed=3, digits=(2, 5))
    assert a == b
    assert a != toy.make_problems(50, seed=4, digits=(2, 5))
    assert len({p["prompt"] for p in a}) == 50
    for p in a:
        assert p["prompt"] == f"{p['a']}+{p['b']}:" and p["answer"] == str(p["a"] + p["b"])
        assert 2 <= p["digits"] == len(str(p["a"])) == len(str(p["b"])) <= 5
    assert {p["digits"] for p in toy.make_problems(20, seed=0, digits=3)} == {3}


def test_problems_exclude_and_errors():
    held = toy.make_problems(40, seed=0, digits=2)
    fresh = toy.make_problems(200, seed=1, digits=2, exclude=held)
    assert not {p["prompt"] for p in held} & {p["prompt"] for p in fresh}
    with pytest.raises(ValueError, match="digits"):
        toy.make_problems(3, seed=0, digits=(4, 2))
    with pytest.raises(ValueError, match="distinct"):
        toy.make_problems(82, seed=0, digits=1)


def _consistent(chain) -> bool:
    """Whether the answer is what the written chain implies (right or wrong)."""
    return chain.answer.lstrip("0") == chain.implied_answer.lstrip("0")


def test_chain_of_thought_is_correct_and_parses(tok):
    rng = random.Random(0)
    for p in toy.make_problems(30, seed=5, digits=(2, 5)):
        text = toy.chain_of_thought(p["a"], p["b"], rng=rng, filler_rate=0.5)
        chain = toy.parse_chain(text)
        assert chain is not None and chain.matches(p["a"], p["b"])
        assert chain.answer == chain.implied_answer == p["answer"]
        assert all(s.correct for s in chain.steps) and len(chain.steps) == p["digits"]
        assert toy.reward(text, p) == 1.0 and toy.reward(text, int(p["answer"]) + 1) == 0.0
        seg = ol.segment_completion_ids(tok, tok(text, add_special_tokens=False).input_ids, toy.FORMATS)
        assert seg is not None and seg.answer_text == p["answer"]
    assert "hmm" not in toy.chain_of_thought(473, 258, filler_rate=0.0)


def test_noisy_chains_copy_the_written_results():
    rng = random.Random(0)
    for p in toy.make_problems(20, seed=6, digits=(2, 4)):
        text = toy.chain_of_thought(p["a"], p["b"], rng=rng, noise=1.0)
        chain = toy.parse_chain(text)
        assert chain.matches(p["a"], p["b"]) and _consistent(chain)  # the answer is read off the chain
        assert not any(s.correct for s in chain.steps) and toy.reward(text, p) == 0.0
    with pytest.raises(ValueError, match="noise"):
        toy.chain_of_thought(12, 34, noise=1.5)


# ------------------------------------------------------------------ labels

def _labels(text):
    return [toy.parse_chain(text).labels[i] for i in range(len(text))]


def test_labels_of_a_hand_written_chain():
    text = "3+8+0=11 hmm 7+5+1=13 4+2+1=07 A=731"
    step = [S, N, S, N, S, N, S, P]  # a + b + c = k d: digits support, result pivotal
    last = [S, N, S, N, S, N, P, P]  # the last carry is the answer's leading digit (or its absence)
    expected = step + [N] + [N] * 3 + [N] + step + [N] + last + [N] + [O] * 5
    assert _labels(text) == expected
    chain = toy.parse_chain(text)
    assert [s.digit for s in chain.steps] == [1, 3, 7] and chain.steps[-1].carry_out == 0
    assert chain.marker_start == text.index("A=") and _consistent(chain) and chain.matches(473, 258)


def test_labels_follow_structure_for_wrong_chains():
    wrong = "3+8+0=12 7+5+1=13 4+2+1=17 A=1732"  # step 1 miscomputed, answer consistent with it
    chain = toy.parse_chain(wrong)
    assert chain is not None and not chain.steps[0].correct and _consistent(chain)
    assert not _consistent(toy.parse_chain("3+8+0=11 7+5+1=13 4+2+1=07 A=999"))
    assert _labels(wrong)[7] == P and _labels(wrong)[24] == P and _labels(wrong)[6] == S
    assert not toy.parse_chain(wrong).matches(473, 259)


@pytest.mark.parametrize("text", ["", "A=5", "3+8=11 A=11", "3+8+0=11 A=", "3+8+0=11  A=11",
                                  "3+8+0=11 A=11 more", "3+8+0=11 7+5", "hmm so A=12", "3+8+0=11A=11"])
def test_unparseable_completions_give_none(tok, text):
    assert toy.parse_chain(text) is None
    assert toy.token_labels(tok, tok(text, add_special_tokens=False).input_ids) is None


def test_token_labels_line_up_with_segments(tok):
    text = toy.chain_of_thought(4578, 9268, rng=random.Random(1), filler_rate=0.5)
    ids = tok(text, add_special_tokens=False).input_ids + [tok.eos_token_id]
    labels = toy.token_labels(tok, ids)
    seg = ol.segment_completion_ids(tok, ids[:-1], toy.FORMATS)
    assert labels.shape == (len(ids),)
    assert (labels[seg.reasoning] >= 0).all() and (labels[seg.reasoning.stop :] == O).all()
    assert int((labels == P).sum()) == 4 + 1  # four result digits and the last carry
    words = [i for i, t in enumerate(ids) if tok.convert_ids_to_tokens(t) in toy.FILLER_WORDS]
    assert all(labels[i] == N for i in words)


def test_example_lays_out_one_completion_for_the_scorers(tok):
    text = toy.chain_of_thought(473, 258, rng=random.Random(1), filler_rate=0.5)
    ex = toy.example(tok, "473+258:", text)
    ids = ex["input_ids"]
    assert tok.decode(ids[ex["reasoning"]]) + "A=" + tok.decode(ids[ex["answer"]]) == text
    assert tok.decode(ids[: ex["reasoning"].start], skip_special_tokens=True) == "473+258:"
    assert ex["labels"].shape == (ex["reasoning"].stop - ex["reasoning"].start,)
    assert int((ex["labels"] == P).sum()) == 3 + 1 and (ex["labels"] >= 0).all()
    # generated ids with EOS give the same spans; unparseable text gives None
    again = toy.example(tok, "473+258:", tok(text, add_special_tokens=False).input_ids + [tok.eos_token_id])
    assert again["reasoning"] == ex["reasoning"] and again["answer"] == ex["answer"]
    assert torch.equal(again["labels"], ex["labels"]) and again["completion"] == text
    assert toy.example(tok, "473+258:", "hmm so A=12") is None
    with pytest.raises(ValueError, match="prompt"):
        toy.example(tok, "", text)


# ------------------------------------------------------------------ shipped model and data

def test_eval_set_is_the_seeded_held_out_set():
    problems = toy.load_eval_set()
    assert len(problems) == 200 and len({p["prompt"] for p in problems}) == 200
    assert problems == toy.make_problems(200, seed=toy.EVAL_SEED, digits=(2, 4))
    assert toy.load_eval_set(n=5) == problems[:5]


def test_shipped_model_loads_offline_and_writes_parseable_chains(shipped):
    model, tokenizer = shipped
    assert model.config.model_type == "llama" and not model.training
    assert 0.5e6 < sum(p.numel() for p in model.parameters()) < 2e6
    problems = toy.load_eval_set(n=16)
    ro = ol.sample_completions(model, tokenizer, [p["prompt"] for p in problems], temperature=0,
                               max_new_tokens=60, formats=toy.FORMATS)
    chains = [toy.parse_chain(c) for c in ro.completions]
    assert sum(c is not None for c in chains) >= 14
    assert sum(c is not None and c.matches(p["a"], p["b"]) for c, p in zip(chains, problems)) >= 4
    labels = [toy.token_labels(tokenizer, ids) for ids in ro.completion_ids]
    assert all((lab is None) == (c is None) for lab, c in zip(labels, chains))
    assert all(s is not None for s, c in zip(ro.segments, chains) if c is not None)


# ------------------------------------------------------------------ metrics and benchmark




def test_an_eval_set_written_reads_back_as_written(tmp_path):
    problems = [{"prompt": "12+3=", "answer": 15, "digits": 2}, {"prompt": "1+1=", "answer": 2, "digits": 1}]
    path = toy.write_eval_set(problems, tmp_path / "sub" / "eval.jsonl")
    assert toy.load_eval_set(path) == problems and toy.load_eval_set(path, n=1) == problems[:1]
