"""Does a real LM learn on a laptop? SmolLM2-135M-Instruct + LoRA through `OARGRPOTrainer`
(TRL, peft) on the one-step word problems, GRPO (``--method uniform``) against OAR, with the
policy's accuracy on held-out problems measured before, along and after training.
Results: benchmarks/RESULTS.md, "SmolLM2 learns"; the logs ship in
``oar_lite/lab/data/smollm2_learning/`` (notebook 07 plots them).

One run per call (resumable: a run killed mid-way continues from its last checkpoint), then
``collect`` gathers the finished runs into the shipped JSON::

    python -m benchmarks.smollm2_learning run --method uniform --seed 1 --learning-rate 3e-4 --steps 30
    python -m benchmarks.smollm2_learning collect --name main results/smollm2-learning/*

The problems: the four one-step templates of `oar_lite.course.problems` (SmolLM2 answers about a
third of them greedily and a quarter at temperature 1, so most groups of 8 have mixed rewards
and GRPO has a signal; on two- and three-step problems it is at 0-3%). Held-out problems
(`oar_lite.course.problems.heldout_split`) are drawn with their own seed, and every pool problem with
the same template and numbers is removed from the training pool (``by="numbers"``), so no
held-out answer is ever trained on, under its own name or another. The runs shipped before
issue 38 removed only the same question text (``by="question"``, recorded by the absence of
``by`` in their split): `oar_lite.lab.lora_learning.clean_heldout` tells which of their held-out
problems no run trained on.
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
from oar_lite.settings import parser
from oar_lite.attribution import PLAIN_GRPO

OUT = Path("results/smollm2-learning")
SHIPPED = Path(__file__).resolve().parent.parent / "oar_lite" / "lab" / "data" / "smollm2_learning"

SPLIT = dict(steps=1, per_template=24, heldout_seed=2026, train_size=4096, train_seed=0, by="numbers")
"""`oar_lite.course.problems.heldout_split`'s settings: the one-step templates, 96 held-out problems, none
sharing its template and numbers with a pool problem (issue 38)."""
OLD_SPLIT = {**{k: v for k, v in SPLIT.items() if k != "by"}, "by": "question"}
"""The split of the runs shipped before issue 38 (held-out questions removed by their text only)."""
SHOTS = 2
FORMATS = ["answer_is"]
DECODINGS = {"greedy": (0.0, 1), "t1": (1.0, 1)}
"""Held-out decodings: greedy, and one sample at the training temperature (fixed draws)."""
LOGGED = ("reward", "rewards/accuracy/mean", "rewards/format/mean", "completions/mean_length",
          "completions/clipped_ratio", "frac_reward_zero_std", "entropy", "loss", "grad_norm", "step_time",
          "cpu_time", "oar/weight_std", "oar/frac_suppressed", "oar/frac_boosted", "oar/frac_at_floor",
          "oar/tau_mean", "oar/frac_tau_zero", "oar/effective_share", "oar/frac_no_answer",
          "oar/attribution_seconds")
"""The per-step metrics of TRL's log kept in the shipped logs."""


class _CPUTime:
    """Adds the process's CPU seconds so far to every TRL log record (``cpu_time``)."""

    def __new__(cls):
        from transformers import TrainerCallback

        class CPUTime(TrainerCallback):
            def on_log(self, args, state, control, logs=None, **kwargs):
                if logs is not None:  # Trainer stores a copy in log_history before the callbacks run
                    logs["cpu_time"] = round(time.process_time(), 2)
                    if state.log_history and state.log_history[-1].get("step") == state.global_step:
                        state.log_history[-1]["cpu_time"] = logs["cpu_time"]

        return CPUTime()


