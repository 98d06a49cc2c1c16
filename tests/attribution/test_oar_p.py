"""OAR-P (`oar_lite.attribution.oar_p`): the fast forms equal the readable reference, the
naive per-position loop, and do the work the spec bounds."""
import pytest
import torch
import torch.nn.functional as F
from conftest import (PAD, assert_untouched, covered, mixed_state_model, padded_rows, recorded, rows_alone, span_masks,
                      tiny_gpt2, tiny_llama, tiny_qwen2)

import oar_lite as ol
from oar_lite.attribution import MODES


@pytest.mark.parametrize("batch_size,reuse_prefix,mode", covered([(1, True), (4, True), (64, True), (5, False)], MODES))
def test_perturbation_matches_naive_loop(any_model, sequence, mode, batch_size, reuse_prefix):
    ids, reasoning, answer = sequence
    fast = ol.perturbation_scores(any_model, ids, reasoning, answer, mode=mode, pad_token_id=PAD,
                                  batch_size=batch_size, reuse_prefix=reuse_prefix)
    naive = ol.perturbation_scores_naive(any_model, ids, reasoning, answer, mode=mode, pad_token_id=PAD)
    assert fast.shape == (reasoning.stop - reasoning.start,)
    torch.testing.assert_close(fast, naive, rtol=1e-6, atol=1e-9)
    assert (fast >= 0).all() and fast.max() > 0


@pytest.mark.parametrize("options", [{}, {"token_budget": 40}, {"token_budget": 1}, {"max_waste": 0.0},
                                     {"max_waste": 10.0, "token_budget": 10_000}])
def test_perturbation_default_and_budgets_match_naive(llama, sequence, options):
    ids, reasoning, answer = sequence
    stats = {}
    fast = ol.perturbation_scores(llama, ids, reasoning, answer, mode="answer_mean", pad_token_id=PAD, stats=stats,
                                  **options)
    naive = ol.perturbation_scores_naive(llama, ids, reasoning, answer, mode="answer_mean", pad_token_id=PAD)
    torch.testing.assert_close(fast, naive, rtol=1e-6, atol=1e-9)
    end = answer.stop - 1
    ideal = end + sum(end - t for t in range(reasoning.start, reasoning.stop))
    waste = options.get("max_waste", ol.attribution.DEFAULT_MAX_WASTE)
    assert ideal <= stats["forward_tokens"] <= end + (1 + waste) * (ideal - end)
    longest_copy = end - reasoning.start
    assert stats["max_pass_tokens"] <= max(options.get("token_budget", 4096), longest_copy, end)


def test_perturbation_naive_is_a_real_counterfactual(llama, sequence):
    """Independent check of the reference itself for one position, written from the spec."""
    ids, reasoning, answer = sequence
    t = reasoning.start + 3
    perturbed = ids.clone()
    perturbed[t] = PAD
    with torch.no_grad():
        p = F.log_softmax(llama(ids[None, : answer.start]).logits[0, -1], -1)
        q = F.log_softmax(llama(perturbed[None, : answer.start]).logits[0, -1], -1)
    kl = F.kl_div(q, p, log_target=True, reduction="sum")  # KL(P || Q)
    scores = ol.perturbation_scores(llama, ids, reasoning, answer, mode="last", pad_token_id=PAD)
    torch.testing.assert_close(scores[3], kl.float(), rtol=1e-5, atol=1e-9)


def test_perturbation_computes_lm_head_only_where_needed(llama, sequence):
    ids, reasoning, answer = sequence
    with recorded(llama.lm_head, lambda args, out: tuple(out.shape)) as shapes:
        ol.perturbation_scores(llama, ids, reasoning, answer, mode="answer_mean", pad_token_id=PAD, batch_size=8)
    A = answer.stop - answer.start
    assert shapes, "the LM head was never called"
    assert all(s[1] <= A for s in shapes), f"LM head computed on more positions than P_final needs: {shapes}"
    assert max(s[0] for s in shapes) <= 8, "perturbed batch not chunked to batch_size"


def test_prefix_reuse_processes_fewer_tokens(llama, sequence):
    ids, reasoning, answer = sequence
    with_reuse, without = {}, {}
    ol.perturbation_scores(llama, ids, reasoning, answer, pad_token_id=PAD, batch_size=2, stats=with_reuse)
    ol.perturbation_scores(llama, ids, reasoning, answer, pad_token_id=PAD, batch_size=2,
                           reuse_prefix=False, stats=without)
    R, end = reasoning.stop - reasoning.start, answer.start
    assert without["forward_tokens"] == end + R * end
    assert with_reuse["forward_tokens"] < 0.75 * without["forward_tokens"]


def test_perturbation_leaves_model_mode(sequence):
    model = tiny_llama().train()
    ids, reasoning, answer = sequence
    ol.perturbation_scores(model, ids, reasoning, answer, pad_token_id=PAD)
    assert model.training and all(m.training for m in model.modules())


