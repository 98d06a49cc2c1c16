"""Is the learner noise-limited? GRPO at several prompts per step (issue 39): a bigger batch
removes gradient noise, all that credit assignment can remove, so if doubling the batch does
not speed learning per step no credit method can. Trains GRPO (`oar_lite.lab.compare`, the
``credit`` profile) at each batch size seed by seed (every batch size of a seed before the
next seed, so a sweep cut short still pairs its seeds), then reads the finished seeds with
`oar_lite.lab.regime.batch_size_table` and, given the oracle's measured gain over GRPO at the
smallest batch, the batch size it is worth (`regime.batch_equivalent`). Pre-registration and
results: benchmarks/RESULTS.md, "Issue 39"::

    python -m benchmarks.batch_size --name "plain toy, adamw" --seeds 300 301 302 303 304 305 306 307 308 309 \\
        --out $RUNS/pos/runs/batch-plain-adamw --json $RUNS/pos/batch.json --train
    python -m benchmarks.batch_size --name "k=64, adamw" --model $RUNS/pos/worlds/scratch64 --max-new-tokens 194 \\
        --seeds 300 ... 309 --out $RUNS/pos/runs/batch-k64-adamw --json $RUNS/pos/batch.json --train
    python -m benchmarks.batch_size --name "plain toy, sgd" --optimizer sgd --learning-rate LR ...

The runs of ``P`` prompts go to ``<--out>-P<P>``; without ``--train`` only finished runs are read.
"""
from __future__ import annotations

import time
from pathlib import Path

from benchmarks import common
from oar_lite.lab import compare as cmp, regime
from oar_lite.lab.report import markdown_table
from oar_lite.train import OPTIMIZERS


def folder(out: str, prompts: int) -> Path:
    """Where the runs of ``prompts`` prompts per step go."""
    return Path(f"{out}-P{prompts}")


def main(argv=None) -> dict:
    ap = common.parser(__doc__, regime.RESULTS_DIR / "batch_size.json", timing=False, out_flag="--json")
    ap.add_argument("--name", required=True, help="the entry's name in --json")
    ap.add_argument("--profile", default="credit", choices=sorted(cmp.PROFILES), help="the runs' settings (default: credit)")
    ap.add_argument("--prompts", type=int, nargs="+", default=[2, 4, 8], help="prompts per step compared")
    ap.add_argument("--group-size", type=int, default=4)
    ap.add_argument("--seeds", type=int, nargs="+", required=True)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--target", type=float, default=0.75)
    ap.add_argument("--model", default=None, help="toy model folder (default: the shipped one)")
    ap.add_argument("--max-new-tokens", type=int, default=None, help="default: the profile's (66)")
    ap.add_argument("--optimizer", default="adamw", choices=sorted(OPTIMIZERS))
    ap.add_argument("--learning-rate", type=float, default=None, help="default: the profile's (1e-4)")
    ap.add_argument("--out", dest="folder", required=True, help="run folders' prefix: <out>-P<prompts>")
    ap.add_argument("--train", action="store_true", help="train the missing runs first (else read finished ones)")
    ap.add_argument("--oracle-gain", type=float, default=None,
                    help="a method's mean-accuracy gain over GRPO at the smallest batch (the oracle's): "
                         "reported as the batch size it is worth")
    args = ap.parse_args(argv)
    common.require_toy_model(ap, args.model)
    if min(args.prompts) < 1 or len(set(args.prompts)) < 2:
        ap.error(f"--prompts: expected 2 or more distinct positive batch sizes, got {args.prompts}")
    overrides = {"group_size": args.group_size, "optimizer": args.optimizer}
    overrides.update({k: v for k, v in (("max_new_tokens", args.max_new_tokens),
                                        ("learning_rate", args.learning_rate)) if v is not None})
    command = common.command("batch_size", argv)

    def run(prompts: int, seeds: list[int]) -> list[dict]:
        out = folder(args.folder, prompts)
        cmp.compare(["uniform"], seeds, steps=args.steps, out=out, profile=args.profile, target=args.target, jobs=1,
                    threads=args.threads, model_dir=args.model, overrides={**overrides, "prompts_per_step": prompts},
                    progress=False, command=command)
        return cmp.load_records(out)

    t0 = time.time()
    if args.train:
        for seed in args.seeds:
            for prompts in args.prompts:
                run(prompts, [seed])
    finished = [s for s in args.seeds if all(cmp._finished(folder(args.folder, p) / "runs" / f"uniform-seed{s}",
                                                                args.steps) for p in args.prompts)]
    if len(finished) < 2:
        ap.exit(1, f"{len(finished)} seed(s) finished at every batch size ({finished}); need 2\n")
    runs = {p: run(p, finished) for p in args.prompts}  # read back, not trained
    table = regime.batch_size_table(runs, target=args.target, group_size=args.group_size, max_step=args.steps)
    settings = {**overrides, "steps": args.steps, "target": args.target, "profile": args.profile,
                "model": common.portable(args.model) if args.model else "oar_lite/course/data/toy-model", "seeds_asked": args.seeds}
    entry = {"name": args.name, "command": command, "settings": settings,
             "table": table, "wall_s": time.time() - t0}
    if args.oracle_gain is not None:
        diffs = {p: table["area"]["methods"][f"{p} prompts"]["diff"] for p in table["prompts"]}
        entry["oracle"] = {"gain": args.oracle_gain, "prompts": regime.batch_equivalent(diffs, args.oracle_gain)}
    common.write_entry(args.out, args.name, entry)
    print(render(entry))
    return entry


def render(entry: dict) -> str:
    t = entry["table"]
    steps, area, per = t["steps"]["methods"], t["area"]["methods"], t["per_completion"]["rows"]
    rows = [[name, f"{s['mean']:.1f} ({s['ci'][0]:.1f}-{s['ci'][1]:.1f})", f"{s['reached']}/{len(t['seeds'])}",
             f"{s['speedup']:.2f}x ({s['speedup_ci'][0]:.2f}-{s['speedup_ci'][1]:.2f})",
             f"{area[name]['mean']:.3f}", f"{area[name]['diff']:+.3f} ({area[name]['diff_ci'][0]:+.3f} to "
             f"{area[name]['diff_ci'][1]:+.3f})", f"{per[name]['completions_to_target']:.0f}",
             f"{per[name]['diff']:+.3f} ({per[name]['diff_ci'][0]:+.3f} to {per[name]['diff_ci'][1]:+.3f})"]
            for name, s in steps.items()]
    lines = [f"{entry['name']}: GRPO, target {t['steps']['target']:g}, seeds {t['seeds']}", "",
             *markdown_table(["batch", "steps to target (95% CI)", "reached", "speed-up per step (95% CI)",
                              "mean acc.", f"- {t['reference']} per step (95% CI)", "completions to target",
                              f"- {t['reference']} per completion, first {t['per_completion']['budget']} (95% CI)"],
                             rows)]
    if "oracle" in entry:
        lines += ["", f"The oracle's gain {entry['oracle']['gain']:+.3f} is worth GRPO at "
                      f"{entry['oracle']['prompts']:.1f} prompts per step."]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