def run(args) -> Path:
    """Train one run into ``args.out / <method>-seed<seed>-lr<lr>``; returns the folder."""
    from datasets import Dataset

    from oar_lite.course.models import load_smollm2
    from oar_lite.course.problems import dataset_rows, format_prompt, heldout_split
    from oar_lite.lab.recipes import HeldOutAccuracyCallback, StudyTrainer, lora_adapter, recipe_config
    from oar_lite.trl import accuracy_reward, format_reward

    torch.set_num_threads(args.threads)
    name = f"{args.method.replace(':', '-')}-seed{args.seed}-lr{args.learning_rate:g}"
    out = args.out / name
    out.mkdir(parents=True, exist_ok=True)
    model, tokenizer = load_smollm2()
    train, heldout = heldout_split(**SPLIT)
    config = recipe_config(
        "laptop", str(out), steps=args.steps, oar_method=args.method, answer_formats=FORMATS, seed=args.seed,
        device="cpu", learning_rate=args.learning_rate, prompts_per_step=args.prompts, num_generations=args.group_size,
        micro_batch=args.micro_batch, max_completion_length=args.max_completion_length, save_steps=args.save_steps,
        reward_weights=[1.0, 0.0], dataloader_num_workers=0, **({} if args.bf16 is None else {"bf16": args.bf16}))
    evaluation = HeldOutAccuracyCallback(
        tokenizer, [format_prompt(p, tokenizer, shots=SHOTS) for p in heldout], [p.answer for p in heldout],
        at_steps=args.eval_at, path=out / "heldout.jsonl", decodings=DECODINGS,
        max_new_tokens=args.max_completion_length, seed=SPLIT["heldout_seed"], formats=FORMATS)
    trainer = StudyTrainer(model=model, reward_funcs=[accuracy_reward(FORMATS), format_reward(FORMATS)],
                           args=config, train_dataset=Dataset.from_list(dataset_rows(train, shots=SHOTS)),
                           processing_class=tokenizer, peft_config=lora_adapter(args.lora_rank),
                           callbacks=[evaluation, _CPUTime()])
    settings = {k: v for k, v in vars(args).items() if k not in ("func", "out", "argv")}
    settings.update(recipe="laptop", bf16=config.bf16, templates=sorted({p.template for p in train}),
                    heldout=len(heldout), train_pool=len(train), shots=SHOTS, decodings=DECODINGS, formats=FORMATS,
                    split=SPLIT)
    header = {"command": common.command("smollm2_learning", args.argv), "machine": common.machine("cpu"),
              "settings": settings, "trl_config": {k: config.to_dict()[k] for k in (
                  "loss_type", "scale_rewards", "epsilon", "epsilon_high", "beta", "num_iterations", "top_k", "top_p",
                  "mask_truncated_completions", "steps_per_generation", "generation_batch_size",
                  "lr_scheduler_type", "gradient_checkpointing")}}
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
    from oar_lite.checkpoint import read_jsonl

    runs = []
    for folder in args.runs:
        meta = json.loads((folder / "run.json").read_text())
        if not meta.get("finished"):
            raise SystemExit(f"{folder} has not finished (run.json says so); finish or leave it out")
        beyond = [r["step"] for r in meta["log"] if r.get("step", 0) > meta["settings"]["steps"]]
        if beyond:
            raise SystemExit(f"{folder}: its log has steps {beyond} beyond the {meta['settings']['steps']} it was run for "
                             "(trained on after it finished?); trim them from run.json or leave the run out")
        evals = read_jsonl(folder / "heldout.jsonl")
        # Runs from before the split was recorded kept only its seeds (the rest were OLD_SPLIT's values then);
        # runs from before issue 38 recorded no ``by``: they were split by question text.
        meta["settings"].setdefault("split", {**OLD_SPLIT, **{k: meta["settings"][k] for k in ("heldout_seed", "train_seed")
                                                               if k in meta["settings"]}})
        meta["settings"]["split"].setdefault("by", "question")
        runs.append({"name": folder.name, "method": meta["settings"]["method"], "seed": meta["settings"]["seed"],
                     "learning_rate": meta["settings"]["learning_rate"], "command": portable_command(meta["command"]),
                     "machine": meta["machine"], "settings": meta["settings"], "trl_config": meta["trl_config"],
                     "log": meta["log"], "heldout": sorted(evals, key=lambda r: (r["step"], r["decoding"]))})
    if args.step_zero_from:
        share_step_zero(runs, args.step_zero_from)
    unknown = sorted(set(args.untimed) - {r["method"] for r in runs})
    if unknown or PLAIN_GRPO in args.untimed:
        raise SystemExit(f"--untimed {unknown or [PLAIN_GRPO]}: expected methods of the collected "
                         f"runs other than GRPO's ({sorted({r['method'] for r in runs} - {PLAIN_GRPO})})")
    path = args.json or SHIPPED / f"{args.name}.json"
    common.write_json({"name": args.name, "note": args.note, "screened_seeds": args.screened_seeds,
                       **({"cost_seeds": args.cost_seeds} if args.cost_seeds else {}),
                       **({"untimed": sorted(args.untimed)} if args.untimed else {}), "runs": runs}, path)
    print(f"{len(runs)} runs -> {path}")
    return path


