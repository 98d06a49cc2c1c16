"""OAR inside TRL: `OARConfig(GRPOConfig)` and `OARGRPOTrainer(GRPOTrainer)` (OAR-SPEC section 7).

The trainer changes one thing in TRL's GRPO: each generation batch is scored once with the
current policy, and TRL's loss receives ``[B, C]`` token advantages A_i * w_t (C: completion
length) instead of ``[B]`` sequence ones. Everything else (sampling, vLLM, rewards, clipping,
KL, LoRA through ``peft_config``, accelerate/DeepSpeed/FSDP, checkpoints) is TRL's. Under
``accelerate launch`` each process scores only its own rows. Usage: docs/trl.md.
"""
from __future__ import annotations

import inspect
import math
import time
from pathlib import Path
from dataclasses import dataclass, field
from typing import Any

import torch

TRL_SUPPORTED = ">=1.6,<1.17"
"""The TRL releases `OARGRPOTrainer` is made for (as ``pyproject.toml``): it relies on internals
that change between releases (``_generate_and_score_completions``' output, ``_compute_loss``
taking ``[B, C]`` advantages, ``_metrics``, ``_logs``, ``_dist``; tests/test_trl.py's guard
names each); huggingface/trl#4525 asks for a hook, #7298 (open) proposes one."""


def check_trl_version(version: str | None = None) -> str:
    """Raise ImportError unless TRL ``version`` (default: the installed one) is in
    `TRL_SUPPORTED`; returns the version. ``OAR_LITE_ANY_TRL=1`` makes it a warning."""
    import os
    import warnings
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed_version

    from packaging.specifiers import SpecifierSet

    if version is None:
        try:
            version = installed_version("trl")
        except PackageNotFoundError:
            raise ImportError(f"oar_lite.trl needs TRL: pip install 'trl{TRL_SUPPORTED}'") from None
    if SpecifierSet(TRL_SUPPORTED).contains(version, prereleases=True):
        return version
    message = (f"oar_lite.trl supports trl{TRL_SUPPORTED}, but trl {version} is installed: OARGRPOTrainer overrides "
               f"TRL internals that change between releases. Install a supported one with "
               f"pip install 'trl{TRL_SUPPORTED}' (or set OAR_LITE_ANY_TRL=1 to try this one anyway)")
    if os.environ.get("OAR_LITE_ANY_TRL") == "1":
        warnings.warn(message, stacklevel=2)
        return version
    raise ImportError(message)


check_trl_version()

from accelerate.utils import gather_object  # noqa: E402
from transformers import TrainerCallback  # noqa: E402
from trl import GRPOConfig, GRPOTrainer  # noqa: E402  (after the version check, which names the range)
from trl.models import unwrap_model_for_generation as _trl_unwrap_model_for_generation  # noqa: E402

if "gradient_checkpointing_kwargs" in inspect.signature(_trl_unwrap_model_for_generation).parameters:
    unwrap_model_for_generation = _trl_unwrap_model_for_generation
else:  # TRL < 1.16 takes no such argument: it re-enables gradient checkpointing with default kwargs
    def unwrap_model_for_generation(model, accelerator, gradient_checkpointing_kwargs=None, **kwargs):
        return _trl_unwrap_model_for_generation(model, accelerator, **kwargs)

from .attribution import (CONTROLS, CREDIT_FIELDS, CREDIT_RANGES, SCORERS, CreditConfig, default_mode,  # noqa: E402
                          parse_method, split_controls, token_weights)
from .checkpoint import append_jsonl, read_jsonl  # noqa: E402
from .evaluate import heldout_accuracy  # noqa: E402
from .checks import check_number, settings_of  # noqa: E402
from .grpo import token_advantages  # noqa: E402
from .reshape import summarize_uniformity, weight_uniformity  # noqa: E402
from .seeding import derive_seed  # noqa: E402
from .segment import FORMATS, check_formats, segment_completion_ids, segments_to_masks  # noqa: E402
from .train import NUMERIC_RANGES, TrainConfig  # noqa: E402

