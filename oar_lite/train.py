"""The readable GRPO + OAR training loop, top to bottom (OAR-SPEC sections 1 and 7).

Each step: 1. generate G completions for each of P prompts (`rollout.sample_completions`);
2. reward them, group-relative advantages A_i (`grpo.group_advantages`); 3. attribute:
weights w_t on reasoning tokens (`attribution.token_weights`), A_{i,t} = A_i * w_t
(`grpo.token_advantages`); 4. update: ``num_iterations`` clipped steps, optional KL to a
frozen reference (`grpo.policy_loss`). Credit ``"uniform"`` weighs every token 1: plain
GRPO. Only the weights change between methods: a seed gives the same prompts to each.

A run appends one record per step to ``out_dir/metrics.jsonl`` and writes
``out_dir/checkpoint.pt`` atomically every ``checkpoint_every`` steps and at the end;
``train(..., resume=True)`` continues it with the results of a run that never stopped
(`oar_lite.checkpoint`).
"""
from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import torch
from tqdm.auto import tqdm

from .attribution import PLAIN_GRPO, CreditConfig, takes, token_weights
from .checkpoint import CHECKPOINT, METRICS, JsonlLog, load_checkpoint, save_checkpoint, write_jsonl
from .settings import check_settings, setting, settings_of
from .evaluate import evaluate
from .grpo import LOSS_TYPES, SCALES, UPDATE, group_advantages, policy_loss, sequence_logprobs, token_advantages
from .reshape import effective_share
from .reward import math_reward
from .rollout import SAMPLING, SAMPLING_SETTINGS, sample_batch
from .seeding import seed_everything
from .segment import FORMATS


# ----------------------------------------------------------------------------- configuration

