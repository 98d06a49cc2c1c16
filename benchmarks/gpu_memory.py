"""Memory and time per step of notebook 07's GPU recipes: estimated here, measured on a GPU.

    python -m benchmarks.gpu_memory table [--measured OUT/gpu_memory.json] [--write docs/gpu.md]
    python -m benchmarks.gpu_memory measure --model smollm2 --methods uniform oar-g oar-p --steps 4 --out OUT/gpu_memory.json

``table`` prints (or writes) the table of `SETTINGS`: the ESTIMATES of `estimate`, and the
measured peak memory and seconds per step where a ``measure`` JSON has them. ``measure``
(one CUDA GPU) trains the ``"gpu"`` recipe of `oar_lite.lab.recipes.RECIPES` for a few steps per method
and records ``torch.cuda.max_memory_allocated`` and TRL's ``step_time`` (scripts/gpu_run.sh
runs it offline with SmolLM2 and the word problems; ``--model`` takes a hub id on a machine
that reaches the hub, with GSM8K).

How the estimate is made (`estimate`; each number is a sum of sizes, none is measured):

- **weights**: the parameter count of the model's shape (`ModelShape.parameters`, checked
  against transformers' own models in tests/test_gpu_memory.py) x 4 bytes: TRL loads a model
  from the hub in float32 unless ``model_init_kwargs`` says otherwise.
- **LoRA**: the adapter's parameters (rank r on the 7 linear layers of each block) x 16 bytes:
  float32 weight, gradient and Adam's two moments.
- **generation**: the KV cache of the step's ``prompts x G`` sequences of ``P + C`` tokens
  (2 x layers x key/value width x 2 bytes per token: half precision under accelerate's autocast).
- **update**: one micro-batch of ``b`` sequences with gradient checkpointing: each layer's input
  kept (``h`` values per token and layer), one layer's activations recomputed, plus LoRA
  dropout's inputs; TRL 1.16's fused LM head computes the log-probabilities without the
  ``[b, C, V]`` logits, so they are not counted.
- **OAR-G** (`oar_lite.attribution.gradient_scores_batch`): the prompts run once without
  gradient into a KV cache; then one forward and backward pass over the completion columns of
  all the step's ``prompts x G`` sequences together, without checkpointing (scoring runs
  without it): every layer's activations kept, plus the input embeddings' gradient (float32).
- **OAR-P**: no gradient; a pass holds at most ``min(oar_batch_size, token_budget // C)``
  perturbed copies (`oar_p_copies`): each copy's KV cache (prompt and completion) and one
  layer's activations over its completion columns.
- Precision: half precision (2 bytes) for every activation and cache, as accelerate's autocast
  wraps the prepared model's forward; a phase that runs in float32 instead (the residual stream,
  or generation through a wrapper that bypasses the autocast forward) doubles its term. The
  measured columns show how far this holds.
- Activations per token and layer (2 bytes each): attention ``4h + 2 kv``
  (normalised input, q, k and v, attention output), MLP ``h + 4 I`` (normalised input, gate,
  up, SiLU, product); LoRA dropout keeps its inputs (``6h + I``).
- **peak** = weights + LoRA + the largest phase (phases run one after another).
- **time** per optimizer step, on a T4 (65 TFLOPS half precision, 320 GB/s): generation is
  ``C`` decoding steps, each reading the weights once plus a fixed 0.1 ms per layer of kernel
  launches; compute runs at 35% of the peak: the update ``6 N`` FLOPs per token (forward, backward
  to the activations, recomputation), OAR-G ``6 N`` per completion token (clean and noisy
  forward, backward), OAR-P
  ``2 N`` per token of its copies (about ``R^2 / 2`` tokens per completion of ``R`` reasoning
  tokens with the clean prefix reused).

Prompt length: GSM8K questions with the two worked examples of `oar_lite.course.problems.gsm8k_example`
are taken as `PROMPT_TOKENS` tokens (an assumption; ``measure`` records the real mean).
"""
from __future__ import annotations

import json
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from oar_lite.attribution import DEFAULT_TOKEN_BUDGET
from oar_lite.lab.recipes import LORA_RANK, RECIPES
from oar_lite.settings import parser as command_line

GPU_RECIPE = RECIPES["gpu"]

GIB = 2 ** 30
PROMPT_TOKENS = 320
LORA_TARGETS = ("q", "k", "v", "o", "gate", "up", "down")


