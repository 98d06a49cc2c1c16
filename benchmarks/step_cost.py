"""Step cost: one GRPO step with uniform credit (plain GRPO), OAR-G and OAR-P, by phase.

Each method runs `oar_lite.train.train_step` from the same weights with a fresh optimizer
on the same prompts and sampling seed, so only the attribution differs; rounds are
interleaved and ratios to GRPO taken within a round (`benchmarks.common`). Round r runs
step ``FIRST_STEP + r``; ``--scored-rounds`` keeps only steps on which GRPO scores a row
(rows of equal-reward groups are skipped, as in training). Targets: `TARGETS`.

Run (offline, from the repository root)::

    .venv/bin/python -m benchmarks.step_cost --model toy smollm2 --repeats 5
    .venv/bin/python -m benchmarks.step_cost --model toy --methods uniform oar-g oar-g-per-row oar-p
    .venv/bin/python -m benchmarks.step_cost --model smollm2 --methods uniform oar-g --scored-rounds
    .venv/bin/python -m benchmarks.step_cost --model smollm2 --device cuda
    .venv/bin/python -m benchmarks.step_cost --model toy --methods uniform oar-g entropy-top
    .venv/bin/python -m benchmarks.step_cost --model toy smollm2 --methods uniform oar-g grail

Writes ``benchmarks/results/step_cost.json`` and prints a markdown table.
"""
from __future__ import annotations

import dataclasses
import statistics
import zlib
from typing import Callable

import torch

from benchmarks import common
from oar_lite.lab import report as tables
from oar_lite.lab import scorers  # noqa: F401  (registers entropy-top, and the lab's other methods --methods may name)
from oar_lite.train import PHASES

METHODS = ("uniform", "oar-g", "oar-p")
EXTRA_METHODS = ("oar-g-per-row", "oar-p-per-row",  # scored one row at a time (the paths before), for comparison
                 "entropy-top",  # TRL's top_entropy_quantile (one forward for the entropies), a baseline every TRL user has
                 "grail")  # GRAIL's gradient saliency (oar_lite.lab.grail: one forward + backward for all rows)
TARGETS = {"toy": {"oar-g": 1.3, "oar-p": 2.0}, "smollm2": {"oar-g": 1.10}}
"""Issue 17, per model: the most a method's step may cost, as a multiple of GRPO's step
(paired median over >= 5 interleaved rounds; SmolLM2 with LoRA)."""

# Per model: a step like the ones the project trains with. The toy settings are
# `oar_lite.lab.compare`'s (8 prompts x 8 completions, full fine-tuning); SmolLM2 trains a
# LoRA adapter (rank 8, all linear layers) on 2-shot chat prompts of the word-problem
# bank's one-step problems.
SETTINGS = {
    "toy": dict(prompts_per_step=8, group_size=8, max_new_tokens=66, learning_rate=1e-4, lora=False),
    "smollm2": dict(prompts_per_step=2, group_size=4, max_new_tokens=128, learning_rate=1e-5, lora=True),
}


def spread_reward(completion: str, problem: dict) -> float:
    """A cost-only reward, 0 or 1 by the parity of the completion text's CRC-32: almost every
    group gets unequal rewards, so every row that states an answer is scored, as in a step where
    the model is right about half the time. Its values mean nothing; `--reward spread` uses it
    where the model is too rarely right for `math_reward` to give a group a spread (SmolLM2 on
    two- and three-step problems)."""
    return float(zlib.crc32(completion.encode()) % 2)


REWARDS = {"math": None, "spread": spread_reward}
"""``--reward``: None is the task's default, `oar_lite.reward.math_reward`."""


