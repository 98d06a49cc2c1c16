"""GRPO pieces: group advantages and the clipped surrogate, against hand computations."""
import pytest
import torch

from oar_lite import group_advantages, policy_loss, token_advantages


def test_group_advantages_by_hand():
    r = torch.tensor([1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.0])
    adv = group_advantages(r, 4)
    g1 = torch.tensor([1.0, 0, 0, 0])
    expected1 = (g1 - 0.25) / (g1.std() + 1e-4)
    torch.testing.assert_close(adv[:4], expected1)
    torch.testing.assert_close(adv[4:], -expected1.flip(0))
    assert adv.view(2, 4).sum(1).abs().max() < 1e-6


def test_equal_rewards_give_zero_never_nan():
    for scale in ("group", "batch", "none"):
        adv = group_advantages(torch.tensor([1.0, 1, 1, 0, 0, 0]), 3, scale=scale)
        assert torch.isfinite(adv).all()
        if scale != "batch":
            assert torch.equal(adv, torch.zeros(6))
    assert torch.equal(group_advantages(torch.tensor([1.0, 0.0]), 1), torch.zeros(2))


def test_batch_and_none_scaling():
    r = torch.tensor([1.0, 0, 1, 1])
    centred = torch.tensor([0.5, -0.5, 0, 0])
    torch.testing.assert_close(group_advantages(r, 2, scale="none"), centred)
    torch.testing.assert_close(group_advantages(r, 2, scale="batch"), centred / (r.std() + 1e-4))


@pytest.mark.parametrize("kwargs,match", [
    (dict(group_size=3), "divide"),
    (dict(group_size=2, scale="global"), "unknown scale"),
])
def test_group_advantages_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        group_advantages(torch.ones(4), **kwargs)
    with pytest.raises(ValueError, match="NaN"):
        group_advantages(torch.tensor([1.0, float("nan")]), 2)


def test_on_policy_loss_is_minus_mean_advantage_and_gradient():
    B, T = 3, 5
    logp = torch.randn(B, T, requires_grad=True)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0], [1, 1, 1, 0, 0]])
    adv = torch.tensor([1.0, -2.0, 0.5])
    loss, metrics = policy_loss(logp, logp.detach(), adv, mask, loss_type="grpo")
    assert loss.item() == pytest.approx(-adv.mean().item(), abs=1e-6)
    (grad,) = torch.autograd.grad(loss, logp)
    expected = -(adv[:, None] * mask / mask.sum(1, keepdim=True)) / B  # d(ratio)/d(logp) = 1 at ratio 1
    torch.testing.assert_close(grad, expected)
    assert metrics["clip_fraction"] == 0 and metrics["ratio_mean"] == pytest.approx(1.0)

    dapo, _ = policy_loss(logp, logp.detach(), adv, mask, loss_type="dapo")
    assert dapo.item() == pytest.approx(-(adv[:, None] * mask).sum().item() / mask.sum().item(), abs=1e-6)


def test_clipping_blocks_gradient_beyond_the_trust_region():
    old = torch.zeros(1, 2)
    logp = torch.log(torch.tensor([[1.5, 0.5]])).requires_grad_(True)  # ratios 1.5 and 0.5
    adv = torch.tensor([[1.0, -1.0]])
    loss, metrics = policy_loss(logp, old, adv, torch.ones(1, 2), clip_eps=0.2)
    (grad,) = torch.autograd.grad(loss, logp)
    assert torch.equal(grad, torch.zeros(1, 2))
    assert metrics["clip_fraction"] == 1.0
    loss_high, _ = policy_loss(logp, old, adv, torch.ones(1, 2), clip_eps=0.2, clip_eps_high=0.6)
    (grad_high,) = torch.autograd.grad(loss_high, logp)
    assert grad_high[0, 0] < 0 and grad_high[0, 1] == 0  # clip-higher lets the positive token move


def test_token_advantages_with_unit_weights_equal_sequence_advantages():
    logp = torch.randn(2, 4, requires_grad=True)
    old = logp.detach() + 0.1 * torch.randn(2, 4)
    mask = torch.ones(2, 4)
    adv = torch.tensor([0.7, -0.3])
    a, _ = policy_loss(logp, old, adv, mask)
    b, _ = policy_loss(logp, old, token_advantages(adv, torch.ones(2, 4)), mask)
    torch.testing.assert_close(a, b)
    w = torch.tensor([[1.0, 2.0, 0.5, 1.0], [1.0, 1.0, 1.0, 1.0]])
    torch.testing.assert_close(token_advantages(adv, w), adv[:, None] * w)


def test_kl_term():
    logp = torch.log(torch.tensor([[0.5, 0.25]]))
    ref = torch.log(torch.tensor([[0.25, 0.25]]))
    _, m0 = policy_loss(logp, logp, torch.zeros(1), torch.ones(1, 2), ref_logprobs=logp, beta=0.1)
    assert m0["kl"] == pytest.approx(0.0)
    loss, m = policy_loss(logp, logp, torch.zeros(1), torch.ones(1, 2), ref_logprobs=ref, beta=0.1)
    k3 = (0.5 - torch.log(torch.tensor(0.5)) - 1).item()  # exp(d) - d - 1 with d = log(0.25/0.5)
    assert m["kl"] == pytest.approx(k3 / 2, rel=1e-5)
    assert loss.item() == pytest.approx(0.1 * k3 / 2, rel=1e-5)
    with pytest.raises(ValueError, match="ref_logprobs"):
        policy_loss(logp, logp, torch.zeros(1), torch.ones(1, 2), beta=0.1)


def test_policy_loss_bad_input():
    x = torch.zeros(2, 3)
    with pytest.raises(ValueError, match="loss_type"):
        policy_loss(x, x, torch.zeros(2), x, loss_type="sum")
    with pytest.raises(ValueError, match=r"\[B\] or \[B, T\]"):
        policy_loss(x, x, torch.zeros(3), x)
    with pytest.raises(ValueError, match=r"\[B, T\]"):
        policy_loss(x, torch.zeros(2, 4), torch.zeros(2), x)
