"""The positive-control world (scratch words) and the share of gradient noise credit can remove
(issue 28): `toy.chain_of_thought(scratch=)`, ``scripts/pretrain_toy.py --scratch``, the
``"oracle-relevant"`` scorer, `gradient_quality.irrelevant_mask`, `gradient_quality.variance_components`
and `gradient_quality.completion_noise_shares`."""
import random
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from conftest import load_script, tiny_llama

import oar_lite as ol
from oar_lite.lab import gradient_quality as gq
from oar_lite.course import toy
from oar_lite import rollout

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def tok():
    return toy.build_tokenizer()


# ------------------------------------------------------------------ the world: scratch words

def test_scratch_words_open_the_chain_and_leave_the_rest_unchanged(tok):
    for p in toy.make_problems(20, seed=3, digits=(2, 4)):
        plain = toy.chain_of_thought(p["a"], p["b"], rng=random.Random(p["a"]), filler_rate=0.5, noise=0.2)
        text = toy.chain_of_thought(p["a"], p["b"], rng=random.Random(p["a"]), filler_rate=0.5, noise=0.2, scratch=7,
                                    scratch_rng=random.Random(1))
        words = text.split(" ")[:7]
        assert all(w in toy.FILLER_WORDS for w in words)
        assert text == " ".join(words) + " " + plain  # fillers and noise drawn from rng are those of scratch=0
        chain = toy.parse_chain(text)
        assert chain is not None and chain.answer == toy.parse_chain(plain).answer
        labels = toy.token_labels(tok, tok(text, add_special_tokens=False).input_ids)
        assert bool((labels[:14] == toy.NEUTRAL).all())  # 7 words and their 7 spaces
        # the cap leaves room for the scratch words (and an end-of-text token)
        assert len(tok(text, add_special_tokens=False).input_ids) + 1 <= toy.max_new_tokens(p["digits"], scratch=7)
    # the scratch words are drawn uniformly: every filler word appears, none dominates
    rng = random.Random(0)
    words = [w for _ in range(200) for w in toy.chain_of_thought(12, 34, filler_rate=0, scratch=10, scratch_rng=rng).split()[:10]]
    counts = np.array([words.count(w) for w in toy.FILLER_WORDS])
    assert counts.min() > 0 and counts.max() < 2.5 * len(words) / len(toy.FILLER_WORDS)
    assert toy.chain_of_thought(12, 34, scratch=0) == toy.chain_of_thought(12, 34)
    with pytest.raises(ValueError, match="scratch"):
        toy.chain_of_thought(12, 34, scratch=-1)


def _pretrain_script():
    return load_script("pretrain_toy")


def test_pretraining_with_scratch_keeps_the_problem_stream():
    pretrain = _pretrain_script()
    args = SimpleNamespace(seed=0, digits=(2, 4), steps=3, batch_size=8, filler_rate=0.3, max_fillers=2, noise=0.1)
    plain = [pair for batch in pretrain.make_batches(SimpleNamespace(**vars(args), scratch=0), set()) for pair in batch]
    assert plain == [pair for batch in pretrain.make_batches(args, set()) for pair in batch]  # older namespaces
    scratch = [pair for batch in pretrain.make_batches(SimpleNamespace(**vars(args), scratch=5), set()) for pair in batch]
    assert [p for p, _ in scratch] == [p for p, _ in plain]
    for (_, with_words), (_, without) in zip(scratch, plain):
        words = with_words.split(" ")
        assert all(w in toy.FILLER_WORDS for w in words[:5]) and " ".join(words[5:]) == without


def test_scratch_loss_weighs_chain_and_scratch_tokens_apart(tok):
    from transformers import LlamaForCausalLM

    pretrain = _pretrain_script()
    torch.manual_seed(0)
    model = LlamaForCausalLM(toy.model_config(len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=1))
    batch = [("12+34:", "ok so 2+4+0=06 1+3+0=04 A=46"), ("5+7:", "yes now 7+5+0=12 A=12")]
    ids, attn, labels = pretrain.collate(tok, batch)
    loss = pretrain.scratch_loss(model, ids, attn, labels, scratch=2)
    logp = torch.log_softmax(model(input_ids=ids, attention_mask=attn).logits, -1)
    chain, scratch = [], []
    for row, (prompt, _) in enumerate(batch):
        first = len(tok(prompt).input_ids)  # the first completion token's column
        for t in range(first, int(attn[row].sum())):
            (scratch if t < first + 4 else chain).append(-float(logp[row, t - 1, ids[row, t]]))
    assert float(loss) == pytest.approx(sum(chain) / len(chain) + sum(scratch) / len(scratch), rel=1e-5)