@dataclass(frozen=True)
class TrainConfig:
    """Everything a run depends on, each field a `oar_lite.settings.Setting` (default, range,
    meaning: `settings_of`). Frozen: change it with ``dataclasses.replace``.

    ``credit`` is the credit assignment (`CreditConfig`; the default, ``"uniform"``, is
    plain GRPO), so the reshaping's boost (the paper's "beta") is ``credit.boost`` and
    ``beta`` is the KL coefficient (TRL's name). Out-of-range values raise ValueError; a
    ``credit`` dict is read as ``CreditConfig(**credit)`` (its method by default ``"uniform"``),
    the form ``dataclasses.asdict`` stores included: a setting its method does not take is
    refused there as anywhere else, never dropped. The LoRA settings need ``lora=True``.
    """

    credit: CreditConfig = setting(CreditConfig(method=PLAIN_GRPO),
                                   "Credit assignment (a CreditConfig); 'uniform' is plain GRPO.")
    steps: int = setting(50, "Training steps.", resume="more", integer=True, low=1)
    prompts_per_step: int = setting(8, "Prompts per step (P).", label="prompts", integer=True, low=1)
    group_size: int = setting(8, "Completions per prompt (G; a group needs a spread of rewards).",
                              label="completions", integer=True, low=2)
    seed: int = setting(0, "Seed: it gives every method the same prompts.", integer=True, low=0, high=2**63, high_open=True)
    # sampling
    max_new_tokens: int = setting(SAMPLING.max_new_tokens, "Most new tokens per completion.", integer=True, low=1)
    temperature: float = SAMPLING_SETTINGS["temperature"].field()
    top_p: float = SAMPLING_SETTINGS["top_p"].field()
    # the GRPO update
    learning_rate: float = UPDATE["learning_rate"].field()
    weight_decay: float = UPDATE["weight_decay"].field()
    optimizer: str = setting("adamw", "'adamw' (the default) or 'sgd' (plain SGD, no momentum: the optimizer a "
                             "summed-gradient SNR speaks of; it wants a far larger learning rate).")
    max_grad_norm: float = setting(1.0, "Gradient clipping norm (> 0; 0 would zero every gradient).", low=0,
                                   low_open=True)
    num_iterations: int = UPDATE["num_iterations"].field()
    clip_eps: float = UPDATE["clip_eps"].field()
    clip_eps_high: float | None = UPDATE["clip_eps_high"].field()
    beta: float = UPDATE["beta"].field()
    loss_type: str = setting("grpo", "'grpo' (mean per sequence) or 'dapo' (mean per token).")
    advantage_scale: str = setting("group", "'group', 'batch' or 'none' (TRL's scale_rewards).")
    micro_batch_size: int | None = setting(None, "Rows per forward/backward in the update (None: all at once).",
                                           integer=True, low=1, optional=True)
    # LoRA through peft (the model's weights stay frozen; only the adapter trains). These are the
    # readable trainer's defaults; the lab's SmolLM2 study trains through TRL with its own adapter
    # (oar_lite.lab.recipes.lora_adapter: a larger rank, and dropout, which TRL's update runs with),
    # chosen for that study and recorded with its runs. No dropout here: the update runs with
    # dropout off (`train_step`), so that the policy and the sampler agree (ratio 1 at the first
    # iteration), and a LoRA dropout would act nowhere.
    lora: bool = setting(False, "Train a peft LoRA adapter instead of every weight.")
    lora_rank: int = setting(8, "LoRA rank (with lora=True).", integer=True, low=1)
    lora_alpha: int = setting(16, "LoRA alpha (with lora=True).", low=0, low_open=True)
    lora_target_modules: Any = setting("all-linear", "Modules LoRA adapts (peft's target_modules; with lora=True).")
    # held-out evaluation (greedy accuracy) at step 0, every eval_every steps and at the end
    eval_every: int = setting(10, "Evaluate every N steps (0: only at step 0 and at the end).", resume="evaluation",
                              integer=True, low=0)
    eval_size: int | None = setting(None, "Held-out problems evaluated, the first N (None: all).", label="held-out problems",
                                    resume="evaluation", integer=True, low=0, optional=True)
    eval_batch_size: int = setting(64, "Prompts per evaluation batch.", resume="bookkeeping", integer=True, low=1)
    # bookkeeping
    checkpoint_every: int = setting(10, "Checkpoint every N steps and at the end (needs out_dir; 0: at the end only).",
                                    resume="bookkeeping", integer=True, low=0)
    progress: bool = setting(True, "Show a progress bar.", resume="bookkeeping")

    def __post_init__(self):
        if isinstance(self.credit, dict):  # as `dataclasses.asdict` wrote it (a checkpoint, run.json), or some fields
            object.__setattr__(self, "credit", CreditConfig(**{"method": PLAIN_GRPO, **self.credit}))
        if not isinstance(self.credit, CreditConfig):
            raise ValueError(f"TrainConfig.credit must be a CreditConfig, got {type(self.credit).__name__}")
        check_settings(self, "TrainConfig")
        if self.loss_type not in LOSS_TYPES:
            raise ValueError(f"loss_type must be one of {LOSS_TYPES}, got {self.loss_type!r}")
        if self.advantage_scale not in SCALES:
            raise ValueError(f"advantage_scale must be one of {SCALES}, got {self.advantage_scale!r}")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {tuple(OPTIMIZERS)}, got {self.optimizer!r}")
        lora_changed = {name: getattr(self, name) for name in LORA_SETTINGS
                        if getattr(self, name) != settings_of(TrainConfig)[name].default}
        if lora_changed and not self.lora:
            given = ", ".join(f"{k}={v!r}" for k, v in lora_changed.items())
            raise ValueError(f"TrainConfig(lora=False) got {given}, which only a LoRA run uses (it would have no "
                             f"effect): pass lora=True, or drop {', '.join(lora_changed)}")


LORA_SETTINGS = ("lora_rank", "lora_alpha", "lora_target_modules")
"""The `TrainConfig` settings only a LoRA run (``lora=True``) uses: set without it, they are refused."""
OPTIMIZERS = {"adamw": torch.optim.AdamW, "sgd": torch.optim.SGD}
"""`TrainConfig.optimizer`'s names: the torch optimizer each builds (SGD without momentum)."""


def make_optimizer(params, config: TrainConfig) -> torch.optim.Optimizer:
    """The optimizer ``config.optimizer`` names, at its learning rate and weight decay."""
    return OPTIMIZERS[config.optimizer](params, lr=config.learning_rate, weight_decay=config.weight_decay)


