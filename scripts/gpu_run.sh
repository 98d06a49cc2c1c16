#!/usr/bin/env bash
# The GPU column of benchmarks/RESULTS.md in one run, for a machine with one CUDA GPU and
# the project's dependencies, offline:
#
#     bash scripts/gpu_run.sh OUT_DIR [toy|smollm2|all]
#
# Parts, in priority order, each under its own time limit so one slow part cannot take the
# others' time: the step cost of GRPO / OAR-G / OAR-P on the toy model and on SmolLM2 + LoRA
# (issue 17's GPU column); notebook 07's GPU profile (OARGRPOTrainer, bf16, gradient
# checkpointing, LoRA) for 5 steps with SmolLM2 and the word problems in place of the hub's
# Qwen and GSM8K (scripts/offline_notebook_07.py); OAR-P against Captum on SmolLM2 (float32);
# notebook 07's memory and time table (benchmarks/gpu_memory.py: the GPU recipe's peak memory and
# seconds per step, next to their estimates; OUT_DIR/gpu.md replaces docs/gpu.md); OAR-P/OAR-G time
# and memory up to 1024 tokens. Every benchmark writes its JSON into OUT_DIR and its table to stdout.
set -u
out=${1:?usage: bash scripts/gpu_run.sh OUT_DIR [toy|smollm2|all]}
which=${2:-all}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0 TOKENIZERS_PARALLELISM=false
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1
py=${PYTHON:-python3}
dev=${DEVICE:-cuda}  # DEVICE=cpu tries the commands without a GPU (slowly)

part() {  # part NAME SECONDS COMMAND...: one part under a time limit; says how it ended
    local name=$1 limit=$2
    shift 2
    echo "=== $name (limit ${limit} s) $(date -u +%H:%M:%S)"
    local t0=$SECONDS
    timeout --kill-after=10 "$limit" "$@"
    echo "=== $name: exit $? after $((SECONDS - t0)) s"
}

"$py" - <<'EOF'
import torch, transformers, peft
print(f"torch {torch.__version__}, transformers {transformers.__version__}, peft {peft.__version__}")
print("GPU:", torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none")
EOF

if [ "$which" != smollm2 ]; then
    part "step cost, toy" 90 "$py" -m benchmarks.step_cost --model toy --device "$dev" \
        --methods uniform oar-g oar-p --warmup 1 --repeats 5 --no-progress --out "$out/step_cost_toy.json"
fi
if [ "$which" != toy ]; then
    part "step cost, SmolLM2 + LoRA" 200 "$py" -m benchmarks.step_cost --model smollm2 --device "$dev" \
        --methods uniform oar-g oar-p --max-new-tokens 128 --scored-rounds --warmup 1 --repeats 5 \
        --no-progress --out "$out/step_cost_smollm2.json"
    part "notebook 07, GPU profile, SmolLM2 offline" 150 "$py" scripts/offline_notebook_07.py
    # Notebook 07's memory and time table (docs/gpu.md): the recipe's peak memory and seconds per
    # step per method, then the table with the measured columns filled, in OUT_DIR/gpu.md (copy it
    # over docs/gpu.md). SmolLM2 offline; GPU_MEMORY_MODELS="Qwen/Qwen2.5-0.5B-Instruct ..." adds
    # the hub models of the table on a machine that reaches the hub (GSM8K).
    for model in smollm2 ${GPU_MEMORY_MODELS:-}; do
        part "memory and time table, $model" 240 "$py" -m benchmarks.gpu_memory measure --model "$model" \
            --methods uniform oar-g oar-p --steps 4 --out "$out/gpu_memory.json"
    done
    part "memory and time table, page" 30 "$py" -m benchmarks.gpu_memory table --measured "$out/gpu_memory.json" \
        --write "$out/gpu.md"
    part "OAR-P vs Captum, SmolLM2" 75 "$py" -m benchmarks.oar_p_implementations --model smollm2 --device "$dev" \
        --dtype float32 --sequences 2 --max-reasoning 80 --rows-together --per-sequence 0 --warmup 1 --repeats 3 \
        --no-progress --no-captum-default-check --out "$out/oar_p_implementations.json"
    part "scaling, SmolLM2" 60 "$py" -m benchmarks.scaling --device "$dev" --lengths 128 256 512 1024 \
        --oar-p-path batched --warmup 1 --repeats 2 --long-repeats 2 --no-progress \
        --out "$out/scaling.json" --plot "$out/scaling.png"
fi