# ------------------------------------------------------------------ the relevance oracle

def test_relevance_oracle_marks_what_the_reward_depends_on(tok):
    right = toy.example(tok, "473+258:", "wait so 3+8+0=11 hmm 7+5+1=13 4+2+1=07 A=731")
    wrong = toy.example(tok, "473+258:", "wait so 3+8+0=11 hmm 7+5+1=14 4+2+1=07 A=741")
    for ex in (right, wrong):  # right or wrong, the same tokens
        s = ol.token_scores("oracle-relevant", None, ex["input_ids"], ex["reasoning"], ex["answer"])
        assert torch.equal(s.bool(), (ex["labels"] == toy.SUPPORT) | (ex["labels"] == toy.PIVOTAL))
        text = [tok.decode([int(i)]) for i in ex["input_ids"][ex["reasoning"]]]
        assert {t for t, v in zip(text, s) if v == 0} == {"wait", "so", "hmm", " ", "+", "="}
        assert {t for t, v in zip(text, s) if v == 1} <= set("0123456789")
    assert torch.equal(ol.token_scores("oracle-relevant", None, right["input_ids"], right["reasoning"], right["answer"]),
                       ol.token_scores("oracle-relevant", None, wrong["input_ids"], wrong["reasoning"], wrong["answer"]))
    # an unparseable completion: nothing is known, plain GRPO
    junk = torch.tensor(tok("473+258:")["input_ids"] + tok("3+8 7 ok A=731", add_special_tokens=False)["input_ids"])
    R = len(tok("3+8 7 ok ", add_special_tokens=False)["input_ids"])
    P = len(tok("473+258:")["input_ids"])
    assert torch.equal(ol.token_scores("oracle-relevant", None, junk, slice(P, P + R), slice(P + R + 2, P + R + 5)),
                       torch.ones(R))
    # with boost 9 a relevant token weighs 10x an irrelevant one; inverted swaps them
    w = ol.token_weights(None, right["input_ids"][None], torch.ones(1, len(right["input_ids"])),
                         _mask(right, "reasoning"), _mask(right, "answer"), method="oracle-relevant", boost=9.0)[0]
    wi = ol.token_weights(None, right["input_ids"][None], torch.ones(1, len(right["input_ids"])),
                          _mask(right, "reasoning"), _mask(right, "answer"), method="inverted:oracle-relevant", boost=9.0)[0]
    rel = (right["labels"] == toy.SUPPORT) | (right["labels"] == toy.PIVOTAL)
    r = w[right["reasoning"]]
    assert torch.allclose(r[rel], 10 * r[~rel][0]) and torch.allclose(r[~rel], r[~rel][0])
    ri = wi[right["reasoning"]]
    assert torch.allclose(ri[~rel], 10 * ri[rel][0])


def _mask(ex, key):
    m = torch.zeros(1, len(ex["input_ids"]), dtype=torch.bool)
    m[0, ex[key]] = True
    return m


def test_irrelevant_mask_of_sampled_rollouts(tok):
    model, tok = toy.load_model()
    ro = ol.sample_completions(model, tok, ["473+258:", "56+78:"], group_size=3, max_new_tokens=40, temperature=1.0,
                               formats=toy.FORMATS, seed=2)
    mask = gq.irrelevant_mask(ro, tok)
    assert mask.shape == ro.input_ids.shape and not mask[:, :ro.prompt_length].any()
    P = ro.prompt_length
    for row, ids in enumerate(ro.completion_ids):
        labels = toy.token_labels(tok, ids)
        if labels is None:
            assert not mask[row].any()
        else:
            assert torch.equal(mask[row, P:P + len(ids)], labels == toy.NEUTRAL)
            assert not mask[row, P + len(ids):].any()


