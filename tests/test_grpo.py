"""GRPO pieces: group advantages and the clipped surrogate, against hand computations."""
import math

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


# ----------------------------------------------------------------------------- edge cases (issue 15, item 5)

def test_token_advantages_with_integer_weights_are_not_truncated():
    adv = torch.tensor([0.5, -1.5])
    weights = torch.tensor([[1, 2, 0], [1, 1, 3]])  # integer weights
    out = token_advantages(adv, weights)
    assert out.is_floating_point()
    torch.testing.assert_close(out, torch.tensor([[0.5, 1.0, 0.0], [-1.5, -1.5, -4.5]]))
    # float64 weights keep their precision; bf16 advantages with float32 weights compute in float32
    assert token_advantages(adv, weights.double()).dtype == torch.float64
    assert token_advantages(adv.bfloat16(), weights.float()).dtype == torch.float32


def test_token_advantages_shape_mismatch_is_a_clear_error():
    with pytest.raises(ValueError, match=r"advantages \[B\] and weights \[B, T\]"):
        token_advantages(torch.zeros(3), torch.ones(2, 4))
    with pytest.raises(ValueError, match="advantages"):
        token_advantages(torch.zeros(2, 1), torch.ones(2, 4))


def _loss_inputs():
    g = torch.Generator().manual_seed(0)
    logprobs = -torch.rand(2, 4, generator=g, dtype=torch.float64) - 0.1
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]])
    return logprobs, mask


def test_policy_loss_ignores_minus_inf_at_masked_positions():
    logprobs, mask = _loss_inputs()
    adv = torch.tensor([1.0, -1.0], dtype=torch.float64)
    expected, _ = policy_loss(logprobs, logprobs, adv, mask, ref_logprobs=logprobs, beta=0.1)
    padded = logprobs.masked_fill(mask == 0, float("-inf")).requires_grad_(True)
    old = logprobs.masked_fill(mask == 0, float("-inf"))
    loss, metrics = policy_loss(padded, old, adv, mask, ref_logprobs=old, beta=0.1)
    assert torch.isfinite(loss)
    torch.testing.assert_close(loss, expected)
    assert all(math.isfinite(v) for v in metrics.values())
    loss.backward()
    assert torch.isfinite(padded.grad).all()
    assert (padded.grad[mask == 0] == 0).all()


def test_policy_loss_refuses_minus_inf_at_real_tokens():
    logprobs, mask = _loss_inputs()
    bad = logprobs.clone()
    bad[0, 0] = float("-inf")
    with pytest.raises(ValueError, match="not finite"):
        policy_loss(bad, logprobs, torch.ones(2), mask)
    with pytest.raises(ValueError, match="not finite"):
        policy_loss(logprobs, bad, torch.ones(2), mask)


def test_policy_loss_empty_batch_is_a_clear_error():
    empty = torch.zeros(0, 4)
    with pytest.raises(ValueError, match="empty batch"):
        policy_loss(empty, empty, torch.zeros(0), empty)


def test_policy_loss_shape_mismatches_are_clear_errors():
    logprobs, mask = _loss_inputs()
    with pytest.raises(ValueError, match="ref_logprobs"):
        policy_loss(logprobs, logprobs, torch.ones(2), mask, ref_logprobs=logprobs[:, :3], beta=0.1)
    with pytest.raises(ValueError, match="advantages"):
        policy_loss(logprobs, logprobs, torch.ones(3), mask)


def test_group_advantages_edge_cases():
    assert group_advantages(torch.zeros(0), 4).shape == (0,)
    torch.testing.assert_close(group_advantages(torch.tensor([1, 0, 0, 0]), 4),  # integer rewards
                               group_advantages(torch.tensor([1.0, 0, 0, 0]), 4))
    with pytest.raises(ValueError, match="group_size"):
        group_advantages(torch.zeros(4), 2.5)
