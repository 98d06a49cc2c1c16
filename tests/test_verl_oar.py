"""scripts/scale/verl_oar.py against verl's own code (0.9.1): needs verl and TransferQueue, which this
project does not install (docs/scale.md says how the tests were run: a separate venv); skipped without them."""
import random

import pytest
import torch

pytest.importorskip("verl")
pytest.importorskip("transfer_queue")

from conftest import load_script  # noqa: E402

from oar_lite.attribution import CreditConfig, token_weights  # noqa: E402
from oar_lite.course import toy  # noqa: E402
from oar_lite.segment import segment_completion_ids, segments_to_masks  # noqa: E402


@pytest.fixture(scope="module")
def adapter():
    return load_script("scale/verl_oar")


@pytest.fixture(scope="module")
def toy_batch():
    """Four toy rows in verl's layout: prompts left-padded, responses right-padded (one without an answer)."""
    model, tok = toy.load_model(dtype=torch.float64)  # float64: padding changes no score beyond 1e-12
    rng = random.Random(0)
    problems = toy.make_problems(4, seed=5, digits=(2, 3))
    prompts = [tok(toy.make_prompt(p["a"], p["b"]))["input_ids"] for p in problems]
    responses = [tok(toy.chain_of_thought(p["a"], p["b"], rng=rng), add_special_tokens=False)["input_ids"]
                 + [tok.eos_token_id] for p in problems]
    responses[2] = responses[2][:5]  # cut before its answer
    P, R = max(map(len, prompts)), max(map(len, responses))
    pad = tok.pad_token_id
    prompt_ids = torch.tensor([[pad] * (P - len(p)) + p for p in prompts])
    prompt_mask = torch.tensor([[0] * (P - len(p)) + [1] * len(p) for p in prompts])
    response_ids = torch.tensor([r + [pad] * (R - len(r)) for r in responses])
    response_mask = torch.tensor([[1] * len(r) + [0] * (R - len(r)) for r in responses])
    return model, tok, prompt_ids, prompt_mask, response_ids, response_mask


def test_response_weights_are_token_weights_on_verl_layout(adapter, toy_batch):
    model, tok, prompts, prompt_mask, responses, response_mask = toy_batch
    credit = CreditConfig(method="oar-p")
    got = adapter.response_weights(model, tok, prompts, responses, prompt_mask, response_mask, credit=credit,
                                   formats=toy.FORMATS)
    assert got.shape == responses.shape
    # the same rows scored one by one, unpadded, by the library
    P = prompts.shape[1]
    for i in range(prompts.shape[0]):
        p = prompts[i][prompt_mask[i].bool()]
        n = int(response_mask[i].sum())
        r = responses[i, :n]
        seg = segment_completion_ids(tok, r[:-1].tolist(), toy.FORMATS)
        if seg is None:
            assert i == 2 and torch.equal(got[i], torch.ones(responses.shape[1]))
            continue
        ids = torch.cat([p, r])[None]
        reasoning, answer = segments_to_masks([seg], len(p), ids.shape[1])
        alone = token_weights(model, ids, torch.ones_like(ids), reasoning, answer, credit=credit,
                              pad_token_id=tok.pad_token_id)[0, len(p):]
        torch.testing.assert_close(got[i, :n], alone.float(), rtol=0, atol=1e-6)
        assert (got[i, n:] == 1).all() and (got[i, :n] != 1).any(), "pad columns 1, reasoning reshaped"
    assert P == prompts.shape[1]


def test_estimator_is_registered_and_is_grpo_times_weights(adapter):
    from verl.trainer.ppo import core_algos

    fn = core_algos.get_adv_estimator_fn("oar_grpo")
    assert fn is adapter.compute_oar_grpo_advantage
    g = torch.Generator().manual_seed(0)
    bs, R = 8, 6
    mask = (torch.arange(R)[None] < torch.randint(2, R + 1, (bs, 1), generator=g)).float()
    rewards = torch.zeros(bs, R)
    rewards[torch.arange(bs), mask.sum(1).long() - 1] = torch.randint(0, 2, (bs,), generator=g).float()
    index = __import__("numpy").array(["a"] * 4 + ["b"] * 4, dtype=object)
    grpo, _ = core_algos.compute_grpo_outcome_advantage(rewards, mask, index)
    ones = fn(rewards, mask, index, batch={"oar_weights": torch.ones(bs, R)})[0]
    assert torch.equal(ones, grpo * mask), "weights of 1: verl's GRPO to the bit"
    w = torch.rand(bs, R, generator=g) + 0.5
    torch.testing.assert_close(fn(rewards, mask, index, batch={"oar_weights": w})[0], grpo * w * mask)
    with pytest.raises(ValueError, match="verl-project/verl#7473"):
        fn(rewards, mask, index)