def portable_command(command: str) -> str:
    """A run's recorded command with each path word (or ``--flag=path``) `common.portable`: a run
    started without ``RUNS`` in its environment recorded its folder whole, and a shipped log names
    no folder of one machine. Unchanged when ``RUNS`` is not set."""
    def word(text: str) -> str:
        flag, eq, value = text.partition("=") if text.startswith("--") else ("", "", text)
        return flag + eq + common.portable(value)

    return " ".join(word(w) for w in command.split(" "))


MEASURED = ("correct", "answered", "tokens")
"""What a held-out record measured, per problem (its ``cpu_seconds`` differ from one process to the next)."""


def share_step_zero(runs: list[dict], source: str) -> None:
    """Give every collected run without a step-0 measurement the step-0 records of the run named
    ``source`` (one of ``runs``), marked ``"copied_from": source``. Step 0 is the base model (LoRA
    starts at zero, the T = 1 draws are fixed per problem), so one measurement serves every run on
    the same split; a run that measured step 0 itself must agree with ``source`` on every problem,
    and a run on another split is refused. ``runs``: `collect`'s records, changed in place."""
    by_name = {r["name"]: r for r in runs}
    if source not in by_name:
        raise SystemExit(f"--step-zero-from {source}: expected the folder name of one of the collected runs "
                         f"({sorted(by_name)})")
    base = [r for r in by_name[source]["heldout"] if r["step"] == 0]
    if not base:
        raise SystemExit(f"--step-zero-from {source}: that run measured no step 0 (its --eval-at); expected one that did")
    split = by_name[source]["settings"]["split"]
    for run in runs:
        if run["settings"]["split"] != split:
            raise SystemExit(f"{run['name']}: held out on another split ({run['settings']['split']}) than {source} "
                             f"({split}); step 0 can be shared only on the same split")
        own = {r["decoding"]: r for r in run["heldout"] if r["step"] == 0}
        if own:
            differ = [r["decoding"] for r in base if r["decoding"] not in own or
                      any(own[r["decoding"]][k] != r[k] for k in MEASURED)]
            if differ:
                raise SystemExit(f"{run['name']} and {source} measured step 0 differently ({differ}): the base "
                                 "model's answers must be the same in every run; the study stops here")
            continue
        run["heldout"] = sorted([{**r, "copied_from": source} for r in base] + run["heldout"],
                                key=lambda r: (r["step"], r["decoding"]))


def power(args) -> dict:
    """The pre-registration's calculation: variance components of the shipped runs' greedy
    held-out gain (seeds x problems, `oar_lite.lab.stats.variance_components`) and the
    projected half-width of the primary outcome's 95% crossed-bootstrap interval for 3 to 10
    seeds (`stats.crossed_half_width`), for GRPO's gain and the paired OAR-G - GRPO difference."""
    import numpy as np

    from oar_lite.lab import lora_learning, stats

    log = lora_learning.load_log(args.name)
    out = {}
    for label, method, against in (("GRPO gain", PLAIN_GRPO, None), ("OAR-G - GRPO, paired", "oar-g", PLAIN_GRPO)):
        mine = {r["seed"]: lora_learning.per_problem(r, 12) - lora_learning.per_problem(r, 0)
                for r in lora_learning.runs_of(log, method)}
        if against is not None:
            theirs = {r["seed"]: lora_learning.per_problem(r, 12) - lora_learning.per_problem(r, 0)
                      for r in lora_learning.runs_of(log, against)}
            mine = {s: mine[s] - theirs[s] for s in sorted(set(mine) & set(theirs))}
        values = np.stack([mine[s] for s in sorted(mine)])
        c = stats.variance_components(values)
        widths = {n: round(stats.crossed_half_width(c, n, values.shape[1]), 3) for n in range(3, 11)}
        floor = round(1.96 * (c["problem"] / values.shape[1]) ** 0.5, 3)
        out[label] = {"seeds": sorted(mine), "per_seed": [round(float(v.mean()), 3) for v in values],
                      "components": {k: round(v, 4) for k, v in c.items()}, "half_width": widths, "floor": floor}
        print(f"{label}: per-seed means {out[label]['per_seed']} (seeds {out[label]['seeds']}); components "
              f"(variance) seed {c['seed']:.4f}, problem {c['problem']:.4f}, residual {c['residual']:.4f}")
        print("  projected 95% half-width by seeds: " + ", ".join(f"{n}: {w:.3f}" for n, w in widths.items())
              + f"; the problems' floor (infinitely many seeds): {floor:.3f}")
    return out