NUMERIC_RANGES = {name: s.range for name, s in settings_of(TrainConfig).items() if s.range}
"""The allowed range of every numeric `TrainConfig` field (`oar_lite.settings.check_number`)."""


@dataclass
class Task:
    """What the loop trains on: problems (dicts with ``"prompt"`` and ``"answer"``) and a reward.

    ``reward(completion, problem) -> float`` defaults to `math_reward` (accuracy is always
    its verdict); ``formats``: where the answer is (`oar_lite.segment.FORMATS`);
    ``add_special_tokens=False`` for chat-templated prompts.
    """

    train_problems: Sequence[dict]
    eval_problems: Sequence[dict] = ()
    reward: Callable[[str, dict], float] | None = None
    formats: Sequence[str] = FORMATS
    add_special_tokens: bool = True

    def __post_init__(self):
        if len(self.train_problems) == 0:
            raise ValueError("train_problems is empty; expected dicts with 'prompt' and 'answer'")
        for p in list(self.train_problems[:1]) + list(self.eval_problems[:1]):
            if not isinstance(p, dict) or "prompt" not in p or "answer" not in p:
                raise ValueError(f"each problem must be a dict with 'prompt' and 'answer', got {p!r}")

    def fingerprint(self) -> str:
        """A short hash of the training problems, recorded in checkpoints so that a run is never
        resumed on other ones (held-out problems left out: ``eval_size`` may change on resume)."""
        problems = [[p["prompt"], str(p["answer"])] for p in self.train_problems]
        return hashlib.sha256(json.dumps(problems).encode()).hexdigest()[:16]


# ----------------------------------------------------------------------------- the loop

StepMetrics = Callable[[list, torch.Tensor, torch.Tensor, CreditConfig], dict]
"""A hook ``step_metrics(scores, weights, reasoning_mask, credit) -> dict`` whose keys are added to
each train record: the step's per-row ``[R_i]`` scores (None: not scored), its ``[B, T]`` weights
and reasoning mask, and ``config.credit`` (the lab's `oar_lite.lab.uniformity.step_metrics`)."""


def train(model, tokenizer, task: Task, config: TrainConfig, *, out_dir: str | os.PathLike | None = None,
          resume: bool = False, overwrite: bool = False, step_metrics: StepMetrics | None = None):
    """Train ``model`` (a causal LM) in place with GRPO and ``config.credit``'s credit assignment.

    With ``config.lora`` the model is wrapped by peft. Pass the initial weights also when
    resuming: the KL reference is taken from them. ``out_dir`` receives ``metrics.jsonl`` and
    ``checkpoint.pt`` (None: nothing written); ``resume`` continues from its checkpoint; a
    fresh run refuses a folder that holds a run unless ``overwrite``. ``step_metrics`` adds its
    keys to each train record (`StepMetrics`; a key the record has is a ValueError).

    Returns ``(model, records)``: the trained model (the peft wrapper with LoRA) and the metric
    records, ``{"type": "train", ...}`` per step and ``{"type": "eval", ...}`` per evaluation.
    """
    out = Path(out_dir) if out_dir is not None else None
    if resume and out is None:
        raise ValueError("resume=True needs out_dir (where the checkpoint is)")
    if out is not None and not resume:
        held = [name for name in (METRICS, CHECKPOINT) if (out / name).exists()]
        if held and not overwrite:
            raise ValueError(f"{out} already holds a run ({', '.join(held)}); pass resume=True to continue it, "
                             "overwrite=True to replace it, or another out_dir")
        for name in held:
            (out / name).unlink()
    # Seeded before the adapter is made: the LoRA initialisation draws from torch's RNG, so
    # the same seed gives the same adapter (a resumed run loads its adapter and RNG states).
    seed_everything(config.seed)
    if config.lora:
        model = add_lora(model, config)
    reference = None
    if config.beta > 0 and not config.lora:  # with LoRA the reference is the base model, adapter off
        reference = copy.deepcopy(model).eval().requires_grad_(False)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = make_optimizer(params, config)

    start, records = 0, []
    if resume and (out / CHECKPOINT).exists():
        start, records = load_checkpoint(out / CHECKPOINT, model, optimizer, config, task=task)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        write_jsonl(out / METRICS, records)  # a resumed run drops records past its checkpoint
    log = JsonlLog(out / METRICS if out is not None else None, records)

    wall = records[-1]["wall_time"] if records else 0.0
    cpu = next((r["cpu_time"] for r in reversed(records) if "cpu_time" in r), 0.0)
    if start == 0:
        log(_eval_record(model, tokenizer, task, config, step=0, wall_time=wall, cpu_time=cpu))
    bar = tqdm(total=config.steps, initial=start, desc=config.credit.method, disable=not config.progress, dynamic_ncols=True)
    last_eval = next((r for r in reversed(records) if r["type"] == "eval"), None)
    for step in range(start + 1, config.steps + 1):
        record = train_step(model, tokenizer, task, config, optimizer, step, reference=reference,
                            step_metrics=step_metrics)
        wall += sum(record[f"time_{phase}"] for phase in PHASES)
        cpu += sum(record[f"cpu_{phase}"] for phase in PHASES)
        record["wall_time"], record["cpu_time"] = wall, cpu
        log(record)
        if step == config.steps or (config.eval_every and step % config.eval_every == 0):
            last_eval = log(_eval_record(model, tokenizer, task, config, step=step, wall_time=wall, cpu_time=cpu))
        postfix = {"reward": f"{record['reward_mean']:.2f}"}
        if last_eval is not None and last_eval["eval_accuracy"] is not None:
            postfix["eval"] = f"{last_eval['eval_accuracy']:.2f}"
        bar.set_postfix(postfix)
        bar.update(1)
        if out is not None and (step == config.steps or (config.checkpoint_every and step % config.checkpoint_every == 0)):
            save_checkpoint(out / CHECKPOINT, model, optimizer, config, step, records, task=task)
    bar.close()
    return model, records


