#!/usr/bin/env bash
# OARGRPOTrainer + LoRA under accelerate's FSDP (1, 2) and DeepSpeed ZeRO (2, 3) on 2 GPUs, OAR-G
# and OAR-P: the GPU twin of tests/test_scale.py (which runs the same engines on 2 CPU processes,
# patched, since accelerate 1.16 applies neither engine on CPU; docs/scale.md). Needs 2 CUDA GPUs,
# the project's dependencies and the 'scale' extra (deepspeed), offline:
#
#     bash scripts/gpu_scale.sh OUT_DIR
#
# For each engine and method: 2 steps on the toy model (LoRA r=4, float32), each process records
# the rows it scored, the token weights it computed and the adapter it scored with
# (tests/helpers/scale_train.py); then one process scores the same rows again with the same
# adapter on one GPU and prints the largest difference. On GPU the kernels differ between a
# sharded and an unsharded model, so the weights agree to float32 rounding (not to the bit, as on
# CPU), except where a score sits on OAR's quantile threshold. FSDP1 with OAR-P is the run to
# watch: FSDP1's nested units gather their parameters in each forward, and OAR-P's number of
# forwards differs between processes (a hang under NCCL; the timeout ends it). Under FSDP2 the
# trainer holds the parameters whole while scoring (oar_lite.trl.fsdp2_unsharded).
set -u
out=${1:?usage: bash scripts/gpu_scale.sh OUT_DIR}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
py=${PYTHON:-python3}
root=$(cd "$(dirname "$0")/.." && pwd)
export PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}"
fsdp=(--use_fsdp --fsdp_auto_wrap_policy TRANSFORMER_BASED_WRAP --fsdp_transformer_layer_cls_to_wrap LlamaDecoderLayer
      --fsdp_state_dict_type FULL_STATE_DICT)
declare -A engines=(
    [fsdp1]="${fsdp[*]} --fsdp_version 1 --fsdp_use_orig_params true"
    [fsdp2]="${fsdp[*]} --fsdp_version 2"
    [zero2]="--use_deepspeed --deepspeed_config_file $root/scripts/scale/zero2.json"
    [zero3]="--use_deepspeed --deepspeed_config_file $root/scripts/scale/zero3.json"
)
status=0
for engine in fsdp1 fsdp2 zero2 zero3; do
    for method in oar-g oar-p; do
        dir="$out/$engine-$method"
        mkdir -p "$dir"
        echo "=== $engine $method $(date -u +%H:%M:%S)"
        # shellcheck disable=SC2086  # the engine's flags are words
        timeout --kill-after=10 300 "$py" -m accelerate.commands.launch --num_processes 2 --num_machines 1 \
            --mixed_precision no --dynamo_backend no ${engines[$engine]} \
            "$root/tests/helpers/scale_train.py" "$dir" --model toy --dataset toy --lora --lora-rank 4 \
            --method "$method" --steps 2 --num-problems 16 --output-dir "$dir/run" \
            --per_device_train_batch_size 4 --num_generations 4 --save_strategy no --bf16 false \
            > "$dir/log" 2>&1
        rc=$?
        if [ $rc -ne 0 ]; then
            echo "=== $engine $method: exit $rc (see $dir/log)"; tail -20 "$dir/log"; status=1; continue
        fi
        "$py" - "$dir" <<'EOF' || status=1
import sys, torch
import os
sys.path.insert(0, os.path.join(os.environ["PYTHONPATH"].split(":")[0], "tests", "helpers"))
from scale_train import rescore
out = sys.argv[1]
rank0 = torch.load(f"{out}/rank0.pt", weights_only=False)
print("engine:", rank0["distributed_type"], rank0["wrapped_class"], rank0["backend"])
results = rescore(out, 4, device="cuda")
for r in results:
    print(r)
worst = max(r["max_abs_diff"] for r in results)
print(f"largest difference from one process: {worst:.2e}", "OK" if worst <= 1e-3 else "DIFFERS")
sys.exit(0 if worst <= 1e-3 else 1)
EOF
    done
done
exit $status