RECIPE_FLAGS = {"learning_rate": "learning_rate", "prompts": "prompts_per_step", "group_size": "num_generations",
                "micro_batch": "micro_batch", "max_completion_length": "max_completion_length", "save_steps": "save_steps"}
"""``run``'s flags that default to the laptop recipe's setting: flag dest -> `RECIPES` key."""


def main(argv=None):
    from oar_lite.lab.compare import method_name
    from oar_lite.lab.recipes import LORA_RANK, RECIPES

    laptop = RECIPES["laptop"]
    ap = parser(__doc__.split("\n")[0])
    sub = ap.add_subparsers(required=True)
    r = sub.add_parser("run", help="train one run (resumes from its last checkpoint)")
    r.add_argument("--method", default=PLAIN_GRPO, type=method_name,
                   help=f"{PLAIN_GRPO} (GRPO) | oar-g | oar-p | a method of the lab (oar_lite.lab.scorers)")
    r.add_argument("--seed", type=int, default=1)
    # The laptop recipe's settings (oar_lite.lab.recipes.RECIPES, declared there once): None takes the recipe's.
    for flag, key, help_ in (("--learning-rate", "learning_rate", "the recipe's is the screen's pick"),
                             ("--prompts", "prompts_per_step", "prompts per step"),
                             ("--group-size", "num_generations", "completions per prompt"),
                             ("--micro-batch", "micro_batch", "rows per forward/backward (memory)"),
                             ("--max-completion-length", "max_completion_length", "tokens per completion"),
                             ("--save-steps", "save_steps", "checkpoint every this many steps")):
        r.add_argument(flag, type=type(laptop[key]), default=None, help=f"{help_} (default: the recipe's, {laptop[key]:g})")
    r.add_argument("--steps", type=int, default=30)
    r.add_argument("--eval-at", type=int, nargs="+", default=[0, 10, 20, 30], help="optimizer steps to measure at")
    r.add_argument("--lora-rank", type=int, default=LORA_RANK, help="the recipes' LoRA rank (oar_lite.lab.recipes)")
    r.add_argument("--bf16", action=argparse.BooleanOptionalAction, default=None,
                   help="bfloat16 autocast for the update (default: where the CPU has it natively; "
                        "sampling and scoring stay float32)")
    r.add_argument("--threads", type=int, default=1)
    r.add_argument("--out", type=Path, default=OUT)
    r.set_defaults(func=run)
    c = sub.add_parser("collect", help="gather finished runs into one JSON")
    c.add_argument("runs", nargs="+", type=Path)
    c.add_argument("--name", required=True)
    c.add_argument("--note", default="")
    c.add_argument("--screened-seed", dest="screened_seeds", type=int, action="append", default=[],
                   help="a seed the learning rate was chosen on (its GRPO gain is selected; reported apart); repeatable")
    c.add_argument("--cost-seed", dest="cost_seeds", type=int, action="append", default=[],
                   help="a seed whose method runs ran side by side, so their wall-clock step times compare (the step "
                        "cost reads only these; default: every seed); repeatable")
    c.add_argument("--untimed", action="append", default=[],
                   help="a method none of whose runs ran beside a GRPO run of its seed: its wall-clock step times "
                        "compare with nothing, so no step cost is read from them; repeatable")
    c.add_argument("--step-zero-from", default=None, metavar="RUN",
                   help="the folder name of a collected run that measured step 0: its step-0 records are copied "
                        "(marked copied_from) into the runs that did not; runs that did must agree with it")
    c.add_argument("--json", type=Path, default=None, help=f"default: {SHIPPED}/<name>.json")
    c.set_defaults(func=collect)
    p = sub.add_parser("power", help="the pre-registration's calculation: projected interval widths from a shipped log")
    p.add_argument("--name", default="main", help="the shipped log to read the seed-to-seed spread from")
    p.set_defaults(func=power)
    args = ap.parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else argv
    if args.func is collect:
        common.require_inputs(ap, "run folder", args.runs, "run.json", "a folder `smollm2_learning run` wrote")
    for name, key in RECIPE_FLAGS.items():
        if getattr(args, name, 0) is None:
            setattr(args, name, laptop[key])
    if getattr(args, "prompts", 1) * getattr(args, "group_size", 1) % getattr(args, "micro_batch", 1):
        ap.error("--prompts x --group-size must be a multiple of --micro-batch")
    return args.func(args)


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main()
