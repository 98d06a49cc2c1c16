"""How far from uniform are OAR's reshaped weights in training? Per model, setting and method,
from the batches of real training steps (`oar_lite.train`, which records
`oar_lite.lab.uniformity.weight_uniformity` for every scored completion): the distribution of tau,
the share of completions with tau = 0, the share of reasoning tokens clamped to the floor,
the weight std and the effective share (sum w)^2 / (R sum w^2). Results:
benchmarks/RESULTS.md, "How uniform are OAR's weights"; the JSON ships in
``oar_lite/lab/data/weight_uniformity.json`` (notebooks 04 and 06 read it)::

    python -m benchmarks.weight_uniformity --steps 10
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from benchmarks import common

SHIPPED = Path(__file__).resolve().parent.parent / "oar_lite" / "lab" / "data" / "weight_uniformity.json"
METHODS = ("oar-g:answer_mean", "oar-p:last", "oar-p:answer_mean")


def settings(name: str):
    """``(model name, TrainConfig without method and seed, its credit settings, Task)`` of a
    setting: the toy comparison's defaults (8 x 8, boost 1), the credit regime's (2 x 4, boost 9:
    the profile's credit settings, `compare.run_config` passes them on), and SmolLM2
    + LoRA with the laptop recipe's batch (4 x 8, 64 tokens) on the one-step word problems."""
    from oar_lite.lab import compare

    if name in ("toy default", "toy credit"):
        profile = compare.PROFILES["default" if name == "toy default" else "credit"]
        config = dataclasses.replace(profile.config, eval_every=0, checkpoint_every=0)
        return "toy", config, profile.credit, compare.toy_task(eval_size=1)
    from oar_lite.lab.recipes import LORA_ALPHA_PER_RANK, LORA_RANK, RECIPES

    laptop = RECIPES["laptop"]
    config = dataclasses.replace(compare.TRAINING, prompts_per_step=laptop["prompts_per_step"],
                                 group_size=laptop["num_generations"], max_new_tokens=laptop["max_completion_length"],
                                 learning_rate=laptop["learning_rate"], lora=True, lora_rank=LORA_RANK,
                                 lora_alpha=LORA_ALPHA_PER_RANK * LORA_RANK,
                                 micro_batch_size=laptop["micro_batch"], eval_every=0, checkpoint_every=0)
    return "smollm2", config, {}, None


def _task(tokenizer):
    from oar_lite.course.problems import format_prompt, heldout_split
    from oar_lite.train import Task

    train, _ = heldout_split()
    problems = [{"prompt": format_prompt(p, tokenizer), "answer": p.answer} for p in train]
    return Task(train_problems=problems, formats=("answer_is",), add_special_tokens=False)


def summarize(records: list[dict]) -> dict:
    """The uniformity of every scored completion of ``records`` (train records)."""
    taus = [t for r in records for t in r["taus"]]
    scored = [r for r in records if r["tau_mean"] is not None]
    if not taus:
        return {"completions": 0}
    return {"completions": len(taus), "steps": len(records),
            "tau_quantiles": {f"q{round(q * 100)}": float(np.quantile(taus, q)) for q in (0.1, 0.25, 0.5, 0.75, 0.9)},
            "tau_zero_share": float(np.mean([t == 0 for t in taus])),
            "at_floor": float(np.mean([r["weight_at_floor"] for r in scored])),
            "weight_std": float(np.mean([r["weight_std"] for r in scored])),
            "effective_share": float(np.mean([r["weight_effective_share"] for r in scored])),
            "suppressed": float(np.mean([r["weight_suppressed"] for r in scored])),
            "taus": taus}


def main(argv=None) -> dict:
    from oar_lite.lab.compare import run_config
    from oar_lite.lab.uniformity import step_metrics
    from oar_lite.train import train

    ap = common.parser(__doc__, "weight_uniformity.json", timing=False)
    ap.add_argument("--settings", nargs="+", default=["toy default", "toy credit", "smollm2"],
                    choices=["toy default", "toy credit", "smollm2"])
    ap.add_argument("--methods", nargs="+", default=list(METHODS))
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--smollm2-steps", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--ship", action="store_true", help=f"also write {SHIPPED}")
    args = ap.parse_args(argv)
    _, report = common.start(args, "weight_uniformity", argv)
    report["results"] = {}
    for name in args.settings:
        model_name, config, credit, task = settings(name)
        steps = args.smollm2_steps if model_name == "smollm2" else args.steps
        for method in args.methods:
            model, tokenizer = common.load(model_name, common.setup(args.threads, "cpu"))
            task = task or _task(tokenizer)
            run = dataclasses.replace(run_config(method, args.seed, config, credit), steps=steps,
                                      progress=not args.no_progress)
            _, records = train(model, tokenizer, task, run, step_metrics=step_metrics)
            steps_ = [r for r in records if r["type"] == "train"]
            report["results"].setdefault(name, {})[method] = {
                **summarize(steps_), "settings": {"prompts": run.prompts_per_step, "group_size": run.group_size,
                                                  "boost": run.credit.boost, "quantile": run.credit.quantile,
                                                  "floor": run.credit.floor, "steps": steps, "seed": args.seed}}
            common.write_json(report, args.out)  # after every run: a killed job keeps what it measured
    if args.ship:
        common.write_json(report, SHIPPED)
    return common.finish(report, args.out, render)


def render(report: dict) -> str:
    from oar_lite.lab.report import markdown_table

    rows = []
    for name, methods in report["results"].items():
        for method, s in methods.items():
            if not s.get("completions"):
                continue
            q = s["tau_quantiles"]
            rows.append([name, method, s["completions"], f"{q['q25']:.2f} / {q['q50']:.2f} / {q['q75']:.2f}",
                         f"{s['tau_zero_share']:.2f}", f"{s['at_floor']:.3f}", f"{s['weight_std']:.2f}",
                         f"{s['effective_share']:.2f}"])
    return "\n".join(markdown_table(["setting", "method", "completions", "tau q25 / median / q75", "tau = 0",
                                     "at floor", "weight std", "effective share"], rows))


if __name__ == "__main__":
    main()