@dataclass(frozen=True)
class ModelShape:
    """A decoder's sizes, as its ``config.json`` gives them."""
    name: str
    layers: int
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    tied: bool = True
    qkv_bias: bool = False

    @property
    def kv(self) -> int:
        """Width of the key (and of the value) projection."""
        return self.kv_heads * self.head_dim

    def _linears(self) -> dict[str, tuple[int, int]]:
        h, kv, inter = self.hidden, self.kv, self.intermediate
        q = self.heads * self.head_dim
        return {"q": (h, q), "k": (h, kv), "v": (h, kv), "o": (q, h), "gate": (h, inter), "up": (h, inter),
                "down": (inter, h)}

    @property
    def parameters(self) -> int:
        """Embeddings (and an untied LM head), per layer 7 linear layers, the q/k/v biases if
        any and two norms, and the final norm."""
        layer = sum(i * o for i, o in self._linears().values()) + 2 * self.hidden
        if self.qkv_bias:
            layer += self.heads * self.head_dim + 2 * self.kv
        return self.vocab * self.hidden * (1 if self.tied else 2) + self.layers * layer + self.hidden

    def lora_parameters(self, rank: int) -> int:
        """A rank-``rank`` adapter on every linear layer of every block: ``rank (in + out)`` each."""
        return self.layers * sum(rank * (i + o) for i, o in self._linears().values())

    def activation_values(self, lora_dropout: bool = False) -> int:
        """Values kept per token and layer for the backward pass (module docstring)."""
        h, kv, inter = self.hidden, self.kv, self.intermediate
        return 4 * h + 2 * kv + h + 4 * inter + ((6 * h + inter) if lora_dropout else 0)


MODELS = {
    # Qwen2.5 config.json values (Qwen2.5-Math-1.5B shares Qwen2.5-1.5B's shape)
    "Qwen/Qwen2.5-0.5B-Instruct": ModelShape("Qwen/Qwen2.5-0.5B-Instruct", 24, 896, 4864, 14, 2, 64, 151936,
                                             qkv_bias=True),
    "Qwen/Qwen2.5-Math-1.5B-Instruct": ModelShape("Qwen/Qwen2.5-Math-1.5B-Instruct", 28, 1536, 8960, 12, 2, 128,
                                                  151936, qkv_bias=True),
    # the offline stand-in of scripts/gpu_run.sh (its config.json: oar_lite.course.models.load_smollm2)
    "smollm2": ModelShape("SmolLM2-135M-Instruct", 30, 576, 1536, 9, 3, 64, 49152),
}


@dataclass(frozen=True)
class GPU:
    name: str
    half_flops: float
    bandwidth: float  # bytes per second
    efficiency: float = 0.35
    launch_per_layer: float = 1e-4  # seconds per layer and decoding step


T4 = GPU("T4", 65e12, 320e9)


@dataclass(frozen=True)
class Setting:
    """One row of the table: notebook 07's GPU profile (`oar_lite.lab.recipes.RECIPES["gpu"]`, read from
    there) by default."""
    model: str
    method: str = "oar-g"
    lora_rank: int = LORA_RANK
    prompts_per_step: int = GPU_RECIPE["prompts_per_step"]
    num_generations: int = GPU_RECIPE["num_generations"]
    micro_batch: int = GPU_RECIPE["micro_batch"]
    completion_length: int = GPU_RECIPE["max_completion_length"]
    prompt_length: int = PROMPT_TOKENS
    oar_batch_size: int = GPU_RECIPE["oar_batch_size"]
    token_budget: int = DEFAULT_TOKEN_BUDGET["cuda"]
    weight_bytes: int = 4
    activation_bytes: int = 2
    lora_dropout: bool = True

    def __post_init__(self):
        if self.model not in MODELS:
            raise ValueError(f"unknown model {self.model!r}; expected one of {sorted(MODELS)}")
        if self.method not in ("uniform", "oar-g", "oar-p"):
            raise ValueError(f"method={self.method!r}; expected 'uniform', 'oar-g' or 'oar-p'")
        for name in ("lora_rank", "prompts_per_step", "num_generations", "micro_batch", "completion_length",
                     "prompt_length", "oar_batch_size", "token_budget", "weight_bytes", "activation_bytes"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}={value!r}; expected a positive integer")