PHASES = ("generate", "reward", "attribute", "update")  # the timed parts of a step; records carry time_<phase>, cpu_<phase>


def train_step(model, tokenizer, task: Task, config: TrainConfig, optimizer, step: int, *, reference=None,
               step_metrics: StepMetrics | None = None) -> dict:
    """One GRPO step (generate, reward, attribute, update); returns its metric record, with
    ``step_metrics``' keys (`train`)."""
    timer = _PhaseTimer(model)
    # Dropout off: the sampling and the updated policy must agree (ratio 1 at the first iteration).
    model.eval()

    # 1. generate: G completions for each of P prompts (the same prompts for every method).
    rows, rollouts = sample_batch(
        model, tokenizer, task.train_problems, prompts=config.prompts_per_step, group_size=config.group_size,
        seed=config.seed, step=step, max_new_tokens=config.max_new_tokens, temperature=config.temperature,
        top_p=config.top_p, formats=task.formats, add_special_tokens=task.add_special_tokens,
        keep_cache="sampled_cache" in takes(config.credit.method))  # OAR-P and OAR-G continue from it
    timer.lap("generate")

    # 2. reward and group-relative advantages.
    correct = [math_reward(c, p["answer"], formats=task.formats) for c, p in zip(rollouts.completions, rows)]
    rewards = correct if task.reward is None else [float(task.reward(c, p)) for c, p in zip(rollouts.completions, rows)]
    rewards = torch.tensor(rewards, dtype=torch.float32)
    advantages = group_advantages(rewards, config.group_size, scale=config.advantage_scale)
    timer.lap("reward")

    # 3. attribute: token weights from the current policy, on reasoning tokens only. A row
    # whose advantage is 0 gets A_i * w_t = 0 whatever w is, so it is not scored: clearing
    # its answer mask leaves its weights at 1.
    reasoning_mask, answer_mask = rollouts.masks()
    scored = advantages != 0
    answer_mask = answer_mask & scored.to(answer_mask.device)[:, None]
    weights, scores = token_weights(model, rollouts.input_ids, rollouts.attention_mask, reasoning_mask, answer_mask,
                                    credit=config.credit, pad_token_id=tokenizer.pad_token_id,
                                    sampled_cache=rollouts.cache, return_scores=True)
    rollouts.cache = None  # not needed by the update
    P = rollouts.prompt_length
    advantages = advantages.to(weights.device)
    token_adv = token_advantages(advantages, weights[:, P:])  # [B, C]
    timer.lap("attribute")

    # 4. update: num_iterations clipped steps on this batch.
    update = _update(model, optimizer, rollouts, token_adv, config, reference)
    timer.lap("update")

    # What happened, for the record.
    completion_mask = rollouts.completion_mask.bool()
    grouped = rewards.view(-1, config.group_size)
    w = weights[reasoning_mask & answer_mask.any(dim=1, keepdim=True)]
    # Per scored row, 1 for uniform weights, 1/R when one token carries all (`reshape.effective_share`).
    shares = [effective_share(row[m]) for s, row, m in zip(scores, weights, reasoning_mask) if s is not None and s.numel()]
    record = {
        "type": "train",
        "step": step,
        "method": config.credit.method,
        "seed": config.seed,
        "reward_mean": float(rewards.mean()),
        "accuracy": float(np.mean(correct)),
        "answer_rate": float(np.mean([s is not None for s in rollouts.segments])),
        "zero_spread_groups": float((grouped.max(dim=1).values == grouped.min(dim=1).values).float().mean()),
        "completion_length": float(completion_mask.sum(dim=1).float().mean()),
        "entropy": update.pop("entropy"),
        "scored_rows": float(answer_mask.any(dim=1).float().mean()),
        **_weight_stats(w),
        "weight_effective_share": sum(shares) / len(shares) if shares else None,
        **update,
        **{f"time_{phase}": timer.times[phase] for phase in PHASES},
        **{f"cpu_{phase}": timer.cpu[phase] for phase in PHASES},
    }
    extra = step_metrics(scores, weights, reasoning_mask, config.credit) if step_metrics is not None else {}
    if set(extra) & set(record):
        raise ValueError(f"step_metrics returned {sorted(set(extra) & set(record))}, which the record has; "
                         "expected new keys")
    return {**record, **extra}


