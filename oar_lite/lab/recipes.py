"""The LoRA recipes of the runs this project ships (`RECIPES`, `recipe_config`, `lora_adapter`,
`mixed_precision`), the trainer (`StudyTrainer`) and the held-out accuracy callback they train
with: experiments built on `oar_lite.trl`'s `OARConfig` / `OARGRPOTrainer`, used by notebook 07,
`benchmarks/smollm2_learning.py`, `benchmarks/gpu_memory.py` and `scripts/train_trl.py`."""
from __future__ import annotations

import time
from pathlib import Path

import torch
from accelerate.utils import gather_object
from transformers import TrainerCallback

from ..checkpoint import append_jsonl, read_jsonl
from ..attribution import CREDIT_FIELDS, PLAIN_GRPO, credit_settings
from ..settings import check_number
from ..evaluate import evaluate
from ..rollout import SAMPLING
from ..segment import FORMATS
from ..trl import OARConfig, OARGRPOTrainer
from .uniformity import summarize_uniformity, weight_uniformity
from . import scorers  # noqa: F401  (registers the lab's methods, which it runs by name)

# ----------------------------------------------------------------------------- recipes: LoRA runs to start from

RECIPES: dict[str, dict] = {
    "laptop": dict(
        prompts_per_step=4, num_generations=8, micro_batch=8, max_completion_length=64, learning_rate=3e-4,
        lr_scheduler_type="constant", warmup_steps=0, beta=0.0, temperature=SAMPLING.temperature, save_steps=5, save_total_limit=2,
        gradient_checkpointing=True, mask_truncated_completions=False),
    "gpu": dict(
        prompts_per_step=4, num_generations=4, micro_batch=8, max_completion_length=256, learning_rate=2e-5,
        lr_scheduler_type="linear", warmup_steps=0, beta=0.0, temperature=SAMPLING.temperature, save_steps=50, save_total_limit=None,
        gradient_checkpointing=True, mask_truncated_completions=True, oar_batch_size=16),
}
"""Settings of the LoRA runs this project ships, each declared once.

- ``laptop``: SmolLM2-135M-Instruct on two CPU cores, the runs of benchmarks/RESULTS.md
  "SmolLM2 learns" (`benchmarks/smollm2_learning.py`; its learning rate is the screen's pick).
- ``gpu``: notebook 07's GPU profile, sized for a free Colab T4 (15 GB) with a 0.5B-1.5B model:
  gradient checkpointing, completions cut at 256 tokens left out of the loss, OAR-P at
  most 16 perturbed copies per pass. Reasoned, not yet measured on a GPU.

``prompts_per_step x num_generations`` completions are sampled per optimizer step and go
through the backward pass ``micro_batch`` at a time (gradient accumulation)."""


LORA_RANK = 16
"""The recipes' LoRA rank (`lora_adapter`)."""
LORA_ALPHA_PER_RANK = 2
"""The recipes' LoRA alpha is this times the rank."""
LORA_DROPOUT = 0.05
"""The recipes' LoRA dropout (TRL's update runs in train mode: it acts there)."""
# The SmolLM2 study's adapter, which its shipped runs record. The readable trainer's LoRA defaults
# (`oar_lite.train.TrainConfig`: a smaller rank, no dropout, since its update runs with dropout off)
# are the library's own; benchmarks/weight_uniformity.py trains this adapter's rank and alpha there.


def lora_adapter(rank: int = LORA_RANK):
    """The recipes' peft adapter: rank ``rank``, alpha ``LORA_ALPHA_PER_RANK * rank``, dropout
    `LORA_DROPOUT`, on every linear layer."""
    from peft import LoraConfig

    check_number("lora_adapter", "rank", rank, integer=True, low=1)
    return LoraConfig(r=rank, lora_alpha=LORA_ALPHA_PER_RANK * rank, lora_dropout=LORA_DROPOUT,
                      target_modules="all-linear", task_type="CAUSAL_LM")


