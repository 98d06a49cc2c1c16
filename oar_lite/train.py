"""The readable GRPO + OAR training loop, one file, top to bottom (OAR-SPEC sections 1 and 7).

Each step: 1. generate G completions for each of P prompts (`rollout.sample_completions`);
2. reward them, group-relative advantages A_i (`grpo.group_advantages`); 3. attribute:
weights w_t on reasoning tokens (`attribution.token_weights`), A_{i,t} = A_i * w_t
(`grpo.token_advantages`); 4. update: ``num_iterations`` clipped steps, optional KL to a
frozen reference (`grpo.policy_loss`). Credit ``"uniform"`` weighs every token 1: plain
GRPO. Only the weights change between methods: a seed gives the same prompts to each.

A run appends one record per step to ``out_dir/metrics.jsonl`` and writes
``out_dir/checkpoint.pt`` atomically every ``checkpoint_every`` steps and at the end;
``train(..., resume=True)`` continues it with the results of a run that never stopped.
"""
from __future__ import annotations

import contextlib
import copy
import dataclasses
import hashlib
import json
import os
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import torch
from tqdm.auto import tqdm

from .attribution import CREDIT_FIELDS, CreditConfig, token_weights, uses_sampled_cache
from .reshape import summarize_uniformity, weight_uniformity
from .checks import check_number
from .grpo import LOSS_TYPES, SCALES, group_advantages, policy_loss, sequence_logprobs, token_advantages
from .reward import math_reward, math_rewards
from .rollout import sample_completions
from .segment import FORMATS

CHECKPOINT = "checkpoint.pt"
METRICS = "metrics.jsonl"


# ----------------------------------------------------------------------------- configuration

@dataclass(frozen=True)
class TrainConfig:
    """Everything a run depends on. Frozen: change it with ``dataclasses.replace``.

    ``credit`` is the credit assignment (`CreditConfig`; the default, ``"uniform"``, is
    plain GRPO), so the reshaping's boost (the paper's "beta") is ``credit.boost`` and
    ``beta`` is the KL coefficient (TRL's name). Out-of-range values raise ValueError.
    """

    credit: CreditConfig = CreditConfig(method="uniform", batch_size=64)
    steps: int = 50
    prompts_per_step: int = 8            # P prompts per step
    group_size: int = 8                  # G completions per prompt
    seed: int = 0
    # sampling
    max_new_tokens: int = 64
    temperature: float = 1.0
    top_p: float = 1.0
    # the GRPO update
    learning_rate: float = 1e-4
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    num_iterations: int = 1              # optimizer steps per batch (PPO epochs); > 1 makes the ratio matter
    clip_eps: float = 0.2
    clip_eps_high: float | None = None   # DAPO's clip-higher (None: same as clip_eps)
    beta: float = 0.0                    # KL coefficient to the frozen reference (0: no reference kept)
    loss_type: str = "grpo"              # "grpo" (mean per sequence) or "dapo" (mean per token)
    advantage_scale: str = "group"       # "group", "batch" or "none" (TRL's scale_rewards)
    micro_batch_size: int | None = None  # rows per forward/backward in the update (None: all at once)
    # LoRA through peft (the model's weights stay frozen; only the adapter trains)
    lora: bool = False
    lora_rank: int = 8
    lora_alpha: int = 16
    lora_dropout: float = 0.0
    lora_target_modules: Any = "all-linear"
    # held-out evaluation (greedy accuracy) at step 0, every eval_every steps and at the end
    eval_every: int = 10                 # 0: only at step 0 and at the end
    eval_size: int | None = None         # first N held-out problems (None: all)
    eval_batch_size: int = 64
    # bookkeeping
    checkpoint_every: int = 10           # also at the end (needs out_dir); 0: only at the end
    progress: bool = True                # tqdm bar

    def __post_init__(self):
        if isinstance(self.credit, dict):  # as `dataclasses.asdict` wrote it (a checkpoint, run.json)
            object.__setattr__(self, "credit", CreditConfig(**self.credit))
        if not isinstance(self.credit, CreditConfig):
            raise ValueError(f"TrainConfig.credit must be a CreditConfig, got {type(self.credit).__name__}")
        for name, allowed in NUMERIC_RANGES.items():
            check_number("TrainConfig", name, getattr(self, name), **allowed)
        if self.loss_type not in LOSS_TYPES:
            raise ValueError(f"loss_type must be one of {LOSS_TYPES}, got {self.loss_type!r}")
        if self.advantage_scale not in SCALES:
            raise ValueError(f"advantage_scale must be one of {SCALES}, got {self.advantage_scale!r}")


