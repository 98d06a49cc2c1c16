"""Oracle credit, the inverted / shuffled controls, blame shares and gradient quality."""
import pytest
import torch
from conftest import marked, toy_scores

import oar_lite as ol
from oar_lite.course import oracle, toy


# ------------------------------------------------------------------ the oracle

@pytest.mark.parametrize("completion,expected", [
    # a wrong result digit: only that digit is blamed, not the answer digit copied from it
    ("3+8+0=11 hmm 7+5+1=14 4+2+1=07 A=741", [("4", 18)]),
    # a wrong carry out (0 for 3+8+0=11): the carry is wrong, the next step's carry-in copies it and is right
    ("3+8+0=01 7+5+0=12 4+2+1=07 A=721", [("0", 6)]),
    # a miscopied operand (6 for 7): the operand is wrong, the sum computed from it is right
    ("3+8+0=11 6+5+1=12 4+2+1=07 A=721", [("6", 9)]),
    # a wrong carry-in (0 although the previous step wrote 1)
    ("3+8+0=11 7+5+0=12 4+2+1=07 A=721", [("0", 13)]),
    # two errors in different steps
    ("3+8+0=12 7+5+1=13 4+2+1=08 A=832", [("2", 7), ("8", 25)]),
])
def test_oracle_marks_exactly_the_locally_wrong_tokens(tok, completion, expected):
    ex = toy.example(tok, "473+258:", completion)
    s = toy_scores("oracle", ex)
    assert set(s.tolist()) == {0.0, 1.0}
    reasoning_text = [tok.decode([int(i)]) for i in ex["input_ids"][ex["reasoning"]]]
    got = [(reasoning_text[i], i) for i in s.nonzero().flatten().tolist()]
    assert got == expected


def test_oracle_is_uniform_on_right_unblamable_and_foreign_completions(tok):
    right = toy.example(tok, "473+258:", "3+8+0=11 hmm 7+5+1=13 4+2+1=07 A=731")
    assert torch.equal(toy_scores("oracle", right), torch.ones(right["reasoning"].stop - right["reasoning"].start))
    # the chain is right, the answer miscopies it: no reasoning token is wrong
    miscopied = toy.example(tok, "473+258:", "3+8+0=11 7+5+1=13 4+2+1=07 A=737")
    assert bool((toy_scores("oracle", miscopied) == 1).all())
    assert oracle.wrong_tokens(miscopied["input_ids"], miscopied["reasoning"], miscopied["answer"]).sum() == 0
    # a step past the last column is wrong in all its digits
    extra = toy.example(tok, "47+25:", "7+5+0=12 4+2+1=07 1+1+0=02 A=272")
    assert marked(tok, extra, toy_scores("oracle", extra)) == ["1", "1", "0", "0", "2"]
    with pytest.raises(ValueError, match="toy prompt"):
        ol.token_scores("oracle", None, torch.tensor([1, 30, 31, 5, 6, 7, 8]), slice(3, 5), slice(5, 7))


def test_pivotal_oracle_marks_the_result_digits_right_or_wrong(tok):
    ex = toy.example(tok, "473+258:", "3+8+0=11 hmm 7+5+1=14 4+2+1=07 A=741")
    assert marked(tok, ex, toy_scores("oracle-pivotal", ex)) == ["1", "4", "0", "7"]
    assert bool((ex["labels"][toy_scores("oracle-pivotal", ex) == 1] == toy.PIVOTAL).all())


# ------------------------------------------------------------------ controls


@pytest.mark.parametrize("method", ["oracle", "oracle-pivotal", "inverted:oracle", "shuffled:oracle",
                                    "inverted:oar-p:answer_mean", "shuffled:entropy"])
def test_token_weights_take_every_oracle_and_control(tok, method):
    model, _ = toy.load_model()
    rows = [toy.example(tok, "473+258:", "3+8+0=11 hmm 7+5+1=14 4+2+1=07 A=741"),
            toy.example(tok, "47+25:", "7+5+0=12 4+2+1=07 A=72")]
    T = max(len(r["input_ids"]) for r in rows)
    ids = torch.zeros(2, T, dtype=torch.long)
    attn, rm, am = (torch.zeros(2, T, dtype=torch.bool) for _ in range(3))
    for k, r in enumerate(rows):  # left-padded, as the rollouts are
        off = T - len(r["input_ids"])
        ids[k, off:] = r["input_ids"]
        attn[k, off:] = True
        rm[k, r["reasoning"].start + off : r["reasoning"].stop + off] = True
        am[k, r["answer"].start + off : r["answer"].stop + off] = True
    w, sc = ol.token_weights(model, ids, attn.long(), rm, am, method=method, pad_token_id=0, return_scores=True)
    assert torch.allclose(w[rm].sum(), torch.tensor(float(rm.sum())), atol=1e-3)  # mass kept per row, summed
    assert bool((w[~rm] == 1).all())
    if method.endswith("oracle"):
        assert torch.equal(w[1][rm[1]], torch.ones(int(rm[1].sum())))  # the right completion: plain GRPO
        assert w[0][rm[0]].std() > 0


# ------------------------------------------------------------------ blame share

def test_blame_share():
    wrong = torch.tensor([False, True, False, False])
    assert oracle.blame_share(torch.ones(4), wrong) == pytest.approx(0.25)
    assert oracle.blame_share(torch.tensor([0.1, 3.7, 0.1, 0.1]), wrong) == pytest.approx(3.7 / 4)
    with pytest.raises(ValueError, match=r"\[R\]"):
        oracle.blame_share(torch.ones(3), wrong)


# ------------------------------------------------------------------ gradient quality


# ------------------------------------------------------------------ steps to target, intervals, recovered fraction

def _records(method, seed, accs, every=2):
    return [{"type": "eval", "method": method, "seed": seed, "step": k * every, "eval_accuracy": a}
            for k, a in enumerate(accs)]