# Batched OAR-P equals per-row OAR-P up to rounding (padding, masked columns and other batch
# shapes sum in a different order): rtol 1e-6 in float64; in float32 1e-6 absolute, since a
# score is a difference of log-probabilities of size about log(V), each rounded to about
# 1e-7 of that size, whatever the score's own size (tiny on a random model).

def _left_aligned_to_end(ids, attn, reasoning, answer):
    """The same rows moved right so that each ends at the last column (left padding only)."""
    shift = [ids.shape[1] - int(attn[i].nonzero()[-1]) - 1 for i in range(ids.shape[0])]
    return (torch.stack([row.roll(s) for row, s in zip(ids, shift)]),
            torch.stack([row.roll(s) for row, s in zip(attn, shift)]),
            [slice(r.start + s, r.stop + s) for r, s in zip(reasoning, shift)],
            [slice(a.start + s, a.stop + s) for a, s in zip(answer, shift)])


@pytest.mark.parametrize("make,dtype,mode,padding", covered(
    [(tiny_llama, torch.float64), (tiny_gpt2, torch.float64), (tiny_qwen2, torch.float64), (tiny_llama, torch.float32)],
    MODES, ["left", "right", "both"]))
def test_perturbation_scores_batch_equals_per_row(padding, mode, make, dtype):
    model = make(dtype=dtype)
    left = {"left": [2, 0, 5], "right": [0, 0, 0], "both": [2, 0, 5]}[padding]
    right = {"left": [3, 0, 8], "right": [4, 0, 8], "both": [3, 2, 1]}[padding]
    ids, attn, reasoning, answer = padded_rows(model, left, right, answer_lengths=(3, 1, 4))
    if padding == "left":
        ids, attn, reasoning, answer = _left_aligned_to_end(ids, attn, reasoning, answer)
    alone = rows_alone(ol.perturbation_scores, model, ids, attn, reasoning, answer, pad_token_id=PAD, mode=mode)
    options_to_try = [{}, {"token_budget": 60, "batch_size": 2}]
    if make is tiny_llama and dtype == torch.float64:  # the other schedules, where the tests stay fast
        options_to_try += [{"token_budget": 1}, {"max_waste": 0.0}, {"reuse_prefix": False}]
    for options in options_to_try:
        batched = ol.perturbation_scores_batch(model, ids, attn, reasoning, answer, mode=mode, pad_token_id=PAD,
                                               **options)
        for a, b in zip(alone, batched):
            assert b.shape == a.shape and b.dtype == torch.float32 and (b >= 0).all()
            assert mode == "answer_joint" or a.max() > 0
            if dtype == torch.float64:
                torch.testing.assert_close(b, a, rtol=1e-6, atol=1e-9 * max(float(a.max()), 1e-6))
            else:
                assert float((b - a).abs().max()) <= 1e-6, options


@pytest.mark.parametrize("options", [{}, {"token_budget": 60}, {"token_budget": 1}, {"batch_size": 3},
                                     {"max_waste": 0.0}, {"max_waste": 0.5}])
def test_perturbation_scores_batch_work_and_pass_bounds(llama, options):
    """The copies run at most (1 + max_waste) x the ideal tokens (each from its own position),
    on top of the clean passes, and no pass holds more than the budget (cache included)."""
    ids, attn, reasoning, answer = padded_rows(llama, [2, 0, 5], [3, 2, 1], answer_lengths=(3, 1, 4))
    stats = {}
    ol.perturbation_scores_batch(llama, ids, attn, reasoning, answer, mode="answer_mean", pad_token_id=PAD,
                                 stats=stats, **options)
    ends = [a.stop - 1 for a in answer]  # answer_mean reads up to the last answer token, exclusive
    ideal = sum(e - t for r, e in zip(reasoning, ends) for t in range(r.start, r.stop))
    lengths = [e - int(attn[i].nonzero()[0]) for i, e in enumerate(ends)]  # each row's x[:end]
    budget = options.get("token_budget", ol.attribution.default_token_budget("cpu"))
    clean_max = len(lengths) * max(lengths)  # the clean passes, left-padded to their group's longest row
    assert ideal + sum(lengths) <= stats["forward_tokens"]
    assert stats["forward_tokens"] <= clean_max + (1 + options.get("max_waste", ol.attribution.DEFAULT_MAX_WASTE)) * ideal
    assert stats["max_pass_held_tokens"] <= max(budget, max(lengths))
    rows = sum(r.stop - r.start for r in reasoning)
    if "batch_size" in options:
        assert stats["forward_passes"] >= rows / options["batch_size"]
    if options == {}:  # the default packs the three rows' copies into shared passes: fewer than row by row
        per_row = []
        for i in range(3):
            per_row.append({})
            rows_alone(ol.perturbation_scores, llama, ids[i:i + 1], attn[i:i + 1], reasoning[i:i + 1], answer[i:i + 1],
                       pad_token_id=PAD, mode="answer_mean", stats=per_row[-1])
        assert stats["forward_passes"] <= sum(s["forward_passes"] for s in per_row) / 2