def make_task(model_name: str, tokenizer, *, shots: int = 2, word_steps=(1,), reward: str = "math"):
    """The training task of the model: toy additions, or SmolLM2's word problems, rewarded by
    ``REWARDS[reward]``."""
    from oar_lite.train import Task

    if model_name == "toy":
        from oar_lite.lab.compare import toy_task

        return dataclasses.replace(toy_task(eval_size=1), reward=REWARDS[reward])
    from oar_lite.course.problems import format_prompt, make_problems

    # One-step templates: SmolLM2 solves about 20% of them at T=1 (benchmarks/RESULTS.md, "SmolLM2
    # baseline"), so most groups have mixed rewards and get scored; on the full bank most do not.
    problems = [{"prompt": format_prompt(p, tokenizer, shots=shots), "answer": p.answer}
                for p in make_problems(64, seed=7, steps=list(word_steps))]
    return Task(train_problems=problems, add_special_tokens=False, reward=REWARDS[reward])


FIRST_STEP = 1000
"""Round ``r`` runs step ``FIRST_STEP + r`` (its prompts and sampling seed); warm-up rounds are ``r < 0``."""
CANDIDATES_PER_ROUND = 20
"""`--scored-rounds` gives up after this many candidate steps per round needed (``--max-candidates``)."""


def scoring_steps(scored_rows: Callable[[int], float], need: int, *, max_candidates: int,
                  first: int = FIRST_STEP) -> tuple[list[int], int]:
    """The first ``need`` steps from ``first`` on whose rollouts plain GRPO scores at least
    one row (``scored_rows(step) > 0``: some group had unequal rewards), and how many
    candidate steps were drawn to find them.

    Raises:
        ValueError: fewer than ``need`` of the ``max_candidates`` candidates score a row.
    """
    if need < 1 or max_candidates < need:
        raise ValueError(f"expected need >= 1 and max_candidates >= need, got need={need}, "
                         f"max_candidates={max_candidates}")
    found: list[int] = []
    for drawn, step in enumerate(range(first, first + max_candidates), start=1):
        if scored_rows(step) > 0:
            found.append(step)
            if len(found) == need:
                return found, drawn
    raise ValueError(f"only {len(found)} of {max_candidates} candidate steps ({first}-{first + max_candidates - 1}) "
                     f"scored any row under plain GRPO; {need} needed (warm-up + repeats). Raise --max-candidates, "
                     f"or use bigger groups (--group-size) or more prompts per step (--prompts)")