class _Store:
    """An in-memory stand-in for TransferQueue's key-value calls (kv_batch_get / kv_batch_put)."""

    def __init__(self):
        self.rows = {}

    def kv_batch_put(self, keys, partition_id, fields=None, tags=None):
        for i, k in enumerate(keys):
            row = self.rows.setdefault(k, {})
            for name, value in (fields.items() if fields is not None else []):
                row[name] = value[i]
        return self.batch

    def kv_batch_get(self, keys, partition_id, select_fields):
        from tensordict import TensorDict

        out = {}
        for name in select_fields:
            values = [self.rows[k].get(name) for k in keys]
            if any(v is None for v in values):
                continue
            if isinstance(values[0], torch.Tensor) and values[0].dim() == 1:
                out[name] = torch.nested.as_nested_tensor(values, layout=torch.jagged)
            elif isinstance(values[0], torch.Tensor):
                out[name] = torch.stack(values)
            else:
                from tensordict import NonTensorStack

                out[name] = NonTensorStack(*values)
        return TensorDict(out, batch_size=len(keys))


def test_v1_trainer_multiplies_verl_grpo_advantages_by_the_actor_weights(adapter, monkeypatch):
    """The v1 trainer's _compute_advantage (verl's own, through super()) then OAR's weights read from
    the field the actor wrote: advantages = verl's GRPO advantages x weights, on each response token."""
    from omegaconf import OmegaConf

    import verl.trainer.ppo.v1.trainer_base as base
    from verl.trainer.ppo import core_algos

    store = _Store()
    monkeypatch.setattr(base, "tq", store)
    g = torch.Generator().manual_seed(1)
    keys = [f"uid{i // 4}_{i % 4}_0" for i in range(8)]  # verl's {uid}_{session}_{output}: one output per session
    lengths = torch.randint(2, 7, (8,), generator=g).tolist()
    weights = [torch.rand(n, generator=g) + 0.5 for n in lengths]
    scores = []
    for i, (k, n) in enumerate(zip(keys, lengths)):
        s = torch.zeros(n)
        s[-1] = float(i % 3 == 0)
        scores.append(s)
        store.rows[k] = {"uid": f"uid{i // 4}", "response_mask": torch.ones(n, dtype=torch.long), "rm_scores": s,
                         adapter.OAR_FIELD: weights[i]}

    class Meta:
        def __init__(self):
            self.keys, self.partition_id, self.extra_info = keys, "train", {}

        def __len__(self):
            return len(self.keys)

    store.batch = Meta()
    config = OmegaConf.create({"algorithm": {"adv_estimator": "grpo", "use_kl_in_reward": False, "gamma": 1.0,
                                             "lam": 1.0, "norm_adv_by_std_in_grpo": True},
                               "actor_rollout_ref": {"rollout": {"n": 4}}})
    trainer = object.__new__(adapter.OARTrainerSync)
    trainer.config = config
    metrics = {}
    trainer._compute_advantage(store.batch, metrics)
    # verl's GRPO on the same rows, padded
    R = max(lengths)
    mask = torch.tensor([[1.0] * n + [0.0] * (R - n) for n in lengths])
    rewards = torch.stack([torch.cat([s, torch.zeros(R - len(s))]) for s in scores])
    grpo, _ = core_algos.compute_grpo_outcome_advantage(rewards, mask, __import__("numpy").array(
        [f"uid{i // 4}" for i in range(8)], dtype=object))
    for i, k in enumerate(keys):
        got = store.rows[k]["advantages"]
        assert got.shape == (lengths[i],)
        torch.testing.assert_close(got, grpo[i, : lengths[i]] * weights[i])
        torch.testing.assert_close(store.rows[k]["returns"], got)
    assert grpo.abs().sum() > 0, "some group has a reward spread, so the check can fail"
    assert 0.5 < metrics["oar/weight_mean"] < 1.5
