"""Oracle credit, the inverted / shuffled controls, blame shares and gradient quality."""
import pytest
import torch

import oar_lite as ol
from oar_lite import gradient_quality as gq
from oar_lite import oracle, toy


@pytest.fixture(scope="module")
def tok():
    return toy.build_tokenizer()


def marked(tok, ex, scores):
    """The reasoning tokens (text) whose score is the row's maximum, in order."""
    ids = ex["input_ids"][ex["reasoning"]]
    top = scores.max()
    return [tok.decode([int(i)]) for i, s in zip(ids, scores) if s == top and not bool((scores == top).all())]


def scores(method, ex, **options):
    return ol.token_scores(method, None, ex["input_ids"], ex["reasoning"], ex["answer"], **options)


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
    s = scores("oracle", ex)
    assert set(s.tolist()) == {0.0, 1.0}
    reasoning_text = [tok.decode([int(i)]) for i in ex["input_ids"][ex["reasoning"]]]
    got = [(reasoning_text[i], i) for i in s.nonzero().flatten().tolist()]
    assert got == expected


def test_oracle_is_uniform_on_right_unblamable_and_foreign_completions(tok):
    right = toy.example(tok, "473+258:", "3+8+0=11 hmm 7+5+1=13 4+2+1=07 A=731")
    assert torch.equal(scores("oracle", right), torch.ones(right["reasoning"].stop - right["reasoning"].start))
    # the chain is right, the answer miscopies it: no reasoning token is wrong
    miscopied = toy.example(tok, "473+258:", "3+8+0=11 7+5+1=13 4+2+1=07 A=737")
    assert bool((scores("oracle", miscopied) == 1).all())
    assert oracle.wrong_tokens(miscopied["input_ids"], miscopied["reasoning"], miscopied["answer"]).sum() == 0
    # a step past the last column is wrong in all its digits
    extra = toy.example(tok, "47+25:", "7+5+0=12 4+2+1=07 1+1+0=02 A=272")
    assert marked(tok, extra, scores("oracle", extra)) == ["1", "1", "0", "0", "2"]
    with pytest.raises(ValueError, match="toy prompt"):
        ol.token_scores("oracle", None, torch.tensor([1, 30, 31, 5, 6, 7, 8]), slice(3, 5), slice(5, 7))


def test_pivotal_oracle_marks_the_result_digits_right_or_wrong(tok):
    ex = toy.example(tok, "473+258:", "3+8+0=11 hmm 7+5+1=14 4+2+1=07 A=741")
    assert marked(tok, ex, scores("oracle-pivotal", ex)) == ["1", "4", "0", "7"]
    assert bool((ex["labels"][scores("oracle-pivotal", ex) == 1] == toy.PIVOTAL).all())


# ------------------------------------------------------------------ controls

def test_method_names_with_controls_parse():
    assert ol.parse_method("inverted:oar-p:answer_mean") == ("oar-p", "answer_mean")
    assert ol.parse_method("shuffled:inverted:oracle") == ("oracle", None)
    assert oracle.split_controls("shuffled:oar-g:last") == (("shuffled",), "oar-g:last")
    for bad, match in (("inverted", "is a control"), ("inverted:nope", "unknown method"), ("shuffled:oracle:last", "no P_final mode")):
        with pytest.raises(ValueError, match=match):
            ol.parse_method(bad)
    with pytest.raises(ValueError, match="control prefix"):
        ol.register_scorer("inverted", lambda *a: None)
    from oar_lite.attribution import CreditConfig
    from oar_lite.train import TrainConfig
    assert TrainConfig(credit=CreditConfig("inverted:oar-p:answer_mean")).credit.method == "inverted:oar-p:answer_mean"
    with pytest.raises(ValueError, match="unknown method"):
        TrainConfig(credit=CreditConfig("shuffled:oar-x"))


