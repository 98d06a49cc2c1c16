"""Step cost: one GRPO step with uniform credit (plain GRPO), OAR-G and OAR-P, by phase.

Each method runs `oar_lite.train.train_step` (the training loop's own step, not a copy)
from the same weights with a fresh optimizer, on the same prompts and sampling seed, so
generation and reward do the same work and only the attribution differs. Rounds are
interleaved (every method once per round, order rotated) and the ratio to GRPO is taken
within each round; each round uses different prompts (step ``1000 + round``).

What the attribute phase costs depends on how many rows it scores: `train_step` skips
rows whose advantage is 0 (groups with equal rewards), exactly as in training. The table
shows that share, the reasoning length, and the seconds per scored row.

Times are CPU seconds of the process on a CPU (`benchmarks.common`), one torch thread.

Run (offline, from the repository root)::

    .venv/bin/python -m benchmarks.step_cost --model toy smollm2 --repeats 5
    .venv/bin/python -m benchmarks.step_cost --model toy --methods uniform oar-g oar-g-per-row oar-p
    .venv/bin/python -m benchmarks.step_cost --model smollm2 --device cuda

Targets (issue 17): OAR-G at most 1.10x the GRPO step on SmolLM2 + LoRA and 1.3x on the
toy task; OAR-P at most 2x on the toy task.
Writes ``benchmarks/results/step_cost.json`` and prints a markdown table.
"""
from __future__ import annotations

import statistics

import torch

from benchmarks import common
from oar_lite import report as tables
from oar_lite.train import PHASES

METHODS = ("uniform", "oar-g", "oar-p")
EXTRA_METHODS = ("oar-g-per-row", "oar-p-per-row")  # scored one row at a time (the paths before), for comparison
TARGETS = {"oar-g": 1.10, "oar-p": 2.0}  # issue 17: OAR-G <= 1.10x on SmolLM2 and <= 1.3x on the toy, OAR-P <= 2x on the toy

# Per model: a step like the ones the project trains with. The toy settings are
# `oar_lite.compare`'s (8 prompts x 8 completions, full fine-tuning); SmolLM2 trains a
# LoRA adapter (rank 8, all linear layers) on 2-shot chat prompts of the word-problem
# bank's one-step problems.
SETTINGS = {
    "toy": dict(prompts_per_step=8, group_size=8, max_new_tokens=66, learning_rate=1e-4, lora=False),
    "smollm2": dict(prompts_per_step=2, group_size=4, max_new_tokens=128, learning_rate=1e-5, lora=True),
}


def make_task(model_name: str, tokenizer, *, shots: int = 2):
    """The training task of the model: toy additions, or SmolLM2's word problems."""
    from oar_lite.train import Task

    if model_name == "toy":
        from oar_lite.compare import toy_task

        return toy_task(eval_size=1)
    from oar_lite.problems import format_prompt, make_problems

    # One-step templates: SmolLM2 solves about 20% of them at T=1 (benchmarks/RESULTS.md, "SmolLM2
    # baseline"), so most groups have mixed rewards and get scored; on the full bank most do not.
    problems = [{"prompt": format_prompt(p, tokenizer, shots=shots), "answer": p.answer}
                for p in make_problems(64, seed=7, steps=1)]
    return Task(train_problems=problems, add_special_tokens=False)


def _trainable(model) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}