def test_perturbation_scores_batch_leaves_grads_requires_grad_and_modes():
    model, before = mixed_state_model()
    ids, attn, reasoning, answer = padded_rows(model, [2, 0, 5], [3, 2, 1])
    for reuse_prefix in (True, False):
        ol.perturbation_scores_batch(model, ids, attn, reasoning, answer, pad_token_id=PAD, reuse_prefix=reuse_prefix)
    assert_untouched(model, before)


def test_token_weights_oar_p_packs_rows_into_shared_passes(llama):
    """token_weights("oar-p") scores the rows with perturbation_scores_batch: passes mix the
    copies of several rows, rows without an answer are skipped, and the scores equal the
    batched function's (and so the per-row ones, by the test above)."""
    ids, attn, reasoning, answer = padded_rows(llama, [2, 0, 5], [3, 2, 1])
    ids = torch.cat([ids, ids[:1]])
    attn = torch.cat([attn, attn[:1]])
    reasoning, answer = reasoning + reasoning[:1], answer + answer[:1]
    rm, am = span_masks(attn, reasoning, answer)
    am[1] = False  # a row without an answer is not scored
    with recorded(llama.lm_head, lambda args, out: out.shape[0]) as batch_sizes:
        _, scores = ol.token_weights(llama, ids, attn, rm, am, method="oar-p:answer_joint", return_scores=True,
                                     pad_token_id=PAD)
    scored = [0, 2, 3]
    copies = sum(reasoning[i].stop - reasoning[i].start for i in scored)
    assert scores[1] is None
    assert sum(batch_sizes) == len(scored) + copies  # clean rows + one copy per reasoning token
    per_row = [{} for _ in scored]
    for i, st in zip(scored, per_row):
        valid = attn[i].nonzero().flatten()
        lo = int(valid[0])
        ol.perturbation_scores(llama, ids[i, lo:int(valid[-1]) + 1], slice(reasoning[i].start - lo, reasoning[i].stop - lo),
                               slice(answer[i].start - lo, answer[i].stop - lo), mode="answer_joint", pad_token_id=PAD,
                               stats=st)
    per_row_passes = sum(st["forward_passes"] for st in per_row)
    assert len(batch_sizes) <= per_row_passes / 2
    expected = ol.perturbation_scores_batch(llama, ids[scored], attn[scored], [reasoning[i] for i in scored],
                                            [answer[i] for i in scored], mode="answer_joint", pad_token_id=PAD)
    for i, want in zip(scored, expected):
        assert torch.equal(scores[i], want)
    torch.testing.assert_close(scores[3], scores[0])  # the same row twice, in different passes


def test_perturbation_scores_batch_bad_input(llama):
    ids, attn, reasoning, answer = padded_rows(llama, [0, 0, 0], [0, 0, 0])
    with pytest.raises(ValueError, match="one reasoning and one answer span per row"):
        ol.perturbation_scores_batch(llama, ids, attn, reasoning[:2], answer, pad_token_id=PAD)
    with pytest.raises(ValueError, match="must start at or after"):
        ol.perturbation_scores_batch(llama, ids, attn, reasoning, [slice(5, 7)] * 3, pad_token_id=PAD)
    with pytest.raises(ValueError, match="pad_token_id is required"):
        ol.perturbation_scores_batch(llama, ids, attn, reasoning, answer, pad_token_id=None)
    with pytest.raises(ValueError, match="token_budget must be >= 1"):
        ol.perturbation_scores_batch(llama, ids, attn, reasoning, answer, pad_token_id=PAD, token_budget=0)
    with pytest.raises(ValueError, match="no attended tokens"):
        ol.perturbation_scores_batch(llama, ids, torch.zeros_like(attn), reasoning, answer, pad_token_id=PAD)


@pytest.mark.parametrize("batch_size", [1, 2, None])
def test_perturbation_scores_batch_with_reasoning_inside_another_rows_answer_window(batch_size):
    """A row whose answer is shorter than another's has reasoning tokens within the group's last K
    columns (K the longest answer): a pass starting there must still run K columns. A training
    run crashed there (issue 39's item-4 runs, OAR-P answer_mean, 2 prompts x 4)."""
    model = tiny_llama(dtype=torch.float64)
    g = torch.Generator().manual_seed(5)
    n, lengths, answers = 24, (20, 24), (6, 1)  # reasoning runs up to the answer, no gap
    ids = torch.full((2, n), PAD)
    attn = torch.zeros((2, n), dtype=torch.long)
    reasoning, answer = [], []
    for i, (length, a) in enumerate(zip(lengths, answers)):
        ids[i, :length] = torch.randint(3, 40, (length,), generator=g)
        attn[i, :length] = 1
        reasoning.append(slice(3, length - a))
        answer.append(slice(length - a, length))
    alone = rows_alone(ol.perturbation_scores, model, ids, attn, reasoning, answer, pad_token_id=PAD, mode="answer_mean")
    batched = ol.perturbation_scores_batch(model, ids, attn, reasoning, answer, mode="answer_mean", pad_token_id=PAD,
                                           batch_size=batch_size)
    for a, b in zip(alone, batched):
        torch.testing.assert_close(b, a, rtol=1e-6, atol=1e-9 * max(float(a.max()), 1e-6))