_LIGER_MESSAGE = (
    "use_liger_kernel=True is not supported by OARGRPOTrainer: OAR hands TRL per-token advantages [B, T] through "
    "GRPOTrainer._compute_loss, and Liger's fused GRPO loss takes one advantage per sequence [B] (in TRL versions "
    "where it replaces _compute_loss the token weights would be silently dropped). Set use_liger_kernel=False, "
    "or use oar_method='none' with trl.GRPOTrainer for plain GRPO with Liger."
)


# Each numeric ``oar_`` field's range: its `CreditConfig` field's, checked under the name the user wrote.
OAR_NUMERIC_RANGES = {f"oar_{name}": {**allowed, **({"optional": False} if name == "batch_size" else {})}
                      for name, allowed in CREDIT_RANGES.items()}

# TRL's numeric fields that the loss depends on, checked before TRL's checks (which let NaN and
# infinities through); ``max_grad_norm=0`` turns clipping off, as in Hugging Face.
TRL_NUMERIC_RANGES: dict[str, dict] = {
    "learning_rate": NUMERIC_RANGES["learning_rate"],
    "weight_decay": NUMERIC_RANGES["weight_decay"],
    "max_grad_norm": dict(low=0),
    "temperature": NUMERIC_RANGES["temperature"],
    "top_p": NUMERIC_RANGES["top_p"],
    "beta": NUMERIC_RANGES["beta"],
    "epsilon": NUMERIC_RANGES["clip_eps"],
    "epsilon_high": NUMERIC_RANGES["clip_eps_high"],
    "num_iterations": NUMERIC_RANGES["num_iterations"],
    "num_generations": dict(integer=True, low=2, optional=True),
}


def _oar(name: str, **changed):
    """The field ``oar_<name>``: `CreditConfig`'s setting ``<name>`` (its default and meaning), or ``changed``."""
    declared = settings_of(CreditConfig)[name]
    return field(default=changed.get("default", declared.default), metadata={"help": declared.help})


@dataclass
class OARConfig(GRPOConfig):
    """`trl.GRPOConfig` plus the OAR settings, named ``oar_*`` (meanings: their ``help``, docs/trl.md).

    Each `CreditConfig` field but the method has its ``oar_`` twin, with the default and the
    meaning `CreditConfig` declares (OAR-P's batch size is `oar_lite.train.TrainConfig`'s, as
    in training). TRL's own fields keep their meaning (``beta`` is the KL coefficient; OAR's
    boost is ``oar_boost``). `oar_credit` turns the ``oar_*`` fields into a `CreditConfig`.
    """

    oar_method: str = field(
        default="oar-g",
        metadata={"help": "Token credit method: 'none' (plain GRPO), 'oar-p', 'oar-g', or a baseline scorer "
                          f"({', '.join(sorted(set(SCORERS) - {'oar-p', 'oar-g'}))})."},
    )
    oar_mode: str | None = field(
        default=None,
        metadata={"help": "P_final mode: 'last', 'answer_mean' or 'answer_joint'. Default: the scorer's ('last' "
                          "for oar-p, 'answer_mean' for oar-g)."},
    )
    oar_quantile: float = _oar("quantile")
    oar_boost: float = _oar("boost")
    oar_floor: float = _oar("floor")
    oar_preserve_mass: bool = _oar("preserve_mass")
    oar_noise_std: float = _oar("noise_std")
    oar_batch_size: int = _oar("batch_size", default=settings_of(TrainConfig)["credit"].default.batch_size)
    oar_token_budget: int | None = _oar("token_budget")
    oar_answer_formats: list[str] = field(
        default_factory=lambda: list(FORMATS),
        metadata={"help": f"Answer formats to look for, in order of preference; a subset of {list(FORMATS)}."},
    )

    def __post_init__(self):
        # Before TRL's checks, so the reason OAR refuses Liger is the first thing a user reads.
        if self.use_liger_kernel:
            raise ValueError(_LIGER_MESSAGE)
        self._check_oar_fields()
        super().__post_init__()

    def _check_oar_fields(self) -> None:
        methods = ("none", *SCORERS)
        # Controls ("inverted:", "shuffled:") wrap any scorer: check the scorer they wrap.
        try:
            controls, base = split_controls(self.oar_method) if isinstance(self.oar_method, str) else ((), self.oar_method)
        except ValueError as err:
            raise ValueError(f"oar_method={self.oar_method!r}: {err}") from None
        if not isinstance(base, str) or base not in methods or (controls and base == "none"):
            hint = " (give the P_final mode in oar_mode)" if isinstance(base, str) and ":" in base else ""
            raise ValueError(f"oar_method={self.oar_method!r} is unknown{hint}; expected one of {methods}, "
                             f"optionally behind the controls {CONTROLS} (e.g. 'inverted:oracle')")
        takes_mode = base != "none" and default_mode(base) is not None
        if self.oar_mode is None:
            self.oar_mode = default_mode(base) if takes_mode else None
        elif not takes_mode:
            raise ValueError(f"oar_mode={self.oar_mode!r} was given but oar_method={self.oar_method!r} has no "
                             "P_final mode; leave oar_mode unset")
        else:
            try:
                parse_method(f"{base}:{self.oar_mode}")
            except ValueError as err:
                raise ValueError(f"oar_mode={self.oar_mode!r}: {err}") from None
        for name, allowed in {**OAR_NUMERIC_RANGES, **TRL_NUMERIC_RANGES}.items():
            if hasattr(self, name):  # TRL versions differ in their fields
                check_number("OARConfig", name, getattr(self, name), **allowed)
        self.oar_answer_formats = list(check_formats(self.oar_answer_formats, "oar_answer_formats"))
        self.oar_credit  # builds (and so checks) the CreditConfig the trainer will use

    @property
    def oar_method_spec(self) -> str:
        """The method as `oar_lite.attribution.token_weights` takes it, e.g. ``"oar-p:last"``."""
        return self.oar_method if self.oar_mode is None else f"{self.oar_method}:{self.oar_mode}"

    @property
    def oar_credit(self) -> CreditConfig | None:
        """The ``oar_*`` fields as one `CreditConfig` (None for ``oar_method="none"``): each
        ``oar_<name>`` field sets the `CreditConfig` field ``<name>``, the method is
        `oar_method_spec`."""
        if self.oar_method == "none":
            return None
        settings = {name: getattr(self, f"oar_{name}") for name in CREDIT_FIELDS if name != "method"}
        return CreditConfig(**{**settings, "method": self.oar_method_spec})


