"""Launched by tests/test_scale.py (and scripts/gpu_scale.sh) as ``accelerate launch <engine flags>
scale_train.py OUT <scripts/train_trl.py flags>``: runs the script's `main` unchanged under whatever
engine accelerate was given (DDP, FSDP, DeepSpeed ZeRO), and records what each process scored
with OAR, so that a single process can score the same rows again and compare:

- for every call of `oar_lite.attribution.token_weights` made by the trainer: the rows it was
  given (ids, attention mask, reasoning and answer masks), the seed of its generator and the
  token weights it returned;
- before each scoring, the trainable (LoRA) parameters the policy had then, gathered whole
  through ``accelerator.get_state_dict`` (every process takes part; the main process keeps them);
- after training: the engine accelerate ran (``distributed_type``), the class of the wrapped
  model, a digest of the trainable parameters and the parameters themselves.

Each process writes ``OUT/rank<i>.pt``.
"""
import importlib.util
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]


def trainable_state(trainer) -> dict:
    """The trainable parameters, whole, by name (on the main process; ``{}`` elsewhere under
    engines whose full state dict goes to rank 0 only). Every process must call it."""
    model = trainer.model_wrapped
    state = trainer.accelerator.get_state_dict(model)
    if not state:
        return {}
    names = {n for n, p in trainer.accelerator.unwrap_model(model).named_parameters() if p.requires_grad}
    kept = {n: t.detach().to("cpu", torch.float32).clone() for n, t in state.items()
            if n in names or any(n.endswith(m) or m.endswith(n) for m in names)}
    return kept


def engines_on_cpu() -> None:
    """Let accelerate run FSDP and DeepSpeed on CPU processes. accelerate 1.16 applies its FSDP
    and DeepSpeed plugins only to accelerator devices (``AcceleratorState`` switches to
    ``DistributedType.FSDP`` for MULTI_GPU, MULTI_XPU... but not MULTI_CPU, and to DEEPSPEED only
    when ``cpu`` is off): on CPU ``accelerate launch --use_fsdp`` or ``--use_deepspeed`` silently
    trains with DDP. This applies the plugin there too, so FSDP's or ZeRO's sharding runs on gloo."""
    from accelerate.state import AcceleratorState, PartialState
    from accelerate.utils import DistributedType

    init = AcceleratorState.__init__

    def patched(self, *args, fsdp_plugin=None, deepspeed_plugin=None, **kwargs):
        init(self, *args, fsdp_plugin=fsdp_plugin, deepspeed_plugin=deepspeed_plugin, **kwargs)
        if self.distributed_type != DistributedType.MULTI_CPU:
            return
        if fsdp_plugin is not None:
            self.distributed_type = DistributedType.FSDP
            self.fsdp_plugin = fsdp_plugin
        elif deepspeed_plugin is not None:
            from deepspeed import comm

            comm.init_distributed(dist_backend="gloo", auto_mpi_discovery=False)
            self.distributed_type = DistributedType.DEEPSPEED
            deepspeed_plugin.set_mixed_precision(self._mixed_precision)
            deepspeed_plugin.select(_from_accelerator_state=True)
            self.deepspeed_plugins = deepspeed_plugin
        PartialState._shared_state["distributed_type"] = self.distributed_type

    AcceleratorState.__init__ = patched