# ------------------------------------------------------------------ the share: nested batches

def _nested(N, M, D, k, seed=0, mean_irrelevant=0.0):
    """Synthetic batch gradients [N * M, D]: prompt noise shared by a set's M draws, completion
    noise per draw, and k irrelevant 'tokens' each adding independent noise (mean 0 unless asked)."""
    g = torch.Generator().manual_seed(seed)
    mu = torch.randn(D, generator=g, dtype=torch.float64)
    prompts = torch.randn(N, 1, D, generator=g, dtype=torch.float64).expand(N, M, D)
    completions = 0.7 * torch.randn(N, M, D, generator=g, dtype=torch.float64)
    relevant = (mu + prompts + completions).reshape(N * M, D)
    irrelevant = sum(0.5 * torch.randn(N * M, D, generator=g, dtype=torch.float64) for _ in range(k)) \
        if k else torch.zeros(N * M, D, dtype=torch.float64)
    return relevant + irrelevant + mean_irrelevant * mu, relevant


def test_share_is_zero_when_every_token_decides_the_reward():
    full, relevant = _nested(30, 2, 40, k=0)
    out = gq.variance_components(full, relevant, draws=2, n_boot=200)
    assert out["shares"]["irrelevant"] == pytest.approx(0.0, abs=1e-12)
    assert out["shares_ci"]["irrelevant"] == pytest.approx((0.0, 0.0), abs=1e-12)
    assert out["snr_relevant"] == pytest.approx(out["snr"])


def test_share_grows_with_k_and_matches_the_variances_put_in():
    N, M, D = 400, 2, 60
    shares = []
    for k in (0, 1, 4, 16):
        full, relevant = _nested(N, M, D, k, seed=k)
        out = gq.variance_components(full, relevant, draws=M, n_boot=300)
        v = {part: out["variance"][part] / D for part in out["variance"]}
        assert v["prompts"] == pytest.approx(1.0, rel=0.15)          # per coordinate: 1
        assert v["completions"] == pytest.approx(0.49, rel=0.1)      # 0.7^2
        assert v["irrelevant"] == pytest.approx(0.25 * k, rel=0.1, abs=0.02)
        assert sum(out["shares"].values()) == pytest.approx(1.0)
        expected = 0.25 * k / (1.49 + 0.25 * k)
        assert out["shares"]["irrelevant"] == pytest.approx(expected, abs=0.03)
        lo, hi = out["shares_ci"]["irrelevant"]
        assert lo - 0.01 <= expected <= hi + 0.01
        # removing noise that has mean 0 leaves the signal: SNR up by 1 / (1 - share)
        assert out["snr_relevant"] / out["snr"] == pytest.approx(1 / (1 - out["shares"]["irrelevant"]), rel=0.1)
        assert out["irrelevant_mean_share"] < 0.05
        shares.append(out["shares"]["irrelevant"])
    assert shares == sorted(shares) and shares[-1] > 0.6


def test_irrelevant_tokens_that_move_the_mean_are_flagged():
    full, relevant = _nested(200, 2, 40, k=1, mean_irrelevant=0.5)
    out = gq.variance_components(full, relevant, draws=2, n_boot=100)
    assert out["irrelevant_mean_share"] == pytest.approx(0.25 / 2.25, rel=0.2)  # |0.5 mu|^2 / |1.5 mu|^2


def test_variance_components_equal_the_textbook_anova():
    N, M, D = 7, 3, 11
    g = torch.Generator().manual_seed(5)
    full = torch.randn(N * M, D, generator=g, dtype=torch.float64)
    relevant = full - 0.3 * torch.randn(N * M, D, generator=g, dtype=torch.float64)
    out = gq.variance_components(full, relevant, draws=M, n_boot=10)

    def parts(x):
        x = x.view(N, M, D)
        means = x.mean(1)
        within = float(((x - means[:, None]) ** 2).sum() / (N * (M - 1)))
        between = float(((means - means.mean(0)) ** 2).sum() / (N - 1))
        return between - within / M + within, between - within / M, within

    total, _, _ = parts(full)
    left, prompts, completions = parts(relevant)
    assert out["variance"]["total"] == pytest.approx(total, rel=1e-10)
    assert out["variance"]["prompts"] == pytest.approx(prompts, rel=1e-10)
    assert out["variance"]["completions"] == pytest.approx(completions, rel=1e-10)
    assert out["variance"]["irrelevant"] == pytest.approx(total - left, rel=1e-10)