def config_changes(saved: dict, config: TrainConfig) -> dict[str, tuple]:
    """``{name: (saved, now)}`` for each setting in which ``saved`` (a config as checkpoints
    and run.json store it, `dataclasses.asdict`, or the flat form of versions before
    `CreditConfig`) differs from ``config``; credit settings are named ``credit.<field>``."""
    saved = _jsonable(saved)
    if "credit" not in saved:  # the older flat form
        names = {"attribution_batch_size": "batch_size", "attribution_token_budget": "token_budget"}
        saved["credit"] = {names.get(k, k): saved.pop(k) for k in list(saved) if names.get(k, k) in CREDIT_FIELDS}

    def flat(data: dict) -> dict:
        return {**{k: v for k, v in data.items() if k != "credit"}, **{f"credit.{k}": v for k, v in data["credit"].items()}}

    old, now = flat(saved), flat(_jsonable(dataclasses.asdict(config)))
    return {k: (old.get(k), v) for k, v in now.items() if old.get(k) != v}


# The allowed range of every numeric TrainConfig field (`oar_lite.checks.check_number`);
# the credit settings' ranges are `oar_lite.attribution.CREDIT_RANGES`.
NUMERIC_RANGES: dict[str, dict] = {
    "steps": dict(integer=True, low=1),
    "prompts_per_step": dict(integer=True, low=1),
    "group_size": dict(integer=True, low=2),            # a group needs a spread of rewards
    "seed": dict(integer=True, low=0, high=2**63, high_open=True),
    "max_new_tokens": dict(integer=True, low=1),
    "temperature": dict(low=0, low_open=True),          # greedy (0) gives every row of a group the same text
    "top_p": dict(low=0, high=1, low_open=True),
    "learning_rate": dict(low=0, high=1, low_open=True),
    "weight_decay": dict(low=0),
    "max_grad_norm": dict(low=0, low_open=True),        # 0 would zero every gradient, < 0 flip it
    "num_iterations": dict(integer=True, low=1),
    "clip_eps": dict(low=0, high=1, low_open=True, high_open=True),
    "clip_eps_high": dict(low=0, low_open=True, optional=True),
    "beta": dict(low=0),
    "micro_batch_size": dict(integer=True, low=1, optional=True),
    "lora_rank": dict(integer=True, low=1),
    "lora_alpha": dict(low=0, low_open=True),
    "lora_dropout": dict(low=0, high=1, high_open=True),
    "eval_every": dict(integer=True, low=0),
    "eval_size": dict(integer=True, low=0, optional=True),
    "eval_batch_size": dict(integer=True, low=1),
    "checkpoint_every": dict(integer=True, low=0),
}


# Fields that may change between a run and its resumption (they do not change what is learned).
RESUMABLE_CHANGES = ("steps", "checkpoint_every", "progress", "eval_every", "eval_size", "eval_batch_size")


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