def _update(model, optimizer, rollouts, token_adv: torch.Tensor, config: TrainConfig, reference) -> dict:
    """The clipped update: ``num_iterations`` optimizer steps on one batch of rollouts
    (``token_adv``: ``[B, C]``). pi_old's log-probs are computed once, before the first step."""
    ids, attn, mask = rollouts.input_ids, rollouts.attention_mask, rollouts.completion_mask
    B, C = mask.shape
    chunks = [slice(i, min(i + (config.micro_batch_size or B), B)) for i in range(0, B, config.micro_batch_size or B)]
    n_tokens = mask.sum().clamp(min=1)

    def logprobs_of(m, rows, **kw):
        return sequence_logprobs(m, ids[rows], attn[rows], C, **kw)

    with torch.no_grad():
        old = torch.cat([logprobs_of(model, r) for r in chunks]) if config.num_iterations > 1 else None
        ref = None
        if config.beta > 0:
            if reference is None:  # LoRA: the base model is the reference
                with model.disable_adapter():
                    ref = torch.cat([logprobs_of(model, r) for r in chunks])
            else:
                ref = torch.cat([logprobs_of(reference, r) for r in chunks])

    # No learning signal (all advantages 0, no KL): the gradient is exactly 0, yet AdamW would
    # still move the weights on its momentum, so the optimizer step is skipped.
    if config.beta == 0 and not bool(token_adv.any()):
        with torch.no_grad():
            entropy = sum(float((logprobs_of(model, r, return_entropy=True)[1] * mask[r]).sum()) for r in chunks)
        return {"entropy": entropy / float(n_tokens), "clip_fraction": 0.0, "ratio_mean": 1.0, "advantage_mean": 0.0,
                "kl": 0.0, "loss": 0.0, "grad_norm": 0.0, "skipped": 1.0}

    params = [p for p in model.parameters() if p.requires_grad]
    totals: dict[str, float] = {"skipped": 0.0}
    entropy_sum = 0.0
    for iteration in range(config.num_iterations):
        optimizer.zero_grad(set_to_none=True)
        loss_sum = 0.0
        for rows in chunks:
            logprobs, entropy = logprobs_of(model, rows, return_entropy=True)
            loss, metrics = policy_loss(
                logprobs, logprobs.detach() if old is None else old[rows], token_adv[rows], mask[rows],
                ref_logprobs=None if ref is None else ref[rows], beta=config.beta, clip_eps=config.clip_eps,
                clip_eps_high=config.clip_eps_high, loss_type=config.loss_type)
            # Micro-batches add up to the full-batch loss: "grpo" averages over rows, "dapo" over tokens.
            share = (rows.stop - rows.start) / B if config.loss_type == "grpo" else float(mask[rows].sum() / n_tokens)
            (loss * share).backward()
            loss_sum += float(loss.detach()) * share
            token_share = float(mask[rows].sum() / n_tokens)
            for k, v in metrics.items():
                totals[k] = totals.get(k, 0.0) + v * token_share / config.num_iterations
            if iteration == 0:
                entropy_sum += float((entropy * mask[rows]).sum())
        grad_norm = torch.nn.utils.clip_grad_norm_(params, config.max_grad_norm)
        optimizer.step()
        totals["loss"] = totals.get("loss", 0.0) + loss_sum / config.num_iterations
        totals["grad_norm"] = totals.get("grad_norm", 0.0) + float(grad_norm) / config.num_iterations
    optimizer.zero_grad(set_to_none=True)
    return {"entropy": entropy_sum / float(n_tokens), **totals}