class OARGRPOTrainer(GRPOTrainer):
    """`trl.GRPOTrainer` whose loss gets OAR token advantages ``A_i * w_t`` (``[B, C]``).

    Takes what `trl.GRPOTrainer` takes; ``args`` must be an `OARConfig` (``oar_method="none"``:
    TRL's GRPO exactly). Logs ``oar/*`` metrics per logging step (`_log_oar_metrics`).
    """

    def __init__(self, model, reward_funcs=None, args: OARConfig | None = None, *pargs, **kwargs):
        if args is None:
            name = model if isinstance(model, str) else model.config._name_or_path or "model"
            args = OARConfig(output_dir=f"{str(name).rstrip('/').split('/')[-1]}-OAR")
        if not isinstance(args, OARConfig):
            raise ValueError(f"args must be an OARConfig (a GRPOConfig with the oar_ fields), got "
                             f"{type(args).__name__}; build it with OARConfig(...)")
        if args.use_liger_kernel:
            raise ValueError(_LIGER_MESSAGE)
        # Seed before TRL builds the peft adapter in its __init__ (older releases seed after it),
        # so a seed gives the same LoRA init on every supported release.
        from transformers.trainer_utils import enable_full_determinism, set_seed

        enable_full_determinism(args.seed) if args.full_determinism else set_seed(args.seed)
        super().__init__(model, reward_funcs, args, *pargs, **kwargs)

    # ------------------------------------------------------------------ the one override

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        output = super()._generate_and_score_completions(inputs)
        if self.args.oar_method == "none":
            return output
        if "pixel_values" in output:
            raise ValueError("OARGRPOTrainer does not score vision-language batches (the attribution forward "
                             "passes take token ids only); use oar_method='none' for multimodal data")
        mode = "train" if self.model.training else "eval"
        start = time.perf_counter()
        weights, reasoning, no_answer = self._oar_weights(output)
        output["advantages"] = token_advantages(output["advantages"], weights.to(output["advantages"].device))
        self._log_oar_metrics(mode, weights, reasoning, no_answer, time.perf_counter() - start)
        self._log_token_advantages(output["advantages"], output["completion_mask"])
        return output

    # ------------------------------------------------------------------ pieces

    TOKEN_ADVANTAGES_COLUMN = "oar_token_advantages"
    """The completions-log column with the advantages the loss receives (docs/trl.md)."""

    def _log_token_advantages(self, advantages: torch.Tensor, completion_mask: torch.Tensor) -> None:
        """Add the advantages the loss receives (``advantages: [B, C]``, this process's rows) to
        TRL's completions log, as the column `TOKEN_ADVANTAGES_COLUMN`: per completion, the list
        of ``A_i * w_t`` (4 decimals) over its ``completion_mask`` tokens, gathered over processes in TRL's row
        order. TRL's own ``advantage`` column is written inside TRL's method, before the
        reshaping, and keeps the sequence advantage ``A_i``."""
        rows = [[round(x, 4) for x in a[: int(n)].tolist()]
                for a, n in zip(advantages.detach().float().cpu(), completion_mask.sum(1).tolist())]
        extra = getattr(self, "_logs", {}).get("extra")
        if extra is None:  # only with OAR_LITE_ANY_TRL=1: a TRL whose completions log is laid out otherwise
            import warnings

            warnings.warn("this TRL has no completions log _logs['extra']: the token advantages OAR trains with "
                          "are not logged (TRL's 'advantage' column shows the sequence advantages)", stacklevel=2)
            return
        extra[self.TOKEN_ADVANTAGES_COLUMN].extend(gather_object(rows))

    def _oar_segments(self, completion_ids: torch.Tensor, completion_mask: torch.Tensor) -> list:
        """Reasoning/answer `Segments` of each local completion (``None``: no answer found)."""
        tokenizer = getattr(self.processing_class, "tokenizer", self.processing_class)
        trailing = set(getattr(self, "eos_token_ids", None) or [tokenizer.eos_token_id]) | {tokenizer.pad_token_id}
        segments = []
        for ids, n in zip(completion_ids.tolist(), completion_mask.sum(1).tolist()):
            ids = ids[: int(n)]
            # The end-of-text token's text ("</s>", "<|im_end|>") is not part of an answer.
            while ids and ids[-1] in trailing:
                ids = ids[:-1]
            segments.append(segment_completion_ids(tokenizer, ids, self.args.oar_answer_formats) if ids else None)
        return segments

    def _oar_weights(self, output: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor, int]:
        """Token weights ``[B, C]`` for the completion columns of this process's rows, the
        reasoning mask ``[B, C]`` and the number of rows without a parseable answer.
        Computed with the current policy; the weights are detached."""
        prompt_ids, prompt_mask = output["prompt_ids"], output["prompt_mask"]
        completion_ids, completion_mask = output["completion_ids"], output["completion_mask"]
        P, C = prompt_ids.shape[1], completion_ids.shape[1]
        segments = self._oar_segments(completion_ids, completion_mask)
        reasoning_mask, answer_mask = segments_to_masks(segments, P, P + C)
        device = prompt_ids.device
        args = self.args
        tokenizer = getattr(self.processing_class, "tokenizer", self.processing_class)
        # Reproducible and resume-safe: the noise of OAR-G (and the random baseline) depends on
        # the seed, the step (as the CPU trainer) and the process, not on how many batches came
        # before in this run.
        generator = torch.Generator().manual_seed(
            derive_seed(int(args.seed), int(self.state.global_step), self.accelerator.process_index))
        with unwrap_model_for_generation(
            self.model_wrapped, self.accelerator, gather_deepspeed3_params=args.ds3_gather_for_generation,
            gradient_checkpointing_kwargs=args.gradient_checkpointing_kwargs,
        ) as policy, self._dist.summon_full_params(self.model_wrapped, recurse=False):
            weights, scores = token_weights(
                policy,
                torch.cat([prompt_ids, completion_ids], dim=1),
                torch.cat([prompt_mask, completion_mask], dim=1),
                reasoning_mask.to(device),
                answer_mask.to(device),
                credit=args.oar_credit,
                pad_token_id=tokenizer.pad_token_id,
                generator=generator,
                return_scores=True,
            )
        no_answer = sum(s is None for s in segments)
        credit = args.oar_credit
        self._oar_uniformity = weight_uniformity(
            scores, [w[m] for w, m in zip(weights.cpu(), reasoning_mask.cpu())],
            quantile=credit.quantile, floor=credit.floor)
        return weights[:, P:].detach(), reasoning_mask[:, P:].to(device), no_answer

    def _log_oar_metrics(self, mode: str, weights: torch.Tensor, reasoning: torch.Tensor, no_answer: int,
                         seconds: float) -> None:
        """OAR statistics summed over processes into TRL's metric buffer: the reasoning-token
        weights' mean and std, the shares suppressed (w < 1), boosted (w > 1) and clamped to the
        floor; per scored completion (`oar_lite.reshape.weight_uniformity`) the mean tau, the
        share with tau = 0 and the mean effective share (sum w)^2 / (R sum w^2); the share of
        completions without a parseable answer (they keep A_i) and the slowest scoring time."""
        w = weights[reasoning].double()
        counts = [w.numel(), w.sum().item(), (w * w).sum().item(), (w < 1 - 1e-6).sum().item(),
                  (w > 1 + 1e-6).sum().item(), no_answer, weights.shape[0]]
        local = torch.tensor(counts, dtype=torch.float64, device=self.accelerator.device)
        n, total, squares, suppressed, boosted, no_answer, rows = self.accelerator.gather(local[None]).sum(0).tolist()
        uniformity = summarize_uniformity(gather_object(getattr(self, "_oar_uniformity", [])))
        slowest = self.accelerator.gather(torch.tensor([seconds], device=self.accelerator.device)).max().item()
        metrics = self._metrics[mode]
        if n > 0:
            mean = total / n
            metrics["oar/weight_mean"].append(mean)
            metrics["oar/weight_std"].append(math.sqrt(max(squares / n - mean * mean, 0.0)))
            metrics["oar/frac_suppressed"].append(suppressed / n)
            metrics["oar/frac_boosted"].append(boosted / n)
        if uniformity["tau_mean"] is not None:  # over the scored completions of all processes
            metrics["oar/frac_at_floor"].append(uniformity["at_floor"])
            metrics["oar/tau_mean"].append(uniformity["tau_mean"])
            metrics["oar/frac_tau_zero"].append(uniformity["tau_zero_share"])
            metrics["oar/effective_share"].append(uniformity["effective_share"])
        metrics["oar/frac_no_answer"].append(no_answer / rows if rows else 0.0)
        metrics["oar/attribution_seconds"].append(slowest)