def test_coordinate_shares_see_noise_that_sits_in_few_parameters():
    N, M, D = 300, 2, 40
    full, relevant = _nested(N, M, D, k=0, seed=3)
    g = torch.Generator().manual_seed(4)
    noise = torch.zeros(N * M, D, dtype=torch.float64)
    noise[:, :4] = 6.0 * torch.randn(N * M, 4, generator=g, dtype=torch.float64)  # large, in 4 parameters of 40
    full = relevant + noise
    trace = gq.variance_components(full, relevant, draws=M, n_boot=50)["shares"]["irrelevant"]
    few = torch.zeros(D, dtype=torch.bool)
    few[:4] = True
    out = gq.coordinate_shares(full, relevant, draws=M, groups={"few": few, "rest": ~few, "all": torch.ones(D, dtype=torch.bool)})
    assert trace > 0.6                                      # the summed variance is mostly this noise
    assert out["mean"] < 0.15                               # but 36 of 40 parameters carry none of it
    assert out["groups"]["few"]["mean"] > 0.9 and abs(out["groups"]["rest"]["mean"]) < 0.05
    assert out["groups"]["all"]["trace"] == pytest.approx(trace, rel=1e-9)
    assert out["groups"]["few"]["variance"] + out["groups"]["rest"]["variance"] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="bool mask"):
        gq.coordinate_shares(full, relevant, draws=M, groups={"bad": torch.ones(3, dtype=torch.bool)})


def test_parameter_groups_cover_the_toy_model_once():
    model, _ = toy.load_model()
    groups = gq.parameter_groups(model)
    D = sum(p.numel() for p in model.parameters())
    assert set(groups) >= {"embedding", "attention", "mlp", "norms"}
    assert int(sum(m.long() for m in groups.values()).max()) == 1 and sum(int(m.sum()) for m in groups.values()) == D
    assert int(groups["embedding"].sum()) == model.get_input_embeddings().weight.numel()


def test_variance_components_errors():
    full, relevant = _nested(4, 2, 5, k=1)
    with pytest.raises(ValueError, match="draws"):
        gq.variance_components(full, relevant, draws=3)
    with pytest.raises(ValueError, match="draws"):
        gq.variance_components(full, relevant, draws=1)
    with pytest.raises(ValueError, match="both"):
        gq.variance_components(full, relevant[:, :4], draws=2)
    with pytest.raises(ValueError, match="2 prompt sets"):
        gq.variance_components(full[:2], relevant[:2], draws=2)


@pytest.mark.slow
def test_batch_gradients_draws_share_the_prompts_and_take_callable_weightings(monkeypatch):
    model, tok = toy.load_model()
    problems = toy.load_eval_set()
    sampled = []
    real = rollout.sample_completions

    def recording(model, tokenizer, prompts, **kw):
        sampled.append((tuple(prompts), kw["seed"]))
        return real(model, tokenizer, prompts, **kw)

    monkeypatch.setattr(rollout, "sample_completions", recording)
    W = {"uniform": "uniform", "relevant": lambda ro: (~gq.irrelevant_mask(ro)).float()}
    grads, info = gq.batch_gradients(model, tok, problems, W, batches=4, prompts=2, group_size=3, draws=2, seed=1)
    prompts, seeds = zip(*sampled)
    assert prompts[0] == prompts[1] and prompts[2] == prompts[3] and prompts[0] != prompts[2]
    assert len(set(seeds)) == 4  # every batch samples its own completions
    sampled.clear()
    gq.batch_gradients(model, tok, problems, {"uniform": "uniform"}, batches=2, prompts=2, group_size=3, seed=1)
    assert sampled[0][0] == prompts[0] and sampled[1][0] != prompts[0]  # draws=1: batch b draws its own problems
    assert not torch.equal(grads["uniform"], grads["relevant"])
    out = gq.variance_components(grads["uniform"], grads["relevant"], draws=2, n_boot=50)
    assert 0 <= out["variance"]["irrelevant"] <= out["variance"]["total"]
    with pytest.raises(ValueError, match="divides"):
        gq.batch_gradients(model, tok, problems, W, batches=3, prompts=2, group_size=3, draws=2)
    with pytest.raises(ValueError, match="shape"):
        gq.batch_gradients(model, tok, problems, {"uniform": "uniform", "bad": lambda ro: torch.ones(1, 1)}, batches=2,
                           prompts=1, group_size=2)