def _weight_stats(w: torch.Tensor) -> dict:
    """Mean, std and the shares suppressed (< 1) and boosted (> 1) of the reasoning-token
    weights of the scored rows (``None`` when no row was scored)."""
    if w.numel() == 0:
        return {"weight_mean": None, "weight_std": None, "weight_suppressed": None, "weight_boosted": None}
    w = w.float()
    return {
        "weight_mean": float(w.mean()),
        "weight_std": float(w.std(unbiased=False)),
        "weight_suppressed": float((w < 1 - 1e-6).float().mean()),
        "weight_boosted": float((w > 1 + 1e-6).float().mean()),
    }


def _eval_record(model, tokenizer, task: Task, config: TrainConfig, *, step: int, wall_time: float,
                 cpu_time: float) -> dict | None:
    if len(task.eval_problems) == 0 or config.eval_size == 0:
        return None
    problems = list(task.eval_problems[: config.eval_size] if config.eval_size else task.eval_problems)
    t0 = time.perf_counter()
    result = evaluate(model, tokenizer, problems, max_new_tokens=config.max_new_tokens,
                      batch_size=config.eval_batch_size, formats=task.formats,
                      add_special_tokens=task.add_special_tokens)
    return {"type": "eval", "step": step, "method": config.credit.method, "seed": config.seed,
            "eval_accuracy": result["accuracy"], "eval_answer_rate": result["answer_rate"], "eval_n": result["n"],
            "wall_time": wall_time, "cpu_time": cpu_time, "time_eval": time.perf_counter() - t0}


# ----------------------------------------------------------------------------- LoRA

def add_lora(model, config: TrainConfig):
    """Wrap ``model`` with a peft LoRA adapter (rank ``lora_rank``); only the adapter trains."""
    from peft import LoraConfig, PeftModel, get_peft_model

    if isinstance(model, PeftModel):
        raise ValueError("the model already has a peft adapter; pass the base model with lora=True, "
                         "or the adapted model with lora=False")
    lora = LoraConfig(r=config.lora_rank, lora_alpha=config.lora_alpha, target_modules=config.lora_target_modules,
                      task_type="CAUSAL_LM")
    return get_peft_model(model, lora)


class _PhaseTimer:
    """Wall time per phase (synchronising the GPU, if any, before each reading), and the
    process's CPU time per phase: on a machine shared with other jobs, CPU seconds measure
    the work done where wall seconds also measure the neighbours."""

    def __init__(self, model):
        self.device = next(model.parameters()).device
        self.times: dict[str, float] = {}
        self.cpu: dict[str, float] = {}
        self.t, self.c = self._now(), time.process_time()

    def _now(self) -> float:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return time.perf_counter()

    def lap(self, phase: str) -> None:
        now, cpu = self._now(), time.process_time()
        self.times[phase], self.cpu[phase] = now - self.t, cpu - self.c
        self.t, self.c = now, cpu
