"""Does a real LM learn on a laptop? SmolLM2-135M-Instruct + LoRA through `OARGRPOTrainer`
(TRL, peft) on the one-step word problems, GRPO (``--method none``) against OAR, with the
policy's accuracy on held-out problems measured before, along and after training.
Results: benchmarks/RESULTS.md, "SmolLM2 learns"; the logs ship in
``oar_lite/data/smollm2_learning/`` (notebook 07 plots them).

One run per call (resumable: a run killed mid-way continues from its last checkpoint), then
``collect`` gathers the finished runs into the shipped JSON::

    python -m benchmarks.smollm2_learning run --method none --seed 1 --learning-rate 3e-4 --steps 30
    python -m benchmarks.smollm2_learning collect --name main results/smollm2-learning/*

The problems: the four one-step templates of `oar_lite.problems` (SmolLM2 answers about a
third of them greedily and a quarter at temperature 1, so most groups of 8 have mixed rewards
and GRPO has a signal; on two- and three-step problems it is at 0-3%). Held-out problems
(`heldout_problems`) are drawn with their own seed and removed from the training pool, so
no held-out question is ever trained on.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import torch

from benchmarks import common

OUT = Path("results/smollm2-learning")
SHIPPED = Path(__file__).resolve().parent.parent / "oar_lite" / "data" / "smollm2_learning"

STEPS_PER_PROBLEM = 1
"""The templates trained and tested on: `oar_lite.problems.make_problems(..., steps=1)`."""
TRAIN_SEED, HELDOUT_SEED = 0, 2026
HELDOUT_PER_TEMPLATE = 24
TRAIN_POOL = 4096
SHOTS = 2
DECODINGS = {"greedy": (0.0, 1), "t1": (1.0, 1)}
"""Held-out decodings: greedy, and one sample at the training temperature (fixed draws)."""
LOGGED = ("reward", "rewards/accuracy/mean", "rewards/format/mean", "completions/mean_length",
          "completions/clipped_ratio", "frac_reward_zero_std", "entropy", "loss", "grad_norm", "step_time",
          "cpu_time", "oar/weight_std", "oar/frac_suppressed", "oar/frac_boosted", "oar/frac_at_floor",
          "oar/tau_mean", "oar/frac_tau_zero", "oar/effective_share", "oar/frac_no_answer",
          "oar/attribution_seconds")
"""The per-step metrics of TRL's log kept in the shipped logs."""


def heldout_problems():
    """The held-out problems: `HELDOUT_PER_TEMPLATE` distinct questions of each one-step
    template, seeded apart from training."""
    from oar_lite.problems import make_problems

    seen, problems = set(), []
    for p in make_problems(40 * HELDOUT_PER_TEMPLATE, seed=HELDOUT_SEED, steps=STEPS_PER_PROBLEM):
        if p.question in seen or sum(q.template == p.template for q in problems) >= HELDOUT_PER_TEMPLATE:
            continue
        seen.add(p.question)
        problems.append(p)
    return problems


def training_problems(heldout):
    """The training pool (`TRAIN_POOL` draws, seed `TRAIN_SEED`) without any held-out question."""
    from oar_lite.problems import make_problems

    held = {p.question for p in heldout}
    return [p for p in make_problems(TRAIN_POOL, seed=TRAIN_SEED, steps=STEPS_PER_PROBLEM) if p.question not in held]


class _CPUTime:
    """Adds the process's CPU seconds so far to every TRL log record (``cpu_time``)."""

    def __new__(cls):
        from transformers import TrainerCallback

        class CPUTime(TrainerCallback):
            def on_log(self, args, state, control, logs=None, **kwargs):
                if logs is not None:
                    logs["cpu_time"] = round(time.process_time(), 2)

        return CPUTime()