def test_inverted_reverses_the_ranking(tok):
    ex = toy.example(tok, "473+258:", "3+8+0=11 hmm 7+5+1=14 4+2+1=07 A=741")
    base = torch.tensor([0.0, 0.5, 2.0, 0.1, 7.0])
    inv = oracle.inverted(base)
    assert torch.equal(torch.argsort(inv, stable=True), torch.argsort(-base, stable=True))
    n = lambda s: (torch.log1p(s) - torch.log1p(s).min()) / (torch.log1p(s).max() - torch.log1p(s).min())
    assert torch.allclose(n(inv), 1 - n(base), atol=1e-6)
    s, i = scores("oracle", ex), scores("inverted:oracle", ex)
    assert torch.equal(i, 1 - s)
    # any scorer: ranks of OAR-P reversed on a model's scores
    model = toy.load_model()[0]
    p = ol.token_scores("oar-p:answer_mean", model, ex["input_ids"], ex["reasoning"], ex["answer"], pad_token_id=0)
    q = ol.token_scores("inverted:oar-p:answer_mean", model, ex["input_ids"], ex["reasoning"], ex["answer"], pad_token_id=0)
    assert int(q.argmax()) == int(p.argmin()) and int(q.argmin()) == int(p.argmax())


def test_shuffled_is_a_seeded_permutation(tok):
    ex = toy.example(tok, "473+258:", "3+8+0=12 7+5+1=13 4+2+1=08 A=832")
    s, sh = scores("oracle", ex), scores("shuffled:oracle", ex)
    assert torch.equal(torch.sort(s).values, torch.sort(sh).values) and not torch.equal(s, sh)
    assert torch.equal(sh, scores("shuffled:oracle", ex))  # seeded by the row
    g1, g2 = torch.Generator().manual_seed(1), torch.Generator().manual_seed(1)
    assert torch.equal(scores("shuffled:oracle", ex, generator=g1), scores("shuffled:oracle", ex, generator=g2))


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


@pytest.mark.parametrize("control", ["inverted", "shuffled"])
def test_controls_act_on_batched_oar_g(tok, control):
    """token_weights scores OAR-G for all rows in one pass; a control in front of it must still act."""
    model, _ = toy.load_model()
    ex = toy.example(tok, "473+258:", "3+8+0=11 hmm 7+5+1=14 4+2+1=07 A=741")
    ids = ex["input_ids"][None]
    attn = torch.ones_like(ids)
    rm, am = torch.zeros_like(ids, dtype=torch.bool), torch.zeros_like(ids, dtype=torch.bool)
    rm[0, ex["reasoning"]] = True
    am[0, ex["answer"]] = True
    run = lambda m: ol.token_weights(model, ids, attn, rm, am, method=m, return_scores=True,
                                     generator=torch.Generator().manual_seed(0))[1][0]
    base, controlled = run("oar-g"), run(f"{control}:oar-g")
    if control == "inverted":
        assert torch.allclose(controlled, oracle.inverted(base), atol=1e-6)
    else:
        assert torch.equal(torch.sort(controlled).values, torch.sort(base).values) and not torch.equal(controlled, base)


# ------------------------------------------------------------------ blame share

def test_blame_share():
    wrong = torch.tensor([False, True, False, False])
    assert oracle.blame_share(torch.ones(4), wrong) == pytest.approx(0.25)
    assert oracle.blame_share(torch.tensor([0.1, 3.7, 0.1, 0.1]), wrong) == pytest.approx(3.7 / 4)
    with pytest.raises(ValueError, match=r"\[R\]"):
        oracle.blame_share(torch.ones(3), wrong)


# ------------------------------------------------------------------ gradient quality