# ----------------------------------------------------------------------------- recipes: LoRA runs to start from

RECIPES: dict[str, dict] = {
    "laptop": dict(
        prompts_per_step=4, num_generations=8, micro_batch=8, max_completion_length=64, learning_rate=3e-4,
        lr_scheduler_type="constant", warmup_steps=0, beta=0.0, temperature=1.0, save_steps=5, save_total_limit=2,
        gradient_checkpointing=True, mask_truncated_completions=False),
    "gpu": dict(
        prompts_per_step=4, num_generations=4, micro_batch=8, max_completion_length=256, learning_rate=2e-5,
        lr_scheduler_type="linear", warmup_steps=0, beta=0.0, temperature=1.0, save_steps=50, save_total_limit=None,
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


def lora_adapter(rank: int = 16):
    """The recipes' peft adapter: rank ``rank``, alpha ``2 * rank``, dropout 0.05, on every linear layer."""
    from peft import LoraConfig

    check_number("lora_adapter", "rank", rank, integer=True, low=1)
    return LoraConfig(r=rank, lora_alpha=2 * rank, lora_dropout=0.05, target_modules="all-linear",
                      task_type="CAUSAL_LM")


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


def recipe_config(recipe: str, output_dir: str, *, steps: int, oar_method: str = "oar-g", answer_formats=FORMATS,
                  seed: int = 0, device: str | torch.device | None = None, **overrides) -> OARConfig:
    """The `OARConfig` of a `RECIPES` entry for ``steps`` optimizer steps on ``device`` (default:
    CUDA if available, else the CPU), with its precision (`mixed_precision`); ``overrides``
    (recipe keys or any `OARConfig` field) win. Logs every step; checkpoints every
    ``save_steps`` (resume with ``trainer.train(resume_from_checkpoint=True)``)."""
    if recipe not in RECIPES:
        raise ValueError(f"unknown recipe {recipe!r}; expected one of {sorted(RECIPES)}")
    settings = {**RECIPES[recipe], **overrides}
    prompts, group, micro = (settings.pop(k) for k in ("prompts_per_step", "num_generations", "micro_batch"))
    if prompts * group % micro:
        raise ValueError(f"prompts_per_step x num_generations = {prompts * group} must be a multiple of "
                         f"micro_batch={micro}")
    device = device if device is not None else ("cuda" if torch.cuda.is_available() else "cpu")
    base = dict(logging_steps=1, save_strategy="steps", report_to="none")  # overridable, as the recipe's keys
    return OARConfig(output_dir=str(output_dir), max_steps=steps, seed=seed, oar_method=oar_method,
                     oar_answer_formats=list(answer_formats), num_generations=group, per_device_train_batch_size=micro,
                     gradient_accumulation_steps=prompts * group // micro, **{**base, **mixed_precision(device), **settings})


# ----------------------------------------------------------------------------- held-out accuracy during training

class HeldOutAccuracyCallback(TrainerCallback):
    """Measures the policy's accuracy on held-out problems at chosen optimizer steps
    (`oar_lite.evaluate.heldout_accuracy`, greedy and/or sampled) and appends one JSON line
    per measurement to ``path``: ``{"step", "decoding", "temperature", "samples", "seconds",
    **results}``. Steps already in the file are skipped, so a resumed run measures each step
    once; the training's random state is left untouched (the runs with and without this
    callback sample the same completions). Only the main process measures.

    Args:
        tokenizer: the policy's tokenizer.
        prompts, answers: the held-out problems (``[N]`` each), never in the training data.
        at_steps: optimizer steps to measure at; 0 is before the first update.
        path: the JSONL file.
        decodings: ``{name: (temperature, samples)}``, e.g. ``{"greedy": (0.0, 1), "t1": (1.0, 1)}``.
        **options: more `heldout_accuracy` settings (``max_new_tokens``, ``seed``, ``formats``...).
    """

    def __init__(self, tokenizer, prompts, answers, *, at_steps, path, decodings=None, **options):
        self.tokenizer, self.prompts, self.answers = tokenizer, list(prompts), list(answers)
        self.at_steps = sorted({int(check_number("HeldOutAccuracyCallback", "at_steps", s, integer=True, low=0))
                                for s in at_steps})
        self.path = Path(path)
        self.decodings = dict(decodings or {"greedy": (0.0, 1)})
        self.options = options
        self.done = {(r["step"], r["decoding"]) for r in read_jsonl(self.path)} if self.path.exists() else set()

    def _measure(self, state, model) -> None:
        step = int(state.global_step)
        if step not in self.at_steps or not state.is_world_process_zero:
            return
        for name, (temperature, samples) in self.decodings.items():
            if (step, name) in self.done:
                continue
            start = time.process_time()
            result = heldout_accuracy(model, self.tokenizer, self.prompts, self.answers, temperature=temperature,
                                      samples=samples, **self.options)
            record = {"step": step, "decoding": name, "temperature": temperature, "samples": samples,
                      "cpu_seconds": round(time.process_time() - start, 2), **result}
            append_jsonl(self.path, record)
            self.done.add((step, name))

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        self._measure(state, model)

    def on_step_end(self, args, state, control, model=None, **kwargs):
        self._measure(state, model)


# ----------------------------------------------------------------------------- rewards and data for TRL
# They live in `oar_lite.reward` and `oar_lite.problems` (importable without TRL); re-exported here.
from .problems import GSM8K_FORMATS, gsm8k_example, load_gsm8k  # noqa: E402,F401
from .reward import accuracy_reward, format_reward  # noqa: E402,F401