def run(args) -> Path:
    """Train one run into ``args.out / <method>-seed<seed>-lr<lr>``; returns the folder."""
    from datasets import Dataset
    from peft import LoraConfig

    from oar_lite.models import load_smollm2
    from oar_lite.problems import format_prompt, prompt_messages
    from oar_lite.trl import HeldOutAccuracyCallback, OARConfig, OARGRPOTrainer, accuracy_reward, format_reward

    torch.set_num_threads(args.threads)
    name = f"{args.method.replace(':', '-')}-seed{args.seed}-lr{args.learning_rate:g}"
    out = args.out / name
    out.mkdir(parents=True, exist_ok=True)
    model, tokenizer = load_smollm2()
    heldout = heldout_problems()
    train = training_problems(heldout)
    formats = ["answer_is"]
    data = Dataset.from_list([{"prompt": prompt_messages(p, shots=SHOTS), "answer": str(p.answer)} for p in train])
    config = OARConfig(
        output_dir=str(out), max_steps=args.steps, seed=args.seed, learning_rate=args.learning_rate,
        lr_scheduler_type="constant", warmup_steps=0, oar_method=args.method, oar_answer_formats=formats,
        num_generations=args.group_size, per_device_train_batch_size=args.micro_batch,
        gradient_accumulation_steps=args.prompts * args.group_size // args.micro_batch,
        max_completion_length=args.max_completion_length, temperature=1.0, beta=0.0,
        reward_weights=[1.0, 0.0], logging_steps=1, save_strategy="steps", save_steps=args.save_steps,
        save_total_limit=2, report_to="none", use_cpu=True, bf16=args.bf16, dataloader_num_workers=0,
    )
    peft_config = LoraConfig(r=args.lora_rank, lora_alpha=2 * args.lora_rank, lora_dropout=0.05,
                             target_modules="all-linear", task_type="CAUSAL_LM")
    evaluation = HeldOutAccuracyCallback(
        tokenizer, [format_prompt(p, tokenizer, shots=SHOTS) for p in heldout], [p.answer for p in heldout],
        at_steps=args.eval_at, path=out / "heldout.jsonl", decodings=DECODINGS,
        max_new_tokens=args.max_completion_length, seed=HELDOUT_SEED, formats=formats)
    trainer = OARGRPOTrainer(model=model, reward_funcs=[accuracy_reward(formats), format_reward(formats)], args=config,
                             train_dataset=data, processing_class=tokenizer, peft_config=peft_config,
                             callbacks=[evaluation, _CPUTime()])
    settings = {k: v for k, v in vars(args).items() if k not in ("func", "out")}
    settings.update(templates=sorted({p.template for p in train}), heldout=len(heldout), train_pool=len(train),
                    shots=SHOTS, decodings=DECODINGS, formats=formats, train_seed=TRAIN_SEED, heldout_seed=HELDOUT_SEED)
    header = {"command": common.command("smollm2_learning", args.argv), "machine": common.machine("cpu"),
              "settings": settings, "trl_config": {k: config.to_dict()[k] for k in (
                  "loss_type", "scale_rewards", "epsilon", "epsilon_high", "beta", "num_iterations", "top_k", "top_p",
                  "mask_truncated_completions", "steps_per_generation", "generation_batch_size")}}
    common.write_json({**header, "finished": False}, out / "run.json")
    resume = any(out.glob("checkpoint-*"))
    start = time.time()
    trainer.train(resume_from_checkpoint=True if resume else None)
    trainer.save_state()
    log = [{k: h[k] for k in ("step", *LOGGED) if k in h} for h in trainer.state.log_history if "reward" in h]
    common.write_json({**header, "finished": True, "wall_seconds_last_session": round(time.time() - start, 1),
                       "resumed": resume, "log": log}, out / "run.json")
    return out


def collect(args) -> Path:
    """The finished runs' settings, per-step logs and held-out results as one JSON."""
    from oar_lite.train import read_jsonl

    runs = []
    for folder in args.runs:
        meta = json.loads((folder / "run.json").read_text())
        if not meta.get("finished"):
            raise SystemExit(f"{folder} has not finished (run.json says so); finish or leave it out")
        evals = read_jsonl(folder / "heldout.jsonl")
        runs.append({"name": folder.name, "method": meta["settings"]["method"], "seed": meta["settings"]["seed"],
                     "learning_rate": meta["settings"]["learning_rate"], "command": meta["command"],
                     "machine": meta["machine"], "settings": meta["settings"], "trl_config": meta["trl_config"],
                     "log": meta["log"], "heldout": sorted(evals, key=lambda r: (r["step"], r["decoding"]))})
    path = args.json or SHIPPED / f"{args.name}.json"
    common.write_json({"name": args.name, "note": args.note, "runs": runs}, path)
    print(f"{len(runs)} runs -> {path}")
    return path


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], allow_abbrev=False)
    sub = ap.add_subparsers(required=True)
    r = sub.add_parser("run", help="train one run (resumes from its last checkpoint)", allow_abbrev=False)
    r.add_argument("--method", default="none", help="none (GRPO) | oar-g | oar-p | a scorer name")
    r.add_argument("--seed", type=int, default=1)
    r.add_argument("--learning-rate", type=float, default=3e-4)
    r.add_argument("--steps", type=int, default=30)
    r.add_argument("--eval-at", type=int, nargs="+", default=[0, 10, 20, 30], help="optimizer steps to measure at")
    r.add_argument("--prompts", type=int, default=4, help="prompts per step")
    r.add_argument("--group-size", type=int, default=8, help="completions per prompt")
    r.add_argument("--micro-batch", type=int, default=8, help="rows per forward/backward (memory)")
    r.add_argument("--max-completion-length", type=int, default=64)
    r.add_argument("--lora-rank", type=int, default=16)
    r.add_argument("--bf16", action=argparse.BooleanOptionalAction, default=True,
                   help="bfloat16 autocast for the update (AMX on this CPU; sampling and scoring stay float32)")
    r.add_argument("--save-steps", type=int, default=5)
    r.add_argument("--threads", type=int, default=1)
    r.add_argument("--out", type=Path, default=OUT)
    r.set_defaults(func=run)
    c = sub.add_parser("collect", help="gather finished runs into one JSON", allow_abbrev=False)
    c.add_argument("runs", nargs="+", type=Path)
    c.add_argument("--name", required=True)
    c.add_argument("--note", default="")
    c.add_argument("--json", type=Path, default=None, help=f"default: {SHIPPED}/<name>.json")
    c.set_defaults(func=collect)
    args = ap.parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else argv
    if getattr(args, "prompts", 1) * getattr(args, "group_size", 1) % getattr(args, "micro_batch", 1):
        ap.error("--prompts x --group-size must be a multiple of --micro-batch")
    return args.func(args)


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main()