def measure_model(model_name: str, *, methods, warmup: int, repeats: int, device, settings: dict,
                  progress: bool = True) -> dict:
    """Interleaved rounds of `train_step` per method on one model; per-phase times and ratios."""
    from oar_lite.train import TrainConfig, add_lora, train_step

    import functools

    from oar_lite.attribution import SCORERS, CreditConfig, gradient_scores, perturbation_scores, register_scorer

    # Not the scorers themselves, so token_weights takes its per-row path.
    for name, scorer in (("oar-g-per-row", gradient_scores), ("oar-p-per-row", perturbation_scores)):
        if name in methods and name not in SCORERS:
            register_scorer(name, functools.partial(scorer))
    model, tok = common.load(model_name, device)
    task = make_task(model_name, tok)
    configs = {m: TrainConfig(credit=CreditConfig(m, batch_size=64), seed=0, progress=False, eval_size=0, **settings)
               for m in methods}
    if settings.get("lora"):
        model = add_lora(model, configs[methods[0]])
    start = _trainable(model)
    params = {n: p for n, p in model.named_parameters() if p.requires_grad}

    def step_fn(method):
        def run(round_):
            with torch.no_grad():  # the same weights before every step
                for n, p in params.items():
                    p.copy_(start[n])
            optimizer = torch.optim.AdamW(list(params.values()), lr=configs[method].learning_rate)
            return train_step(model, tok, task, configs[method], optimizer, step=1000 + round_)
        return run

    runs = common.interleaved({m: step_fn(m) for m in methods}, warmup=warmup, repeats=repeats,
                              device=device, progress=progress)
    records = {m: [rec for _, rec in runs[m]] for m in methods}
    # train_step records both clocks per phase: CPU seconds (cpu_*) or wall-clock (time_*), as `setup` chose.
    clock = "cpu" if common.CLOCK["clock"] == "cpu" else "time"
    totals = {m: [sum(r[f"{clock}_{p}"] for p in PHASES) for r in records[m]] for m in methods}
    result = {"model": model_name, "settings": settings,
              "parameters": sum(p.numel() for p in model.parameters()),
              "trainable_parameters": sum(p.numel() for p in params.values()), "methods": {}}
    for m in methods:
        recs = records[m]
        scored = [r["scored_rows"] * settings["prompts_per_step"] * settings["group_size"] for r in recs]
        attribute = [r[f"{clock}_attribute"] for r in recs]
        result["methods"][m] = {
            "step": common.spread(totals[m]),
            "phases": {p: common.spread([r[f"{clock}_{p}"] for r in recs]) for p in PHASES},
            "attribute_ratio_vs_grpo_step": common.spread([r[f"{clock}_attribute"] / b
                                                           for r, b in zip(recs, totals["uniform"])])
            if "uniform" in methods else None,
            "ratio_vs_grpo": common.spread([t / b for t, b in zip(totals[m], totals["uniform"])])
            if "uniform" in methods else None,
            "scored_rows": statistics.mean(scored),
            "completion_length": statistics.mean(r["completion_length"] for r in recs),
            "attribute_s_per_scored_row": statistics.median(a / s for a, s in zip(attribute, scored) if s)
            if any(scored) else None,
            "reward_mean": statistics.mean(r["reward_mean"] for r in recs),
        }
    # Sanity: the rounds are paired, so every method must have sampled the same completions.
    lengths = {m: [r["completion_length"] for r in records[m]] for m in methods}
    result["same_rollouts"] = all(lengths[m] == lengths[methods[0]] for m in methods)
    return result


def render(report: dict) -> str:
    lines = []
    for res in report["models"]:
        s = res["settings"]
        kind = "LoRA rank 8 (all linear layers)" if s.get("lora") else "full fine-tuning"
        B = s["prompts_per_step"] * s["group_size"]
        rows = [[m, common.fmt(r["step"], ""), common.fmt(r["ratio_vs_grpo"], "x"),
                 *(f"{r['phases'][p]['median']:.2f}" for p in PHASES), common.fmt(r["attribute_ratio_vs_grpo_step"], "x"),
                 f"{r['scored_rows']:.1f}/{B}", r["attribute_s_per_scored_row"] and f"{r['attribute_s_per_scored_row']:.3f}",
                 f"{r['completion_length']:.0f}"] for m, r in res["methods"].items()]
        lines += [f"**{res['model']}** ({res['parameters'] / 1e6:.1f}M parameters, {kind}, "
                  f"{res['trainable_parameters'] / 1e6:.2f}M trained): {s['prompts_per_step']} prompts x "
                  f"{s['group_size']} completions = {B} rows, up to {s['max_new_tokens']} new tokens; "
                  f"{common.rounds(report)}; same rollouts across methods: {res['same_rollouts']}.", "",
                  *tables.markdown_table(["method", "step (s)", "vs GRPO (paired)", *PHASES, "attribute / GRPO step",
                                          "rows scored", "s per scored row", "completion tokens"], rows), ""]
    return "\n".join(lines)


def main(argv=None) -> dict:
    ap = common.parser(__doc__, "step_cost.json")
    ap.add_argument("--model", nargs="+", default=["toy", "smollm2"], choices=sorted(SETTINGS))
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS + EXTRA_METHODS))
    ap.add_argument("--prompts", type=int, default=None, help="prompts per step (default: per model)")
    ap.add_argument("--group-size", type=int, default=None)
    ap.add_argument("--max-new-tokens", type=int, default=None)
    ap.add_argument("--full", action="store_true", help="full fine-tuning of SmolLM2 instead of LoRA")
    args = ap.parse_args(argv)
    if "uniform" not in args.methods:
        raise ValueError("--methods must include 'uniform' (plain GRPO, the baseline of the ratios)")
    device, report = common.start(args, "step_cost", argv, models=[])
    for name in args.model:
        overrides = {"prompts_per_step": args.prompts, "group_size": args.group_size,
                     "max_new_tokens": args.max_new_tokens, "lora": False if args.full else None}
        settings = {**SETTINGS[name], **{k: v for k, v in overrides.items() if v is not None}}
        res = measure_model(name, methods=args.methods, warmup=args.warmup, repeats=args.repeats,
                            device=device, settings=settings, progress=not args.no_progress)
        res["loadavg"] = common.loadavg()
        report["models"].append(res)
        print(f"[{name}] load average now {res['loadavg']}", flush=True)
    return common.finish(report, args.out, render)


if __name__ == "__main__":
    main()