def test_gradient_stats_on_constructed_gradients():
    g = torch.Generator().manual_seed(0)
    truth = torch.randn(50, generator=g)
    uniform = truth + 2.0 * torch.randn(40, 50, generator=g)
    quiet = truth + 0.5 * torch.randn(40, 50, generator=g)   # the same mean, less noise
    wrong = -truth + 0.5 * torch.randn(40, 50, generator=g)  # biased the wrong way
    st = gq.gradient_stats({"uniform": uniform, "same": uniform.clone(), "quiet": quiet, "wrong": wrong})
    assert st["same"] == st["uniform"]
    assert st["quiet"]["snr"] > 4 * st["uniform"]["snr"] and st["quiet"]["cosine"] > st["uniform"]["cosine"]
    assert st["wrong"]["cosine"] < 0 and st["wrong"]["bias_cosine"] < -0.5
    assert st["uniform"]["scale"] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="reference"):
        gq.gradient_stats({"oracle": quiet})


def _gradient_stats_naive(gradients, reference="uniform"):
    """The statistics straight from the module docstring, on whole ``[N, D]`` float64 copies."""
    F = torch.nn.functional
    ref = gradients[reference].double()
    N = ref.shape[0]
    halves = (torch.arange(0, N, 2), torch.arange(1, N, 2))
    half_ref = [ref[h].mean(0) for h in halves]
    out = {}
    for label, g in gradients.items():
        g = g.double()
        other = torch.stack([half_ref[1] if b % 2 == 0 else half_ref[0] for b in range(N)])
        cos = F.cosine_similarity(g, other, dim=1)
        mean = g.mean(0)
        noise = float(((g - mean) ** 2).sum() / (N - 1))
        out[label] = {"cosine": float(cos.mean()), "cosine_std": float(cos.std()),
                      "bias_cosine": sum(float(F.cosine_similarity(g[halves[i]].mean(0), half_ref[1 - i], dim=0))
                                         for i in (0, 1)) / 2,
                      "snr": max(float(mean.pow(2).sum()) - noise / N, 0.0) / noise,
                      "scale": float(mean.norm() / ref.mean(0).norm())}
    return out


@pytest.mark.parametrize("N", [2, 7, 40])
def test_gradient_stats_equals_the_whole_matrix_formulas_in_blocks(monkeypatch, N):
    """Read in blocks of 3 rows (odd and even batches split across blocks), the statistics
    equal the formulas on whole float64 matrices."""
    g = torch.Generator().manual_seed(N)
    truth = torch.randn(50, generator=g)
    grads = {"uniform": truth + 2.0 * torch.randn(N, 50, generator=g),
             "quiet": truth + 0.5 * torch.randn(N, 50, generator=g),
             "wrong": -truth + 0.5 * torch.randn(N, 50, generator=g)}
    monkeypatch.setattr(gq, "STATS_BLOCK_BYTES", 3 * 50 * 8)
    blocked, naive = gq.gradient_stats(grads), _gradient_stats_naive(grads)
    for label in grads:
        for key in naive[label]:
            assert blocked[label][key] == pytest.approx(naive[label][key], rel=1e-10, abs=1e-12), (label, key)


def test_batch_gradients_at_the_shipped_model():
    model, tok = toy.load_model()
    problems = toy.load_eval_set()
    W = {"uniform": "uniform", "again": "uniform", "oracle": ("oracle", {"boost": 9}),
         "shuffled": ("shuffled:oracle", {"boost": 9})}
    before = [p.detach().clone() for p in model.parameters()]
    grads, info = gq.batch_gradients(model, tok, problems, W, batches=4, prompts=4, group_size=4, seed=3)
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))
    assert all(p.grad is None for p in model.parameters())
    D = sum(p.numel() for p in model.parameters())
    assert grads["uniform"].shape == (4, D) and torch.equal(grads["uniform"], grads["again"])
    assert not torch.equal(grads["oracle"], grads["uniform"])
    st = gq.gradient_stats(grads)
    assert st["again"] == st["uniform"]
    assert len(info["rows"]) == len(info["weights"]["oracle"]) > 0
    shares = oracle.blame_shares(info["rows"], info["weights"])
    if shares["oracle"]["n"]:  # wrong completions with a wrong token: the oracle puts more mass on them
        assert shares["oracle"]["share"] > shares["uniform"]["share"]
    with pytest.raises(ValueError, match="weighting"):
        gq.batch_gradients(model, tok, problems, {"uniform": 3}, batches=2)


