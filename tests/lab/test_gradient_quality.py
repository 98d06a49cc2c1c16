"""`oar_lite.lab.gradient_quality`: what credit does to one batch's policy gradient."""
import pytest
import torch

from oar_lite.lab import gradient_quality as gq
from oar_lite.course import toy


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


@pytest.mark.slow
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
    shares = gq.blame_shares(info["rows"], info["weights"])
    if shares["oracle"]["n"]:  # wrong completions with a wrong token: the oracle puts more mass on them
        assert shares["oracle"]["share"] > shares["uniform"]["share"]
    with pytest.raises(ValueError, match="weighting"):
        gq.batch_gradients(model, tok, problems, {"uniform": 3}, batches=2)
    # A shared reshaping goes to the weightings that take it: plain GRPO's gradient is the same with boost 9.
    boosted, _ = gq.batch_gradients(model, tok, problems, {"uniform": "uniform", "oracle": "oracle"}, batches=2,
                                    prompts=4, group_size=4, seed=3, reshape={"boost": 9})
    assert torch.equal(boosted["uniform"], grads["uniform"][:2]) and torch.equal(boosted["oracle"], grads["oracle"][:2])
    with pytest.raises(ValueError, match=r"\['noise_std'\] are taken by none of the methods \['uniform', 'oracle'\]"):
        gq.batch_gradients(model, tok, problems, {"uniform": "uniform", "oracle": "oracle"}, batches=2,
                           reshape={"noise_std": 0.5})


def test_gradient_quality_benchmark_writes_its_report(tmp_path):
    from benchmarks import gradient_quality as bench
    report = bench.main(["--batches", "2", "--prompts", "2", "--group-size", "2", "--json", str(tmp_path / "gq.json")])
    assert set(report["stats"]) == set(bench.WEIGHTINGS) and (tmp_path / "gq.png").exists()
    assert set(report["blame"]) == set(bench.WEIGHTINGS) | {"_tokens"}
    assert report["command"].endswith("--json " + str(tmp_path / "gq.json"))


def test_snr_ratio_interval_ranks_a_quieter_weighting():
    torch.manual_seed(0)
    truth = torch.randn(40)
    batches = 80
    loud = truth + 3.0 * torch.randn(batches, 40)
    quiet = truth + 1.0 * torch.randn(batches, 40)       # same signal, a third of the noise
    same = truth + 3.0 * torch.randn(batches, 40)        # as noisy as uniform
    grads = {"uniform": loud, "quiet": quiet, "same": same}
    stats = gq.gradient_stats(grads)
    ci = gq.snr_ratio_intervals(grads, n_boot=500)
    assert ci["uniform"] == (1.0, 1.0)
    ratio = stats["quiet"]["snr"] / stats["uniform"]["snr"]
    assert ci["quiet"][0] < ratio < ci["quiet"][1] and ci["quiet"][0] > 3  # clearly above uniform
    assert ci["same"][0] < 1 < ci["same"][1]                             # indistinguishable from uniform
    with pytest.raises(ValueError, match="reference"):
        gq.snr_ratio_intervals({"quiet": quiet})
    with pytest.raises(ValueError, match="same 80 batches"):
        gq.snr_ratio_intervals({"uniform": loud, "short": quiet[:10]})


def test_snr_ratio_intervals_do_not_depend_on_the_column_blocks(monkeypatch):
    """The Gram matrices summed over blocks of 7 columns give the intervals of one block."""
    g = torch.Generator().manual_seed(1)
    grads = {"uniform": torch.randn(12, 40, generator=g), "quiet": 0.3 * torch.randn(12, 40, generator=g) + 1}
    whole = gq.snr_ratio_intervals(grads, n_boot=200)
    monkeypatch.setattr(gq, "STATS_BLOCK_BYTES", 12 * 7 * 8)
    blocked = gq.snr_ratio_intervals(grads, n_boot=200)
    for label in grads:
        assert blocked[label] == pytest.approx(whole[label], rel=1e-10)


def test_weight_mass_on_the_tokens_a_mask_weighting_zeroes():
    info = {"weights": {
        "relevant": [torch.tensor([1.0, 0.0, 0.0, 1.0]), torch.tensor([0.0, 1.0])],
        "uniform": [torch.ones(4), torch.ones(2)],
        "peaked": [torch.tensor([0.0, 3.0, 1.0, 0.0]), torch.tensor([0.0, 0.0])]}}
    out = gq.weight_mass_on(info)
    assert out["uniform"] == {"irrelevant_mass": pytest.approx(0.5), "effective_share": pytest.approx(1.0), "rows": 2}
    # the second row's weights sum to 0 and are left out; the first puts all of its mass off the relevant tokens
    assert out["peaked"] == {"irrelevant_mass": pytest.approx(1.0), "effective_share": pytest.approx(16 / (4 * 10)), "rows": 1}
    with pytest.raises(ValueError, match="no weighting 'labels'"):
        gq.weight_mass_on(info, "labels")