def estimate(setting: Setting, gpu: GPU = T4) -> dict[str, float]:
    """Bytes of each part (``weights``, ``lora``, ``generation``, ``update``, ``scoring``), the
    estimated ``peak`` and ``seconds`` per optimizer step on ``gpu`` (module docstring)."""
    s, m = setting, MODELS[setting.model]
    a = s.activation_bytes
    length = s.prompt_length + s.completion_length
    rows = s.prompts_per_step * s.num_generations
    kv_per_token = 2 * m.layers * m.kv * a
    parts = {
        "weights": m.parameters * s.weight_bytes,
        "lora": m.lora_parameters(s.lora_rank) * 16,
        "generation": rows * length * kv_per_token,
        "update": s.micro_batch * length * (m.layers * m.hidden + m.activation_values(s.lora_dropout)) * a,
        "scoring": 0,
    }
    C = s.completion_length
    if s.method == "oar-g":  # the prompts' KV cache, then the completions' columns with every activation kept
        parts["scoring"] = rows * (length * kv_per_token + C * (m.layers * m.activation_values() * a + m.hidden * 4))
    elif s.method == "oar-p":  # per pass: each copy's cache (prompt + completion) and one layer's activations
        copies = oar_p_copies(s)
        parts["scoring"] = copies * (length * kv_per_token + C * m.activation_values() * a)
    parts["peak"] = parts["weights"] + parts["lora"] + max(parts["generation"], parts["update"], parts["scoring"])

    n, flops_per_second = m.parameters, gpu.half_flops * gpu.efficiency
    decode = s.completion_length * (n * s.weight_bytes / gpu.bandwidth + m.layers * gpu.launch_per_layer)
    update = 6 * n * rows * length / flops_per_second
    scoring = {"uniform": 0.0,
               "oar-g": 6 * n * rows * C / flops_per_second,
               "oar-p": 2 * n * rows * (s.completion_length ** 2 / 2) / flops_per_second}[s.method]
    parts["seconds"] = decode + update + scoring
    return parts


def oar_p_copies(setting: Setting) -> int:
    """Perturbed copies per OAR-P pass: ``oar_batch_size``, cut to the token budget (each copy
    runs at most the completion's columns, continuing from the clean prefix's cache)."""
    return max(1, min(setting.oar_batch_size, setting.token_budget // setting.completion_length))


SETTINGS = [Setting(model, method) for model in MODELS for method in ("uniform", "oar-g", "oar-p")]
"""The table's rows: each model of notebook 07's GPU section (and the offline stand-in) with each method,
at the GPU profile's sizes."""


def _key(setting: Setting) -> str:
    return f"{setting.model}|{setting.method}"


def table(settings=SETTINGS, measured: dict | Path | None = None, gpu: GPU = T4) -> str:
    """The markdown table: the settings, the estimated parts in GiB, the estimated peak and
    seconds per step on ``gpu``, and the measured values where ``measured`` (a dict, or the
    JSON file `measure` writes) has the row."""
    if isinstance(measured, Path):
        measured = json.loads(measured.read_text())
    measured = measured or {}
    head = ("| model | method | LoRA r | prompts x G (micro-batch) | P + C tokens | OAR-P copies per pass (budget) "
            "| weights | LoRA + Adam | generation KV | update (checkpointed) | scoring | **peak, estimate** "
            f"| **s/step, estimate ({gpu.name})** | peak, measured | s/step, measured (GPU) |")
    lines = [head, "|" + "---|" * head.count(" | ") + "---|"]
    for s in settings:
        e = estimate(s, gpu)
        copies = oar_p_copies(s)
        got = measured.get(_key(s), {})
        lines.append(
            f"| {MODELS[s.model].name} | {s.method} | {s.lora_rank} | {s.prompts_per_step} x {s.num_generations} "
            f"({s.micro_batch}) | {s.prompt_length} + {s.completion_length} | "
            + (f"{copies} ({s.token_budget})" if s.method == "oar-p" else "-") + " | "
            + " | ".join(f"{e[k] / GIB:.2f}" for k in ("weights", "lora", "generation", "update", "scoring"))
            + f" | **{e['peak'] / GIB:.1f} GiB** | **{e['seconds']:.0f}** | "
            + (f"{got['peak_gib']:.1f} GiB" if "peak_gib" in got else "not measured") + " | "
            + (f"{got['seconds_per_step']:.1f} ({got['gpu']})" if "seconds_per_step" in got else "not measured")
            + " |")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- measuring on a GPU

def _mean_prompt_tokens(tokenizer, data, rows: int = 32) -> float:
    """Mean prompt length in tokens over the first ``rows`` rows (chat prompts through the template)."""
    counts = []
    for row in data.select(range(min(rows, len(data)))):
        prompt = row["prompt"]
        if not isinstance(prompt, str):
            prompt = tokenizer.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)
        counts.append(len(tokenizer(prompt, add_special_tokens=False)["input_ids"]))
    return statistics.mean(counts)


def measure(model: str, methods, steps: int, out: Path, *, lora_rank: int = LORA_RANK) -> dict:
    """Train the ``"gpu"`` recipe ``steps`` steps per method on CUDA; ``{key: {"peak_gib",
    "seconds_per_step", "gpu", "prompt_tokens", ...}}`` (also written to ``out``, merged with
    what it holds)."""
    import tempfile

    import torch
    from datasets import Dataset

    from oar_lite.course import models, problems
    from oar_lite.lab import recipes
    from oar_lite.reward import accuracy_reward, format_reward

    if model not in MODELS:
        raise ValueError(f"model {model!r}: expected one of {sorted(MODELS)}")
    if not torch.cuda.is_available():
        raise SystemExit("measure needs a CUDA GPU")
    if model == "smollm2":
        models.load_smollm2()
        name, formats = str(models.smollm2_cache_path()), ["answer_is"]
        data = Dataset.from_list([{"prompt": problems.prompt_messages(p), "answer": str(p.answer)}
                                  for p in problems.make_problems(256, seed=0)])
    else:
        name, formats, data = model, list(problems.GSM8K_FORMATS), problems.load_gsm8k("train")
    results = json.loads(out.read_text()) if out.exists() else {}
    for method in methods:
        torch.cuda.empty_cache()
        args = recipes.recipe_config("gpu", tempfile.mkdtemp(prefix="gpu-memory-"), steps=steps, oar_method=method,
                                     answer_formats=formats, save_strategy="no", report_to="none")
        trainer = recipes.StudyTrainer(model=name, reward_funcs=[accuracy_reward(formats), format_reward(formats)],
                                       args=args, train_dataset=data, peft_config=recipes.lora_adapter(lora_rank))
        torch.cuda.reset_peak_memory_stats()
        start = time.perf_counter()
        trainer.train()
        wall = time.perf_counter() - start
        logs = [h for h in trainer.state.log_history if "step_time" in h]
        step_times = [h["step_time"] for h in logs[1:]] or [h["step_time"] for h in logs]
        lengths = [h.get("completions/mean_length") for h in logs if "completions/mean_length" in h]
        results[_key(Setting(model, method, lora_rank=lora_rank))] = {
            "peak_gib": torch.cuda.max_memory_allocated() / GIB,
            "seconds_per_step": statistics.median(step_times) if step_times else wall / steps,
            "gpu": torch.cuda.get_device_name(0), "steps": steps, "wall_seconds": wall,
            "mean_completion_tokens": statistics.mean(lengths) if lengths else None,
            "prompt_tokens": _mean_prompt_tokens(trainer.processing_class, data),
            "attribution_seconds": statistics.median([h["oar/attribution_seconds"] for h in logs
                                                      if "oar/attribution_seconds" in h] or [0.0]),
        }
        print(json.dumps({method: results[_key(Setting(model, method, lora_rank=lora_rank))]}), flush=True)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(results, indent=1) + "\n")
        del trainer
    return results


