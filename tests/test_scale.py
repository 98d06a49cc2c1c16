"""`OARGRPOTrainer` with LoRA under accelerate's FSDP2 and DeepSpeed ZeRO (2 and 3) on two CPU
processes (gloo), OAR-G and OAR-P: the token weights each process computes on its sharded model
equal, to the last bit, those a single process computes on the same rows with the same adapter
(docs/scale.md; FSDP1 does not run on CPU: scripts/gpu_scale.sh). Under FSDP2, OAR-P crashed
with a collective mismatch before `oar_lite.trl.fsdp2_unsharded`. accelerate 1.16 applies
neither engine on CPU by itself (``AcceleratorState`` falls back to DDP there); the helper's
`engines_on_cpu` applies them, and each test checks that the engine ran, so the day accelerate
does it unpatched the patch can go.

Each run: the toy model, LoRA r=4, 2 steps, 4 rows per process, one thread per process."""
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytest.importorskip("trl")

ROOT = Path(__file__).resolve().parent.parent
HELPER = ROOT / "tests" / "helpers" / "scale_train.py"
sys.path.insert(0, str(HELPER.parent))
from scale_train import rescore  # noqa: E402

LORA_RANK = 4
FSDP = ["--use_fsdp", "--fsdp_auto_wrap_policy", "TRANSFORMER_BASED_WRAP",
        "--fsdp_transformer_layer_cls_to_wrap", "LlamaDecoderLayer", "--fsdp_state_dict_type", "FULL_STATE_DICT"]
ENGINES = {
    # FSDP1 does not run on CPU: torch's FSDP1 takes a CUDA-like compute device ("Inconsistent
    # compute device and `device_id`: cpu vs cpu:0"); scripts/gpu_scale.sh runs it on GPUs.
    "fsdp2": (FSDP + ["--fsdp_version", "2"], "FSDP", "FSDPPeftModelForCausalLM"),
    "zero2": (["--use_deepspeed", "--deepspeed_config_file", "{zero2}"], "DEEPSPEED", "DeepSpeedEngine"),
    "zero3": (["--use_deepspeed", "--deepspeed_config_file", "{zero3}"], "DEEPSPEED", "DeepSpeedEngine"),
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(tmp_path: Path, engine: str, method: str, steps: int = 2, patched: bool = True) -> list[dict]:
    flags, _, _ = ENGINES[engine]
    if engine.startswith("zero"):
        pytest.importorskip("deepspeed", reason="DeepSpeed is the 'scale' extra: pip install 'oar-lite[scale]'")
    flags = [f.format(zero2=ROOT / "scripts" / "scale" / "zero2.json", zero3=ROOT / "scripts" / "scale" / "zero3.json")
             for f in flags]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "SCALE_ENGINES_ON_CPU": "1" if patched else "0", "TOKENIZERS_PARALLELISM": "false",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--num_processes", "2", "--num_machines", "1",
           "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port", str(_free_port()), *flags,
           str(HELPER), str(tmp_path), "--model", "toy", "--dataset", "toy", "--lora", "--lora-rank", str(LORA_RANK),
           "--method", method, "--steps", str(steps), "--num-problems", "16", "--output-dir", str(tmp_path / "run"),
           "--per_device_train_batch_size", "4", "--num_generations", "4", "--save_strategy", "no",
           # one micro-batch per step, no recomputation, float32 (the DeepSpeed configs' precision): what these checks
           # count and compare (the script's laptop recipe accumulates 4, and takes bfloat16 on a CPU that has it)
           "--gradient_accumulation_steps", "1", "--gradient_checkpointing", "false", "--bf16", "false"]
    proc = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return [torch.load(tmp_path / f"rank{i}.pt", weights_only=False) for i in range(2)]