def measure_model(model_name: str, *, methods, warmup: int, repeats: int, device, settings: dict,
                  progress: bool = True, scored_rounds: bool = False, max_candidates: int | None = None,
                  on_round: Callable[[list[dict]], None] | None = None, word_steps=(1,),
                  reward: str = "math") -> dict:
    """Interleaved rounds of `train_step` per method on one model; per-phase times and ratios.

    Round ``r`` runs step ``FIRST_STEP + r``; with ``scored_rounds``, the rounds run instead
    the first steps on which plain GRPO scores a row (`scoring_steps`, at most
    ``max_candidates`` tried, default ``CANDIDATES_PER_ROUND`` per round), found by untimed
    GRPO steps that leave the weights and the random state as they were. Each round prints
    one line and is passed, with the rounds before it, to ``on_round`` (``result["rounds"]``'s
    entries), so a run stopped early still leaves what it measured.
    """
    from oar_lite.seeding import rng_state, set_rng_state
    from oar_lite.attribution import CreditConfig
    from oar_lite.lab.uniformity import step_metrics
    from oar_lite.train import TrainConfig, add_lora, train_step

    if scored_rounds and "uniform" not in methods:
        raise ValueError("scored_rounds finds its steps with plain GRPO: methods must include 'uniform'")

    import functools

    from oar_lite.attribution import SCORERS, gradient_scores, perturbation_scores, register_scorer

    # Not the scorers themselves, so token_weights takes its per-row path.
    for name, scorer in (("oar-g-per-row", gradient_scores), ("oar-p-per-row", perturbation_scores)):
        if name in methods and name not in SCORERS:
            register_scorer(name, functools.partial(scorer))
    model, tok = common.load(model_name, device)
    task = make_task(model_name, tok, word_steps=word_steps, reward=reward)
    # The trainer's credit settings of each method (OAR-P's limits per pass: CreditConfig's defaults).
    configs = {m: TrainConfig(credit=CreditConfig(method=m), seed=0, progress=False,
                              eval_size=0, **settings) for m in methods}
    if settings.get("lora"):
        model = add_lora(model, configs[methods[0]])
    params = {n: p for n, p in model.named_parameters() if p.requires_grad}
    start = {n: p.detach().clone() for n, p in params.items()}

    def reset_weights():
        with torch.no_grad():
            for n, p in params.items():
                p.copy_(start[n])

    def run_step(method, step):
        reset_weights()  # the same weights before every step
        optimizer = torch.optim.AdamW(list(params.values()), lr=configs[method].learning_rate)
        return train_step(model, tok, task, configs[method], optimizer, step=step, step_metrics=step_metrics)

    def rows_scored(record):  # train_step logs the share of rows scored; the count is clearer here
        return record["scored_rows"] * settings["prompts_per_step"] * settings["group_size"]

    search = None
    steps = [FIRST_STEP + r for r in range(-warmup, repeats)]
    if scored_rounds:
        rng = rng_state()
        def scored_rows(step):
            rows = rows_scored(run_step("uniform", step))
            print(f"[{model_name}] candidate step {step}: GRPO scores {rows:.0f} rows", flush=True)
            return rows

        try:
            steps, drawn = scoring_steps(scored_rows, warmup + repeats,
                                         max_candidates=max_candidates or CANDIDATES_PER_ROUND * (warmup + repeats))
        finally:
            reset_weights()
            set_rng_state(rng)
        search = {"steps": steps, "candidates": drawn, "first": FIRST_STEP}

    # train_step records both clocks per phase: CPU seconds (cpu_*) or wall-clock (time_*), as `setup` chose.
    clock = "cpu" if common.CLOCK["clock"] == "cpu" else "time"
    rounds_log: list[dict] = []

    def after_round(r, results):
        step_seconds = {m: sum(rec[f"{clock}_{p}"] for p in PHASES) for m, (_, rec) in results.items()}
        rows = rows_scored(results[methods[0]][1])
        rounds_log.append({"round": r, "step": steps[r + warmup], "warmup": r < 0, "scored_rows": rows,
                           "step_seconds": step_seconds,
                           "attribute_seconds": {m: rec[f"{clock}_attribute"] for m, (_, rec) in results.items()}})
        base = step_seconds.get("uniform")
        ratios = ", ".join(f"{m} {t:.2f} s" + (f" ({t / base:.2f}x)" if base and m != "uniform" else "")
                           for m, t in step_seconds.items())
        print(f"[{model_name}] round {r}{' (warm-up)' if r < 0 else ''}, step {steps[r + warmup]}, "
              f"{rows:.0f} rows scored: {ratios}", flush=True)
        if on_round is not None:
            on_round(rounds_log)

    runs = common.interleaved({m: (lambda r, m=m: run_step(m, steps[r + warmup])) for m in methods},
                              warmup=warmup, repeats=repeats, device=device, progress=progress,
                              after_round=after_round)
    records = {m: [rec for _, rec in runs[m]] for m in methods}
    totals = {m: [sum(r[f"{clock}_{p}"] for p in PHASES) for r in records[m]] for m in methods}
    result = {"model": model_name, "settings": settings, "reward": reward, "steps": steps[warmup:], "scored_rounds": search,
              "credit": {k: v for k, v in dataclasses.asdict(CreditConfig()).items() if k != "method"},
              "rounds": rounds_log,
              "parameters": sum(p.numel() for p in model.parameters()),
              "trainable_parameters": sum(p.numel() for p in params.values()), "methods": {}}
    for m in methods:
        recs = records[m]
        scored = [rows_scored(r) for r in recs]
        attribute = [r[f"{clock}_attribute"] for r in recs]
        result["methods"][m] = {
            "step": common.spread(totals[m]),
            "phases": {p: common.spread([r[f"{clock}_{p}"] for r in recs]) for p in PHASES},
            "attribute_ratio_vs_grpo_step": common.spread([a / b for a, b in zip(attribute, totals["uniform"])])
            if "uniform" in methods else None,
            "ratio_vs_grpo": common.spread([t / b for t, b in zip(totals[m], totals["uniform"])])
            if "uniform" in methods else None,
            "scored_rows": statistics.mean(scored),
            "scored_rows_per_round": scored,
            "completion_length": statistics.mean(r["completion_length"] for r in recs),
            "attribute_s_per_scored_row": statistics.median(a / s for a, s in zip(attribute, scored) if s)
            if any(scored) else None,
            "reward_mean": statistics.mean(r["reward_mean"] for r in recs),
        }
    # Sanity: the rounds are paired, so every method must have sampled the same completions
    # (same lengths and rewards) and scored the same rows.
    seen = {m: [(r["completion_length"], r["reward_mean"], r["scored_rows"]) for r in records[m]] for m in methods}
    result["same_rollouts"] = all(seen[m] == seen[methods[0]] for m in methods)
    return result


