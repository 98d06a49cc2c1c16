"""OAR in verl 0.9.1's v1 trainer (``trainer.use_v1=true``, the default): the weights are computed in
the actor worker and reach the advantage through the v1 trainer's TransferQueue field list, the route
verl's own OTB estimator takes under the legacy trainer (docs/scale.md, "verl").

What is tested and what is not (tests/test_verl_oar.py, run where verl is installed; on this
project's CPU machine in a separate venv, verl 0.9.1 with TransferQueue 0.1.11, torch 2.13 CPU):

- TESTED: `response_weights` (verl's layout: left-padded prompts, right-padded responses ->
  ``(bs, response_length)`` weights, equal to `oar_lite.attribution.token_weights` on the same
  rows); the estimator `compute_oar_grpo_advantage`, registered in verl's registry as
  ``oar_grpo`` (GRPO's advantage from verl's `compute_grpo_outcome_advantage` times the weights;
  weights of 1 give verl's GRPO to the bit); `OARTrainerSync._compute_advantage` on an in-memory
  stand-in for TransferQueue, through verl's own ``PPOTrainer._compute_advantage``.
- UNTESTED (needs Ray actors, an FSDP engine and a GPU): `OARActorRolloutRefWorker.compute_log_prob`
  (the worker side: which fields the worker's TensorDict holds, the FSDP engine's module, holding
  sharded parameters whole through OAR's passes) and a whole run with `main`. A GPU check would be
  ``python scripts/scale/verl_oar.py <verl's GSM8K GRPO overrides> trainer.v1.trainer_mode=oar_sync``.

Why the weights are multiplied in after verl's GRPO estimator and not inside a registered one:
in verl 0.9.1 `verl.trainer.ppo.ray_trainer.compute_advantage` hands a registered estimator fixed
keyword arguments (rewards, mask, ``index``, ``config``, ``reward_baselines``); GDPO and OTB get
more only as named special cases, and verl-project/verl#7473 (open) would pass ``batch`` to any
estimator that accepts it. `compute_oar_grpo_advantage` takes ``batch`` for that day (select it with
``algorithm.adv_estimator=oar_grpo``); until then `OARTrainerSync` keeps ``adv_estimator=grpo`` and
multiplies verl's advantages by the weights it fetched from TransferQueue (the same ``A_i * w_t``).
"""
from __future__ import annotations

import torch

OAR_FIELD = "oar_weights"
"""The TransferQueue field (and TensorDict key) of the per-response-token weights, nested ``(bs, response_len)``."""
COMPUTE_FLAG = "compute_oar_weights"
"""The non-tensor flag the trainer sets in the batch's ``extra_info`` for the worker (as OTB's ``calculate_sum_pi_squared``)."""


def response_weights(policy, tokenizer, prompts: torch.Tensor, responses: torch.Tensor, prompt_mask: torch.Tensor,
                     response_mask: torch.Tensor, *, credit=None, formats=None) -> torch.Tensor:
    """OAR's token weights of verl's padded layout: ``prompts [bs, P]`` left-padded,
    ``responses [bs, R]`` right-padded, their masks; returns ``[bs, R]`` float32 weights (1 on a
    response without a parseable answer and past each response's end). ``credit``: a
    `oar_lite.attribution.CreditConfig` (default OAR-G); ``formats``: answer formats (default all)."""
    from oar_lite.attribution import CreditConfig, token_weights
    from oar_lite.segment import FORMATS, segment_completion_ids, segments_to_masks

    if prompts.shape[0] != responses.shape[0] or prompts.shape != prompt_mask.shape \
            or responses.shape != response_mask.shape:
        raise ValueError(f"expected prompts/prompt_mask [bs, P] and responses/response_mask [bs, R] with one bs, got "
                         f"{tuple(prompts.shape)}, {tuple(prompt_mask.shape)}, {tuple(responses.shape)}, "
                         f"{tuple(response_mask.shape)}")
    P = prompts.shape[1]
    lengths = response_mask.sum(1).tolist()
    segments = []
    for row, n in zip(responses.tolist(), lengths):
        ids = row[: int(n)]
        while ids and ids[-1] in (tokenizer.eos_token_id, tokenizer.pad_token_id):  # the end token is no answer
            ids = ids[:-1]
        segments.append(segment_completion_ids(tokenizer, ids, formats or FORMATS) if ids else None)
    reasoning, answer = segments_to_masks(segments, P, P + responses.shape[1])
    device = prompts.device
    weights = token_weights(policy, torch.cat([prompts, responses], 1), torch.cat([prompt_mask, response_mask], 1),
                            reasoning.to(device), answer.to(device), credit=credit or CreditConfig(),
                            pad_token_id=tokenizer.pad_token_id)
    return weights[:, P:].float().detach()