def mixed_precision(device: str | torch.device) -> dict:
    """``{"bf16": ..., "fp16": ..., "use_cpu": ...}`` for ``device``: bfloat16 on a GPU that has it
    natively (Ampere and newer), float16 with loss scaling on an older one (a T4); on a CPU,
    bfloat16 autocast where the CPU computes it natively (AVX512-BF16 or AMX), else float32."""
    device = torch.device(device)
    if device.type == "cuda":
        bf16 = torch.cuda.is_bf16_supported(including_emulation=False)
        return {"bf16": bf16, "fp16": not bf16, "use_cpu": False}
    if device.type == "cpu":
        native = any(getattr(torch.cpu, f"_is_{isa}_supported", lambda: False)() for isa in ("avx512_bf16", "amx_tile"))
        return {"bf16": native, "fp16": False, "use_cpu": True}
    return {"bf16": False, "fp16": False, "use_cpu": False}


def recipe_fields(recipe: str, *, oar_method: str = "oar-g", device: str | torch.device | None = None,
                  **overrides) -> dict:
    """The `OARConfig` fields of a `RECIPES` entry on ``device`` (default: CUDA if available, else
    the CPU), with its precision (`mixed_precision`); ``overrides`` (recipe keys or any `OARConfig`
    field) win; the recipe's ``oar_`` credit settings go to the methods that take them
    (``oar_batch_size`` to OAR-P). ``prompts_per_step``, ``num_generations`` and ``micro_batch``
    become TRL's ``num_generations``, ``per_device_train_batch_size`` and
    ``gradient_accumulation_steps``. `recipe_config` builds the `OARConfig`; ``scripts/train_trl.py``
    takes them as its defaults."""
    if recipe not in RECIPES:
        raise ValueError(f"unknown recipe {recipe!r}; expected one of {sorted(RECIPES)}")
    try:
        taken = {f"oar_{k}" for k in credit_settings(oar_method)}
    except (ValueError, AttributeError):  # an unknown method: OARConfig says what it expects
        taken = set()
    recipe_settings = {k: v for k, v in RECIPES[recipe].items()
                       if not (k.startswith("oar_") and k[4:] in CREDIT_FIELDS and k not in taken)}
    settings = {**recipe_settings, **overrides}
    prompts, group, micro = (settings.pop(k) for k in ("prompts_per_step", "num_generations", "micro_batch"))
    if prompts * group % micro:
        raise ValueError(f"prompts_per_step x num_generations = {prompts * group} must be a multiple of "
                         f"micro_batch={micro}")
    device = device if device is not None else ("cuda" if torch.cuda.is_available() else "cpu")
    base = dict(logging_steps=1, save_strategy="steps", report_to="none")  # overridable, as the recipe's keys
    return dict(oar_method=oar_method, num_generations=group, per_device_train_batch_size=micro,
                gradient_accumulation_steps=prompts * group // micro, **{**base, **mixed_precision(device), **settings})


def recipe_config(recipe: str, output_dir: str, *, steps: int, oar_method: str = "oar-g", answer_formats=FORMATS,
                  seed: int = 0, device: str | torch.device | None = None, **overrides) -> OARConfig:
    """The `OARConfig` of a `RECIPES` entry (`recipe_fields`) for ``steps`` optimizer steps; an
    override the method does not take is refused (`OARConfig`). Logs every step; checkpoints every
    ``save_steps`` (resume with ``trainer.train(resume_from_checkpoint=True)``). ``answer_formats``
    tell the scorer where the answer is; plain GRPO looks for none (`OARConfig` refuses them with it),
    so its rewards alone read them."""
    formats = {} if oar_method == PLAIN_GRPO else {"oar_answer_formats": list(answer_formats)}
    return OARConfig(output_dir=str(output_dir), max_steps=steps, seed=seed, **formats,
                     **recipe_fields(recipe, oar_method=oar_method, device=device, **overrides))


# ----------------------------------------------------------------------------- the study's trainer

class StudyTrainer(OARGRPOTrainer):
    """`OARGRPOTrainer` that also logs how far from uniform the weights are, over the scored
    completions of all processes (`oar_lite.lab.uniformity`): ``oar/tau_mean``,
    ``oar/frac_tau_zero`` and ``oar/frac_at_floor`` (the token share clamped to the floor). They
    are computed while scoring, so ``oar/attribution_seconds`` counts them, as in the shipped runs."""

    def _oar_weights(self, output):
        out = super()._oar_weights(output)
        credit = self.args.oar_credit
        self._oar_uniformity = weight_uniformity([s for s, _ in self._oar_scored], [w for _, w in self._oar_scored],
                                                 quantile=credit.quantile, floor=credit.floor)
        return out

    def _log_oar_metrics(self, mode: str, *args, **kwargs) -> None:
        super()._log_oar_metrics(mode, *args, **kwargs)
        uniformity = summarize_uniformity(gather_object(self._oar_uniformity))
        if uniformity["tau_mean"] is not None:
            metrics = self._metrics[mode]
            metrics["oar/frac_at_floor"].append(uniformity["at_floor"])
            metrics["oar/tau_mean"].append(uniformity["tau_mean"])
            metrics["oar/frac_tau_zero"].append(uniformity["tau_zero_share"])


# ----------------------------------------------------------------------------- held-out accuracy during training

class HeldOutAccuracyCallback(TrainerCallback):
    """Measures the policy's accuracy on held-out problems at chosen optimizer steps
    (`oar_lite.evaluate.evaluate`, greedy and/or sampled) and appends one JSON line per
    measurement to ``path``: ``{"step", "decoding", "temperature", "samples", "cpu_seconds",
    "correct", "answered", "tokens", "accuracy", "answered_rate", "mean_tokens"}`` (`LOGGED`). Steps already in the file are skipped, so a resumed run measures each step
    once; the training's random state is left untouched (the runs with and without this
    callback sample the same completions). Only the main process measures.

    Args:
        tokenizer: the policy's tokenizer.
        prompts, answers: the held-out problems (``[N]`` each), never in the training data.
        at_steps: optimizer steps to measure at; 0 is before the first update.
        path: the JSONL file.
        decodings: ``{name: (temperature, samples)}``, e.g. ``{"greedy": (0.0, 1), "t1": (1.0, 1)}``.
        rows_per_batch: completions per `generate` call (``rows_per_batch // samples`` problems).
        **options: more `evaluate` settings (``max_new_tokens``, ``seed``, ``formats``,
            ``add_special_tokens``: False by default, the prompts being chat-formatted).
    """

    LOGGED = {"correct": "correct", "answered": "answered", "tokens": "tokens", "accuracy": "accuracy",
              "answered_rate": "answer_rate", "mean_tokens": "mean_tokens"}
    """The keys of a record's results and the `evaluate` keys they hold (the shipped logs' names)."""

    def __init__(self, tokenizer, prompts, answers, *, at_steps, path, decodings=None, rows_per_batch: int = 32,
                 **options):
        if isinstance(prompts, str) or len(prompts) != len(answers) or not len(prompts):
            raise ValueError(f"expected equally long, non-empty lists of prompts and answers, got "
                             f"{len(prompts)} prompts and {len(answers)} answers")
        self.tokenizer = tokenizer
        self.problems = [{"prompt": p, "answer": a} for p, a in zip(prompts, answers)]
        self.rows_per_batch = check_number("HeldOutAccuracyCallback", "rows_per_batch", rows_per_batch, integer=True,
                                           low=1)
        self.at_steps = sorted({int(check_number("HeldOutAccuracyCallback", "at_steps", s, integer=True, low=0))
                                for s in at_steps})
        self.path = Path(path)
        self.decodings = dict(decodings or {"greedy": (0.0, 1)})
        self.options = {"add_special_tokens": False, **options}
        self.done = {(r["step"], r["decoding"]) for r in read_jsonl(self.path)} if self.path.exists() else set()

    def _measure(self, state, model) -> None:
        step = int(state.global_step)
        if step not in self.at_steps or not state.is_world_process_zero:
            return
        for name, (temperature, samples) in self.decodings.items():
            if (step, name) in self.done:
                continue
            start = time.process_time()
            result = evaluate(model, self.tokenizer, self.problems, temperature=temperature, group_size=samples,
                              batch_size=max(1, self.rows_per_batch // samples), **self.options)
            record = {"step": step, "decoding": name, "temperature": temperature, "samples": samples,
                      "cpu_seconds": round(time.process_time() - start, 2),
                      **{key: result[name_in] for key, name_in in self.LOGGED.items()}}
            append_jsonl(self.path, record)
            self.done.add((step, name))

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        self._measure(state, model)

    def on_step_end(self, args, state, control, model=None, **kwargs):
        self._measure(state, model)