def train(model, tokenizer, task: Task, config: TrainConfig, *, out_dir: str | os.PathLike | None = None,
          resume: bool = False, overwrite: bool = False):
    """Train ``model`` (a causal LM) in place with GRPO and ``config.credit``'s credit assignment.

    With ``config.lora`` the model is wrapped by peft. Pass the initial weights also when
    resuming: the KL reference is taken from them. ``out_dir`` receives ``metrics.jsonl`` and
    ``checkpoint.pt`` (None: nothing written); ``resume`` continues from its checkpoint; a
    fresh run refuses a folder that holds a run unless ``overwrite``.

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
    optimizer = torch.optim.AdamW(params, lr=config.learning_rate, weight_decay=config.weight_decay)

    start, records = 0, []
    if resume and (out / CHECKPOINT).exists():
        start, records = load_checkpoint(out / CHECKPOINT, model, optimizer, config, task=task)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        write_jsonl(out / METRICS, records)  # a resumed run drops records past its checkpoint
    log = _Logger(out / METRICS if out is not None else None, records)

    wall = records[-1]["wall_time"] if records else 0.0
    cpu = next((r["cpu_time"] for r in reversed(records) if "cpu_time" in r), 0.0)
    if start == 0:
        log(_eval_record(model, tokenizer, task, config, step=0, wall_time=wall, cpu_time=cpu))
    bar = tqdm(total=config.steps, initial=start, desc=config.credit.method, disable=not config.progress, dynamic_ncols=True)
    last_eval = next((r for r in reversed(records) if r["type"] == "eval"), None)
    for step in range(start + 1, config.steps + 1):
        record = train_step(model, tokenizer, task, config, optimizer, step, reference=reference)
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


def train_step(model, tokenizer, task: Task, config: TrainConfig, optimizer, step: int, *, reference=None) -> dict:
    """One GRPO step (generate, reward, attribute, update); returns its metric record."""
    timer = _PhaseTimer(model)
    # Dropout off: the sampling and the updated policy must agree (ratio 1 at the first iteration).
    model.eval()

    # 1. generate: G completions for each of P prompts (the same prompts for every method).
    problems = pick_problems(task.train_problems, config.prompts_per_step, seed=config.seed, step=step)
    rollouts = sample_completions(
        model, tokenizer, [p["prompt"] for p in problems], group_size=config.group_size,
        max_new_tokens=config.max_new_tokens, temperature=config.temperature, top_p=config.top_p,
        formats=task.formats, add_special_tokens=task.add_special_tokens, seed=step_seed(config.seed, step),
        keep_cache=uses_sampled_cache(config.credit.method))  # OAR-P and OAR-G continue from it
    rows = [p for p in problems for _ in range(config.group_size)]
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
        **_uniformity(scores, weights, reasoning_mask, config.credit),
        **update,
        **{f"time_{phase}": timer.times[phase] for phase in PHASES},
        **{f"cpu_{phase}": timer.cpu[phase] for phase in PHASES},
    }
    return record


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


def _uniformity(scores: list, weights: torch.Tensor, reasoning_mask: torch.Tensor, credit: CreditConfig) -> dict:
    """How far from uniform the scored rows' weights are (`oar_lite.reshape.summarize_uniformity`):
    ``tau_mean``, ``tau_zero_share``, ``weight_at_floor``, ``weight_effective_share``, ``taus``."""
    rows = weight_uniformity(scores, [w[m] for w, m in zip(weights, reasoning_mask)],
                             quantile=credit.quantile, floor=credit.floor)
    summary = summarize_uniformity(rows)
    return {"tau_mean": summary["tau_mean"], "tau_zero_share": summary["tau_zero_share"],
            "weight_at_floor": summary["at_floor"], "weight_effective_share": summary["effective_share"],
            "taus": summary["taus"]}


# ----------------------------------------------------------------------------- problems, evaluation

def pick_problems(problems: Sequence[dict], n: int, *, seed: int, step: int) -> list[dict]:
    """The ``n`` problems of one step: a function of (seed, step) only, so every method and
    a resumed run see the same prompts. Without replacement when the pool is big enough."""
    if n < 1 or len(problems) == 0:
        raise ValueError(f"need n >= 1 problems from a non-empty pool, got n={n} from {len(problems)}")
    rng = np.random.default_rng([seed, step])
    idx = rng.choice(len(problems), size=n, replace=len(problems) < n)
    return [problems[int(i)] for i in idx]


def evaluate(model, tokenizer, problems: Sequence[dict], *, group_size: int = 1, temperature: float = 0.0,
             seed: int | None = None, max_new_tokens: int = 64, batch_size: int = 64,
             formats: Sequence[str] = FORMATS, add_special_tokens: bool = True,
             shares: dict[str, Callable[[str], bool]] | None = None, progress: bool = False) -> dict:
    """Accuracy on held-out problems: greedy by default, or ``group_size`` samples each.

    ``seed``: batch k is sampled after ``torch.manual_seed(seed + k)`` (None: the global RNG is
    left alone). ``shares``: ``{name: test(completion)}``, each reported as the share that passes.

    Returns ``{"accuracy", "answer_rate", "mixed", "solved", "failed", "mean_tokens", "n"}`` and
    the ``shares``: the shares of completions right and with a parseable answer; of problems
    whose group is mixed (0 when ``group_size == 1``), all right, all wrong; the mean completion
    length in tokens; the number of problems.
    """
    if len(problems) == 0:
        raise ValueError("no problems to evaluate; expected dicts with 'prompt' and 'answer'")
    if batch_size < 1 or group_size < 1:
        raise ValueError(f"batch_size and group_size must be >= 1, got {batch_size} and {group_size}")
    groups, answered, lengths, counts = [], 0, [], dict.fromkeys(shares or {}, 0)
    batches = range(0, len(problems), batch_size)
    for k, i in enumerate(tqdm(batches, desc="eval", disable=not progress, leave=False)):
        batch = problems[i:i + batch_size]
        rollouts = sample_completions(model, tokenizer, [p["prompt"] for p in batch], group_size=group_size,
                                      max_new_tokens=max_new_tokens, temperature=temperature, formats=formats,
                                      add_special_tokens=add_special_tokens, seed=None if seed is None else seed + k)
        right = math_rewards(rollouts.completions, [p["answer"] for p in batch for _ in range(group_size)],
                             formats=formats)
        groups += [right[j:j + group_size] for j in range(0, len(right), group_size)]
        answered += sum(s is not None for s in rollouts.segments)
        lengths += [len(ids) for ids in rollouts.completion_ids]
        for name, test in (shares or {}).items():
            counts[name] += sum(bool(test(c)) for c in rollouts.completions)
    n, completions = len(groups), len(groups) * group_size
    return {
        "accuracy": sum(map(sum, groups)) / completions,
        "answer_rate": answered / completions,
        "mixed": sum(0 < sum(g) < group_size for g in groups) / n if group_size > 1 else 0.0,
        "solved": sum(sum(g) == group_size for g in groups) / n,
        "failed": sum(sum(g) == 0 for g in groups) / n,
        "mean_tokens": sum(lengths) / len(lengths),
        "n": n,
        **{name: count / completions for name, count in counts.items()},
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
    lora = LoraConfig(r=config.lora_rank, lora_alpha=config.lora_alpha, lora_dropout=config.lora_dropout,
                      target_modules=config.lora_target_modules, task_type="CAUSAL_LM")
    return get_peft_model(model, lora)


# ----------------------------------------------------------------------------- seeds, checkpoints, logs

def seed_everything(seed: int) -> None:
    """Seed python, numpy and torch (CPU and CUDA)."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def step_seed(seed: int, step: int) -> int:
    """The seed of step ``step`` of a run seeded ``seed``: its sampling and scoring noise
    depend on the run's seed and the step only (not on what ran before), so a resumed run
    draws what an uninterrupted one would. Both trainers use it (`train_step` and
    `oar_lite.trl.OARGRPOTrainer`); the prime keeps (seed, step) pairs apart."""
    return (seed * 1_000_003 + step) % 2**63