def _register_estimator():
    from verl.trainer.ppo import core_algos

    core_algos.ADV_ESTIMATOR_REGISTRY.pop("oar_grpo", None)  # this file loaded again: the newer definition wins

    @core_algos.register_adv_est("oar_grpo")
    def compute_oar_grpo_advantage(token_level_rewards, response_mask, index, batch=None, epsilon: float = 1e-6,
                                   norm_adv_by_std_in_grpo: bool = True, config=None, **kwargs):
        """verl's GRPO advantage ``(bs, response_length)`` times OAR's weights ``batch["oar_weights"]``
        (same shape), for a verl whose `compute_advantage` passes ``batch`` (verl-project/verl#7473)."""
        if batch is None or OAR_FIELD not in batch.keys():
            raise ValueError(f"the oar_grpo estimator needs the batch's {OAR_FIELD!r} ({tuple(token_level_rewards.shape)}): "
                             "verl 0.9.1 passes a registered estimator no batch (verl-project/verl#7473 would); use "
                             "trainer.v1.trainer_mode=oar_sync with algorithm.adv_estimator=grpo instead")
        norm = norm_adv_by_std_in_grpo if config is None else config.get("norm_adv_by_std_in_grpo", norm_adv_by_std_in_grpo)
        advantages, _ = core_algos.compute_grpo_outcome_advantage(
            token_level_rewards, response_mask, index, epsilon=epsilon, norm_adv_by_std_in_grpo=norm, config=config)
        weights = batch[OAR_FIELD].to(advantages.dtype)
        if weights.shape != advantages.shape:
            raise ValueError(f"{OAR_FIELD} has shape {tuple(weights.shape)}, the advantages {tuple(advantages.shape)}")
        advantages = advantages * weights * response_mask
        return advantages, advantages

    return compute_oar_grpo_advantage


compute_oar_grpo_advantage = _register_estimator()


def _trainer_classes():
    from tensordict import TensorDict

    from verl.trainer.ppo.v1 import trainer_base
    from verl.trainer.ppo.v1.trainer_base import TRAINER_REGISTRY, register_trainer
    from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync
    from verl.workers.utils.padding import response_to_nested

    TRAINER_REGISTRY.pop("oar_sync", None)  # this file loaded again: the newer definition wins

    @register_trainer("oar_sync")
    class OARTrainerSync(PPOTrainerSync):
        """verl's synchronous v1 trainer; asks the actor for OAR's weights with the old log-probs and
        multiplies the advantages by them (``trainer.v1.trainer_mode=oar_sync``)."""

        def _compute_old_log_prob(self, batch, metrics):
            batch.extra_info[COMPUTE_FLAG] = True
            return super()._compute_old_log_prob(batch, metrics)

        def _compute_advantage(self, batch, metrics):
            if self.config.algorithm.adv_estimator != "grpo":
                raise ValueError(f"oar_sync reshapes GRPO's advantages: set algorithm.adv_estimator=grpo, got "
                                 f"{self.config.algorithm.adv_estimator!r}")
            batch = super()._compute_advantage(batch, metrics)
            tq = trainer_base.tq  # verl's TransferQueue module, as the base class calls it
            data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id,
                                   select_fields=["advantages", "returns", "response_mask", OAR_FIELD])
            mask = data["response_mask"]
            advantages = data["advantages"].to_padded_tensor(0.0)
            weights = data[OAR_FIELD].to_padded_tensor(1.0).to(advantages.dtype)
            if weights.shape != advantages.shape:
                raise ValueError(f"{OAR_FIELD} {tuple(weights.shape)} does not match the advantages "
                                 f"{tuple(advantages.shape)}: the worker must write one weight per response token")
            reshaped = response_to_nested(advantages * weights, mask)
            metrics["oar/weight_mean"] = float((weights * mask.to_padded_tensor(0)).sum() / mask.to_padded_tensor(0).sum())
            return tq.kv_batch_put(keys=batch.keys, partition_id=batch.partition_id,
                                   fields=TensorDict({"advantages": reshaped, "returns": reshaped}, batch_size=len(batch)))

    return OARTrainerSync