@pytest.mark.slow
@pytest.mark.parametrize("method", ["oar-g", "oar-p"])
@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_sharded_processes_score_as_one_process(tmp_path, engine, method):
    _, distributed_type, wrapped = ENGINES[engine]
    ranks = launch(tmp_path, engine, method)
    for i, rank in enumerate(ranks):
        # the engine asked for is the one that ran (not DDP), on gloo
        assert rank["rank"] == i and rank["world_size"] == 2 and rank["backend"] == "gloo"
        assert rank["distributed_type"].endswith(distributed_type), rank["distributed_type"]
        assert rank["wrapped_class"] == wrapped, rank["wrapped_class"]
        assert rank["credit"].method.startswith(method)
        assert len(rank["calls"]) == 2 and all(c["weights"].shape[0] == 4 for c in rank["calls"])
        logged = [h for h in rank["log_history"] if "oar/weight_std" in h]
        assert [h["step"] for h in logged] == [1, 2] and all(h["oar/weight_std"] > 0 for h in logged)
    before, after = ranks[0]["params"]
    lora_b = [n for n in before if "lora_B" in n]
    # LoRA B starts at zero; the first step moved it, so the second scoring used a trained adapter
    assert lora_b and all(before[n].abs().max() == 0 for n in lora_b)
    assert any(after[n].abs().max() > 0 for n in lora_b)
    assert set(ranks[0]["final"]) == set(before) and any(
        not torch.equal(ranks[0]["final"][n], after[n]) for n in lora_b)

    results = rescore(tmp_path, LORA_RANK)
    assert sorted((r["rank"], r["step"]) for r in results) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    for r in results:
        assert r["max_abs_diff"] == 0.0, r


@pytest.mark.slow
def test_accelerate_alone_trains_fsdp_as_ddp_on_cpu(tmp_path):
    """Why the helper patches accelerate: on CPU processes, ``--use_fsdp`` alone gives DDP. The
    day this fails, accelerate runs FSDP on CPU by itself and `engines_on_cpu` can go."""
    ranks = launch(tmp_path, "fsdp2", "oar-p", steps=1, patched=False)
    assert [r["distributed_type"] for r in ranks] == ["DistributedType.MULTI_CPU"] * 2
    assert [r["wrapped_class"] for r in ranks] == ["DistributedDataParallel"] * 2


FSDP2_UNSHARDED = """
import torch, torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from oar_lite.trl import fsdp2_unsharded

dist.init_process_group("gloo", init_method="tcp://127.0.0.1:{port}", rank=0, world_size=1)
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 1))
layers = list(model)
for layer in layers:
    fully_shard(layer)
fully_shard(model)
x = torch.randn(3, 4, requires_grad=True)
groups = [g for layer in layers for g in layer._get_fsdp_state()._fsdp_param_groups]
settings = lambda: [(g.post_forward_mesh_info, g.reshard_after_backward) for g in groups]
model(x).sum().backward()
before = settings()
assert not any(g.is_unsharded for g in groups)  # each layer regathers its parameters in each pass
with fsdp2_unsharded(model):
    for _ in range(2):  # OAR-G's passes: forward, then the gradient w.r.t. the input only
        (grad,) = torch.autograd.grad(model(x).sum(), x)
        assert all(g.is_unsharded for g in groups), "a pass resharded a layer: the next one would gather again"
assert not any(g.is_unsharded for g in groups) and settings() == before
print("ok")
torch.__version__ = "2.12.0"  # a torch whose private FSDP2 state was never tested: refused under FSDP2 only
with fsdp2_unsharded(torch.nn.Linear(4, 1)):
    pass
try:
    with fsdp2_unsharded(model):
        raise AssertionError("entered under an untested torch")
except RuntimeError as err:
    assert "torch 2.12.0 is installed" in str(err) and "OAR_LITE_ANY_TORCH=1" in str(err), err
    assert not any(g.is_unsharded for g in groups) and settings() == before  # refused before touching a module
    print("refused")
"""


def test_fsdp2_unsharded_holds_parameters_whole_through_passes_and_restores():
    """`fsdp2_unsharded` on one gloo process: inside, forward and backward passes leave every
    FSDP2 layer whole (no gather per pass, whose count would differ between processes); after,
    the layers are sharded again with their reshard settings as before. Under a torch outside
    `FSDP2_TESTED_TORCH` (whose private state it restores) it refuses FSDP2 models, not others."""
    pytest.importorskip("torch.distributed.fsdp", reason="FSDP2")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", FSDP2_UNSHARDED.format(port=_free_port())], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "ok" in proc.stdout and "refused" in proc.stdout, proc.stderr[-3000:]