def _rng_state() -> dict:
    name, keys, pos, has_gauss, gauss = np.random.get_state()
    state = {"python": random.getstate(), "numpy": [name, torch.from_numpy(keys.astype(np.int64)), pos, has_gauss, gauss],
             "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: dict) -> None:
    random.setstate(_as_tuples(state["python"]))
    name, keys, pos, has_gauss, gauss = state["numpy"]
    np.random.set_state((name, keys.numpy().astype(np.uint32), pos, has_gauss, gauss))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _as_tuples(x):
    return tuple(_as_tuples(v) for v in x) if isinstance(x, (list, tuple)) else x


def _trainable_state(model) -> dict[str, torch.Tensor]:
    """The weights that training changes: all of them, or only the adapter with LoRA."""
    names = {n for n, p in model.named_parameters() if p.requires_grad}
    return {k: v.detach().clone() for k, v in model.state_dict().items() if k in names}


def save_checkpoint(path, model, optimizer, config: TrainConfig, step: int, records: list[dict], *,
                    task: Task | None = None) -> None:
    """Write weights (or adapter), optimizer, RNG states, step, config, records and the
    task's fingerprint to ``path`` atomically: a temporary file renamed over the old one,
    so a crash leaves either the previous checkpoint or the new one, never half of one."""
    path = Path(path)
    state = {"step": step, "config": dataclasses.asdict(config), "records": records,
             "task": task.fingerprint() if task is not None else None,
             "model": _trainable_state(model), "optimizer": optimizer.state_dict(), "rng": _rng_state()}
    with atomic_path(path) as tmp:
        torch.save(state, tmp)


def load_checkpoint(path, model, optimizer, config: TrainConfig, *, task: Task | None = None) -> tuple[int, list[dict]]:
    """Restore a checkpoint written by `save_checkpoint` into ``model`` and ``optimizer``
    and the RNGs. Returns ``(step, records)``. Refuses a checkpoint of a different run:
    another config, or (when both sides know it) another task."""
    state = _read_checkpoint(path)
    changed = {k: v for k, v in config_changes(state["config"], config).items() if k not in RESUMABLE_CHANGES}
    if changed:
        raise ValueError(f"{path} was written by a different run: "
                         f"{', '.join(f'{k}={old!r} (now {new!r})' for k, (old, new) in changed.items())}")
    if task is not None and state.get("task") and state["task"] != task.fingerprint():
        raise ValueError(f"{path} was written by a run on other problems (task {state['task']}, now "
                         f"{task.fingerprint()}); use another output folder")
    expected = set(_trainable_state(model))
    if set(state["model"]) != expected:
        raise ValueError(f"{path} holds weights {sorted(set(state['model']) ^ expected)[:5]}... that do not match the model's trainable weights")
    model.load_state_dict(state["model"], strict=False)
    optimizer.load_state_dict(state["optimizer"])
    _set_rng_state(state["rng"])
    return int(state["step"]), list(state["records"])


_CHECKPOINT_KEYS = ("step", "config", "records", "model", "optimizer", "rng")


def _read_checkpoint(path) -> dict:
    """``torch.load`` of a checkpoint, with an error that names the file and what to do
    when it is not a whole checkpoint (truncated, overwritten, not one at all)."""
    advice = ("delete it to start the run over (or restore it from a copy); the run's metrics.jsonl "
              "is rewritten from the checkpoint on resume")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001 - torch raises EOFError, RuntimeError, UnpicklingError, ...
        raise ValueError(f"{path} is not a readable checkpoint ({type(err).__name__}: {str(err)[:200]}); "
                         f"{advice}") from err
    missing = [k for k in _CHECKPOINT_KEYS if not isinstance(state, dict) or k not in state]
    if missing:
        raise ValueError(f"{path} is not an oar-lite checkpoint (missing {', '.join(missing)}); {advice}")
    return state


def _jsonable(x):
    return json.loads(json.dumps(x))


@contextlib.contextmanager
def atomic_path(path) -> Iterator[Path]:
    """A temporary sibling of ``path`` to write, renamed over ``path`` when the block ends
    without error (removed if it raised), so a crash or a kill leaves the previous file
    whole, never half of the new one."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_jsonl(path, records: list[dict]) -> None:
    """Write ``records`` to ``path`` (one JSON object per line), replacing it atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text("".join(json.dumps(r) + "\n" for r in records))


def append_jsonl(path, record: dict) -> None:
    """Append one JSON line to ``path`` and flush it, so a kill loses at most that line."""
    with open(path, "a") as f:
        f.write(json.dumps(record) + "\n")


def read_jsonl(path) -> list[dict]:
    """Records from a JSONL file; a line that is not JSON (a run killed while writing it)
    raises ValueError naming the file and the line."""
    records = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as err:
                raise ValueError(f"{path} line {number} is not JSON ({err.msg}): the file is damaged (a run killed "
                                 "while writing?); resume the run to rewrite it from its checkpoint, or delete the "
                                 "line") from None
    return records


class _Logger:
    """Appends records to the list and to the JSONL file (flushed every line)."""

    def __init__(self, path: Path | None, records: list[dict]):
        self.path, self.records = path, records

    def __call__(self, record: dict | None) -> dict | None:
        if record is None:
            return None
        self.records.append(record)
        if self.path is not None:
            append_jsonl(self.path, record)
        return record


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