def main():
    import os
    if os.environ.get("SCALE_ENGINES_ON_CPU") == "1":
        engines_on_cpu()
    if os.environ.get("SCALE_TRACEBACK_AFTER"):  # a hung engine: every process prints where it waits, then exits
        import faulthandler

        faulthandler.dump_traceback_later(float(os.environ["SCALE_TRACEBACK_AFTER"]), exit=True)
    out, argv = Path(sys.argv[1]), sys.argv[2:]
    spec = importlib.util.spec_from_file_location("train_trl", ROOT / "scripts" / "train_trl.py")
    train_trl = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(train_trl)

    import oar_lite.trl as oar_trl
    from oar_lite.trl import OARGRPOTrainer

    calls, params = [], []
    scorer = oar_trl.token_weights

    def recording(policy, input_ids, attention_mask, reasoning, answer, *, generator, **kwargs):
        seed = generator.initial_seed()
        weights, scores = scorer(policy, input_ids, attention_mask, reasoning, answer, generator=generator, **kwargs)
        calls.append({"input_ids": input_ids.cpu(), "attention_mask": attention_mask.cpu(),
                      "reasoning": reasoning.cpu(), "answer": answer.cpu(), "seed": seed,
                      "weights": weights.detach().float().cpu(), "policy_class": type(policy).__name__})
        return weights, scores

    original = OARGRPOTrainer._oar_weights

    def with_params(self, output):
        params.append(trainable_state(self))
        return original(self, output)

    oar_trl.token_weights = recording
    OARGRPOTrainer._oar_weights = with_params
    trainer = train_trl.main(argv)
    state = trainer.accelerator.state
    final = trainable_state(trainer)
    record = {
        "rank": state.process_index,
        "world_size": state.num_processes,
        "backend": torch.distributed.get_backend() if torch.distributed.is_initialized() else None,
        "distributed_type": str(state.distributed_type),
        "wrapped_class": type(trainer.model_wrapped).__name__,
        "calls": calls,
        "params": params,
        "final": final,
        "log_history": trainer.state.log_history,
        "credit": trainer.args.oar_credit,
        "pad_token_id": trainer.processing_class.pad_token_id,
    }
    torch.save(record, out / f"rank{state.process_index}.pt")


def rescore(out: Path, lora_rank: int, device: str = "cpu") -> list[dict]:
    """Score every recorded call again in this (single) process, with the shipped toy model and
    a LoRA adapter (as scripts/train_trl.py builds it) holding the parameters the main process
    recorded before that step's scoring. Returns, per call, the process, the step index, the
    largest absolute difference from the weights the process computed, and the call's shape.
    On CPU it scores with one thread, as the launched processes did (``OMP_NUM_THREADS=1``): with
    another thread count the reductions round differently (OAR-G's weights then differ by ~1e-3)."""
    from peft import LoraConfig, get_peft_model

    from oar_lite.course import toy

    records = [torch.load(p, weights_only=False) for p in sorted(Path(out).glob("rank*.pt"))]
    main_record = next(r for r in records if r["rank"] == 0)
    model, _ = toy.load_model()
    policy = get_peft_model(model, LoraConfig(r=lora_rank, lora_alpha=2 * lora_rank, lora_dropout=0.05,
                                              target_modules="all-linear", task_type="CAUSAL_LM"))
    policy.to(device)
    lora = {n for n, p in policy.named_parameters() if p.requires_grad}
    results, threads = [], torch.get_num_threads()
    if device == "cpu":
        torch.set_num_threads(1)
    try:
        results = _rescore(records, main_record, policy, lora, device)
    finally:
        torch.set_num_threads(threads)
    return results


def _rescore(records, main_record, policy, lora, device) -> list[dict]:
    from oar_lite.attribution import token_weights

    results = []
    for record in records:
        for step, call in enumerate(record["calls"]):
            params = main_record["params"][step]
            if set(params) != lora:
                raise ValueError(f"rank 0 recorded {len(params)} trainable tensors before step {step}, "
                                 f"expected the {len(lora)} LoRA tensors")
            missing, unexpected = policy.load_state_dict(params, strict=False)
            assert not unexpected, unexpected
            rows = [call[k].to(device) for k in ("input_ids", "attention_mask", "reasoning", "answer")]
            weights = token_weights(policy, *rows, credit=record["credit"], pad_token_id=record["pad_token_id"],
                                    generator=torch.Generator().manual_seed(call["seed"])).cpu()
            results.append({"rank": record["rank"], "step": step, "shape": tuple(call["weights"].shape),
                            "max_abs_diff": (weights.float() - call["weights"]).abs().max().item()})
    return results


if __name__ == "__main__":
    main()