def _steps_line(res: dict) -> str:
    """Which steps the kept rounds ran, and for `--scored-rounds` the share of candidates that scored a row."""
    search = res.get("scored_rounds")
    if not search:
        return f"steps {', '.join(map(str, res['steps']))}"
    drawn, found = search["candidates"], len(search["steps"])
    return (f"only steps where GRPO scores a row: {found} of the {drawn} candidate steps "
            f"{search['first']}-{search['first'] + drawn - 1} did (warm-up included); kept rounds on steps "
            f"{', '.join(map(str, res['steps']))}")


def _targets(model_name: str) -> str:
    targets = TARGETS.get(model_name, {})
    return "; targets (issue 17): " + ", ".join(f"{m} <= {t:.2f}x" for m, t in targets.items()) if targets else ""


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
                  f"{'' if res.get('reward', 'math') == 'math' else 'cost-only reward ' + repr(res['reward']) + '; '}"
                  f"{common.rounds(report)}; {_steps_line(res)}; same rollouts across methods: {res['same_rollouts']}"
                  f"{_targets(res['model'])}.",
                  "",
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
    ap.add_argument("--word-steps", type=int, nargs="+", default=[1], choices=[1, 2, 3],
                    help="SmolLM2: the word problems' step counts (default one-step; 1 2 3 gives longer completions)")
    ap.add_argument("--reward", default="math", choices=sorted(REWARDS),
                    help="math: right or wrong (default); spread: a cost-only reward that gives almost every "
                         "group a spread, so every row that states an answer is scored")
    ap.add_argument("--scored-rounds", action="store_true",
                    help=f"run the rounds only on steps (from {FIRST_STEP} on) where plain GRPO scores at least one "
                         "row, found by untimed GRPO steps first; default: steps in a row, scored or not")
    ap.add_argument("--max-candidates", type=int, default=None,
                    help=f"with --scored-rounds, how many steps to try at most (default {CANDIDATES_PER_ROUND} "
                         "per round needed)")
    args = ap.parse_args(argv)
    if "uniform" not in args.methods:
        raise ValueError("--methods must include 'uniform' (plain GRPO, the baseline of the ratios)")
    if args.max_candidates is not None and not args.scored_rounds:
        raise ValueError("--max-candidates only applies with --scored-rounds")
    device, report = common.start(args, "step_cost", argv, models=[])
    for name in args.model:
        overrides = {"prompts_per_step": args.prompts, "group_size": args.group_size,
                     "max_new_tokens": args.max_new_tokens, "lora": False if args.full else None}
        settings = {**SETTINGS[name], **{k: v for k, v in overrides.items() if v is not None}}
        def save_partial(rounds, name=name):  # the rounds so far, in case the run is stopped
            report["partial"] = {"model": name, "rounds": rounds}
            common.write_json(report, args.out)

        res = measure_model(name, methods=args.methods, warmup=args.warmup, repeats=args.repeats,
                            device=device, settings=settings, progress=not args.no_progress,
                            scored_rounds=args.scored_rounds, max_candidates=args.max_candidates,
                            on_round=save_partial, word_steps=args.word_steps, reward=args.reward)
        report.pop("partial", None)
        res["loadavg"] = common.loadavg()
        res["word_steps"] = args.word_steps
        report["models"].append(res)
        print(f"[{name}] load average now {res['loadavg']}", flush=True)
    return common.finish(report, args.out, render)


if __name__ == "__main__":
    main()