HEADER = """# Memory and time per step of notebook 07's GPU recipes

Written by `python -m benchmarks.gpu_memory table --write docs/gpu.md`; on a GPU,
`bash scripts/gpu_run.sh OUT` measures the recipe and writes this page with the measured
columns filled into `OUT/gpu.md` (SmolLM2 offline; the Qwen rows need the hub:
`GPU_MEMORY_MODELS="Qwen/Qwen2.5-0.5B-Instruct Qwen/Qwen2.5-Math-1.5B-Instruct"`). **The bold columns are ESTIMATES** from the
parameter, activation and KV-cache sizes of each setting (how: the docstring of
`benchmarks/gpu_memory.py`), not measurements; the last two columns are measured, or say
"not measured". Sizes in GiB. Settings: notebook 07's GPU profile (`oar_lite.lab.recipes.RECIPES["gpu"]`:
LoRA on all linear layers, gradient checkpointing, 4 prompts x G = 4 completions per step in
micro-batches of 8, completions of at most 256 tokens, OAR-P at most 16 copies per pass within
a 65536-token budget), prompts of {prompt} tokens assumed (GSM8K with two worked examples), base
weights in float32 (TRL's default), activations in half precision.

"""


def main(argv=None) -> int:
    parser = command_line(__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    t = sub.add_parser("table", help="print or write the table (estimates, and measurements where given)")
    t.add_argument("--measured", type=Path, help="JSON written by `measure`")
    t.add_argument("--write", type=Path, help="write the page (docs/gpu.md) instead of printing the table")
    m = sub.add_parser("measure", help="train the GPU recipe a few steps per method on CUDA")
    m.add_argument("--model", default="smollm2", help="smollm2 (offline) or a hub id of MODELS")
    m.add_argument("--methods", nargs="+", default=["uniform", "oar-g", "oar-p"])
    m.add_argument("--steps", type=int, default=4)
    m.add_argument("--lora-rank", type=int, default=LORA_RANK)
    m.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.command == "measure":
        measure(args.model, args.methods, args.steps, args.out, lora_rank=args.lora_rank)
        return 0
    text = table(measured=args.measured)
    if args.write:
        args.write.write_text(HEADER.format(prompt=PROMPT_TOKENS) + text + "\n")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