OARTrainerSync = _trainer_classes()


def _worker_class():
    from verl.single_controller.base.decorator import make_nd_compute_dataproto_dispatch_fn, register
    from verl.utils import tensordict_utils as tu
    from verl.workers.engine_workers import ActorRolloutRefWorker

    class OARActorRolloutRefWorker(ActorRolloutRefWorker):
        """UNTESTED (see the module's docstring): verl's actor worker, whose ``compute_log_prob`` also
        returns OAR's weights ``oar_weights`` (nested, one per response token) when the trainer asks."""

        @register(dispatch_mode=make_nd_compute_dataproto_dispatch_fn(mesh_name="actor"))
        def compute_log_prob(self, data):
            want = tu.get(data, key=COMPUTE_FLAG, default=False)
            output = self.actor.infer_batch(data)  # what ActorRolloutRefWorker.compute_log_prob does
            if not want or output is None:
                return output.cpu() if output is not None else None
            from oar_lite.attribution import CreditConfig
            from oar_lite.trl import fsdp2_unsharded  # holds FSDP2 shards whole: one pass count per rank

            for key in ("prompts", "responses"):
                if key not in data.keys():
                    raise KeyError(f"OAR needs {key!r} in the actor's batch; it holds {sorted(data.keys())}")
            tokenizer = self.actor.model_config.tokenizer
            prompt_len, response_len = data["prompts"].offsets().diff(), data["responses"].offsets().diff()
            prompts = data["prompts"].to_padded_tensor(tokenizer.pad_token_id)
            width = prompts.shape[1]
            shift = width - prompt_len  # verl's prompts are left-padded: move each row right
            left = torch.full_like(prompts, tokenizer.pad_token_id)
            for i, (s, n) in enumerate(zip(shift.tolist(), prompt_len.tolist())):
                left[i, s:] = prompts[i, :n]
            prompt_mask = (torch.arange(width)[None] >= shift[:, None]).long()
            responses = data["responses"].to_padded_tensor(tokenizer.pad_token_id)
            response_mask = (torch.arange(responses.shape[1])[None] < response_len[:, None]).long()
            module = self.actor.engine.module
            device = next(module.parameters()).device
            with self.actor.engine.eval_mode(), fsdp2_unsharded(module):
                weights = response_weights(module, tokenizer, left.to(device), responses.to(device),
                                           prompt_mask.to(device), response_mask.to(device),
                                           credit=CreditConfig(**dict(self.config.get("oar", {}))))
            output = output.cpu()
            output[OAR_FIELD] = torch.nested.as_nested_tensor(
                [w[: int(n)] for w, n in zip(weights.cpu(), response_len.tolist())], layout=torch.jagged)
            return output

    return OARActorRolloutRefWorker


def main():
    """verl's ``main_ppo`` (v1) with the OAR trainer and worker: ``python scripts/scale/verl_oar.py
    <overrides> trainer.v1.trainer_mode=oar_sync`` (UNTESTED: see the module's docstring). The task
    runner is verl's ``TaskRunnerV1`` with the OAR classes registered first in its Ray process."""
    import os

    import hydra
    import ray

    from verl.trainer import main_ppo
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config
    from verl.utils.device import auto_set_device

    @ray.remote
    class OARTaskRunner(main_ppo.TaskRunnerV1.__ray_metadata__.modified_class):  # Ray keeps the plain class there
        def run(self, config):
            trainer = _trainer_classes()  # registers oar_sync in this process
            worker = ray.remote(_worker_class())

            def with_oar_worker(self):
                type(self).__mro__[1]._init_resource_pool_mgr(self)
                for role in list(self.role_worker_mapping):
                    if "Actor" in str(role):
                        self.role_worker_mapping[role] = worker

            trainer._init_resource_pool_mgr = with_oar_worker
            return super().run(config)

    @hydra.main(config_path=os.path.join(os.path.dirname(main_ppo.__file__), "config"), config_name="ppo_trainer",
                version_base=None)
    def run(config):
        auto_set_device(config)
        validate_config(config=config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))
        if not config.trainer.use_v1 or config.trainer.v1.trainer_mode != "oar_sync":
            raise ValueError("OAR's verl route is the v1 trainer: set trainer.use_v1=true trainer.v1.trainer_mode=oar_sync")
        main_ppo.run_ppo(config, task_runner_class=OARTaskRunner)

    run()


if __name__ == "__main__":
    main()