# ------------------------------------------------------------------ steps to target, intervals, recovered fraction

def _records(method, seed, accs, every=2):
    return [{"type": "eval", "method": method, "seed": seed, "step": k * every, "eval_accuracy": a}
            for k, a in enumerate(accs)]


def test_learning_table_speedup_recovered_fraction_and_censoring():
    from oar_lite import regime
    recs = []
    for s in range(5):
        recs += _records("uniform", s, [0.5, 0.6, 0.7, 0.7, 0.8 if s % 2 else 0.79, 0.8])      # step 8 or 10
        recs += _records("oracle", s, [0.5, 0.7, 0.8, 0.8, 0.8, 0.8])                         # step 4
        recs += _records("half", s, [0.5, 0.6, 0.7, 0.8, 0.8, 0.8])                           # step 6
        recs += _records("never", s, [0.5, 0.5, 0.5, 0.5, 0.5, 0.5])                          # censored at 12
    t = regime.learning_table(recs, target=0.8, methods=["uniform", "oracle", "half", "never"], n_boot=500)
    m = t["methods"]
    assert m["oracle"]["steps"] == [4.0] * 5 and m["uniform"]["steps"] == [10.0, 8.0, 10.0, 8.0, 10.0]
    assert m["oracle"]["speedup"] == pytest.approx(9.2 / 4)
    assert m["oracle"]["speedup_ci"][0] > 1.5
    assert not regime.intervals_overlap(m["oracle"]["ci"], m["uniform"]["ci"])
    assert m["half"]["recovered"] == pytest.approx((9.2 - 6) / (9.2 - 4))
    assert m["never"]["censored"] == 5 and m["never"]["steps"] == [12.0] * 5 and m["never"]["recovered"] < 0
    assert m["uniform"]["recovered"] is None and m["oracle"]["recovered"] is None
    with pytest.raises(ValueError, match="at least 2 seeds"):
        regime.learning_table(_records("uniform", 0, [0.5]), target=0.8)


def test_compare_cli_trains_a_control(tmp_path):
    from oar_lite.__main__ import main
    assert main(["compare", "--tiny", "--methods", "uniform", "inverted:oracle", "--out", str(tmp_path),
                 "--quiet", "--jobs", "1"]) == 0
    from oar_lite.train import read_jsonl
    records = [r for r in read_jsonl(tmp_path / "compare.jsonl") if r["type"] == "train"]
    assert {r["method"] for r in records} == {"uniform", "inverted:oracle"}
    assert (tmp_path / "runs" / "inverted-oracle-seed0" / "checkpoint.pt").exists()
    from oar_lite import compare
    assert compare.PROFILES["credit"].config.credit.boost == 9.0 and len(compare.PROFILES["credit"].seeds) >= 5


def test_gradient_quality_benchmark_writes_its_report(tmp_path):
    from benchmarks import gradient_quality as bench
    report = bench.main(["--batches", "2", "--prompts", "2", "--group-size", "2", "--json", str(tmp_path / "gq.json")])
    assert set(report["stats"]) == set(bench.WEIGHTINGS) and (tmp_path / "gq.png").exists()
    assert set(report["blame"]) == set(bench.WEIGHTINGS) | {"_tokens"}
    assert report["command"].endswith("--json " + str(tmp_path / "gq.json"))


def test_learning_table_reads_longer_runs_at_the_budget():
    from oar_lite import regime
    recs = []
    for s in range(3):
        recs += _records("uniform", s, [0.5, 0.6, 0.7, 0.8])  # reaches 0.8 at step 6
        recs += _records("oracle", s, [0.5, 0.8, 0.8, 0.8])   # step 2
    t = regime.learning_table(recs, target=0.8, max_step=4, n_boot=200)
    assert t["methods"]["uniform"]["steps"] == [6.0] * 3 and t["methods"]["uniform"]["censored"] == 3
    assert t["methods"]["oracle"]["steps"] == [2.0] * 3