# ------------------------------------------------------------------ the share: single labelled completions

def test_completion_noise_shares_on_a_tiny_model():
    model = tiny_llama()
    g = torch.Generator().manual_seed(0)

    def seqs(k):
        out = []
        for i in range(6):
            ids = torch.randint(3, 40, (20,), generator=g)
            irrelevant = torch.zeros(20, dtype=torch.bool)
            irrelevant[8:8 + k] = True
            out.append({"input_ids": ids, "completion": slice(6, 20), "irrelevant": irrelevant,
                        "advantage": 1.0 if i % 2 else -1.0})
        return out

    none = gq.completion_noise_shares(model, seqs(0), n_boot=50)
    assert none["share"] == pytest.approx(0.0, abs=1e-12) and none["n"] == 6
    everything = seqs(12)
    for s in everything:
        s["irrelevant"][6:20] = True
    assert gq.completion_noise_shares(model, everything, n_boot=50)["share"] == pytest.approx(1.0)
    shares = [gq.completion_noise_shares(model, seqs(k), n_boot=50)["share"] for k in (2, 6, 12)]
    assert shares == sorted(shares) and 0 < shares[0] < shares[-1] < 1
    # against a naive per-completion gradient
    s = seqs(4)[0]
    params = list(model.parameters())

    def grad(keep):
        logits = model(input_ids=s["input_ids"][None]).logits[0, 5:19]
        logp = torch.log_softmax(logits, -1).gather(1, s["input_ids"][6:20, None])[:, 0]
        return torch.cat([x.flatten() for x in torch.autograd.grad((logp * keep).sum() * s["advantage"], params)])

    full = grad(torch.ones(14, dtype=torch.float64))
    rel = grad((~s["irrelevant"][6:20]).double())
    got = gq.completion_noise_shares(model, [s], n_boot=10)["per_completion"][0]
    assert got["noise"] == pytest.approx(float(full.pow(2).sum()), rel=1e-6)
    assert got["irrelevant"] == pytest.approx(float(full.pow(2).sum() - rel.pow(2).sum()), rel=1e-6)
    assert all(p.grad is None for p in model.parameters())
    with pytest.raises(ValueError, match="empty"):
        gq.completion_noise_shares(model, [])
    with pytest.raises(ValueError, match="groups"):
        gq.completion_noise_shares(model, seqs(1), groups=[0])


def test_stable_world_rule_ends_the_first_steady_run_of_checkpoints():
    pretrain = _pretrain_script()
    # The rebuilt k = 64 world's curve as issue 39 reports it (greedy accuracy every 50 steps).
    curve = [0.265, 0.445, 0.630, 0.765, 0.720, 0.725, 0.765, 0.285, 0.765, 0.630, 0.865, 0.875]
    history = [{"step": 50 * (i + 1), "greedy_accuracy_all": a} for i, a in enumerate(curve)]
    kept = pretrain.stable_checkpoint(history)
    assert kept["step"] == 300 and kept["accuracy"] == 0.725  # 0.765, 0.720, 0.725: within 0.03 of 0.737
    assert kept["window"] == [[200, 0.765], [250, 0.72], [300, 0.725]]
    assert pretrain.stable_checkpoint(history, tolerance=0.02) is None  # 0.765 is 0.028 from the run's mean
    assert pretrain.stable_checkpoint(history[:5]) is None  # no three steady checkpoints yet
    assert pretrain.stable_checkpoint(history, window=2)["step"] == 250  # 0.765, 0.720: 0.0225 from their mean
    with pytest.raises(ValueError, match="window must be >= 2"):
        pretrain.stable_checkpoint(history, window=1)
