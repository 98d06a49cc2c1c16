"""Learning: what GRPO, OAR-G and OAR-P reach, and how fast, from a finished comparison.

Reads the records of ``python -m oar_lite compare`` (``<folder>/compare.jsonl``, or the
runs' ``metrics.jsonl`` while it is still running) and summarises them with
`oar_lite.compare.summarize` (one place for the arithmetic): per method, over seeds, the
held-out accuracy reached (final and best), the steps and training wall time to the
target accuracy, the time per step and its ratio to GRPO, and the per-seed difference
to GRPO (same seed = same prompts). It trains nothing.

Run (offline, from the repository root)::

    .venv/bin/python -m oar_lite compare --out results/default       # the training (another job)
    .venv/bin/python -m benchmarks.learning --folder results/default --target 0.75

Writes ``benchmarks/results/learning.json`` and prints a markdown table.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from benchmarks import common


def _mean_sd(xs: list) -> str:
    got = [x for x in xs if x is not None]
    if not got:
        return "-"
    if len(got) == 1:
        return f"{got[0]:.3g}"
    return f"{statistics.mean(got):.3g} ± {statistics.stdev(got):.2g}"


def _per_seed(xs: list, fmt: str) -> str:
    return ", ".join("not reached" if x is None else fmt.format(x) for x in xs)


def summarize_folder(folder: Path, *, target: float, methods=None) -> dict:
    from oar_lite.compare import load_records, summarize

    records = load_records(folder)
    if not records:
        raise ValueError(f"no compare records in {folder} (expected compare.jsonl or runs/*/metrics.jsonl)")
    summary = summarize(records, target=target, methods=methods)
    # How far each run got (a comparison still running has unfinished runs).
    steps_done = {}
    for r in records:
        if r["type"] == "train":
            key = (r["method"], r["seed"])
            steps_done[key] = max(steps_done.get(key, 0), r["step"])
    for method, m in summary["methods"].items():
        m["steps_done"] = [steps_done.get((method, s), 0) for s in m["seeds"]]
    settings = folder / "compare.json"
    if settings.exists():
        summary["settings"] = json.loads(settings.read_text()).get("settings")
    summary["folder"] = str(folder)
    return summary


def add_step_cost(summary: dict, step_cost_json: Path, model: str = "toy") -> dict:
    """Time to target in GRPO-step units, load-independent: steps to target times the
    paired step-cost ratio that `benchmarks.step_cost` measured interleaved (the compare
    runs' own wall times drift with the machine's load while they train)."""
    report = json.loads(Path(step_cost_json).read_text())
    res = next((r for r in report["models"] if r["model"] == model), None)
    if res is None:
        raise ValueError(f"{step_cost_json} has no {model!r} model; it has {[r['model'] for r in report['models']]}")
    for method, m in summary["methods"].items():
        cost = res["methods"].get(method.partition(":")[0] if method not in res["methods"] else method)
        ratio = cost["ratio_vs_grpo"]["median"] if cost and cost.get("ratio_vs_grpo") else None
        m["interleaved_step_ratio"] = ratio
        m["grpo_steps_to_target"] = [None if s is None or ratio is None else s * ratio for s in m["steps_to_target"]]
    summary["step_cost_source"] = str(step_cost_json)
    return summary


def render(summary: dict) -> str:
    target = summary["target"]
    lines = [f"From `{summary['folder']}` (target: held-out accuracy >= {target:g}; mean ± sample std over seeds; "
             "time = training wall time, evaluation excluded):", "",
             "| method | seeds | steps run | start acc. | final acc. | best acc. | final - GRPO, per seed "
             "| reached target | steps to target (per seed) | time to target, s (per seed) | s/step | vs GRPO |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    with_cost = any(m.get("interleaved_step_ratio") for m in summary["methods"].values())
    if with_cost:
        lines[-2] += " interleaved step ratio | time to target, GRPO steps (per seed) |"
        lines[-1] += "---|---|"
    for method, m in summary["methods"].items():
        diffs = m.get("paired_diff_vs_grpo") or []
        paired = "-" if method == "uniform" else ", ".join(f"{d:+.3f}" for d in diffs)
        cost = f"{m['step_cost_vs_grpo']:.2f}x" if m.get("step_cost_vs_grpo") else "-"
        lines.append(
            f"| {method} | {len(m['seeds'])} | {', '.join(map(str, m['steps_done']))} | {m['start_accuracy']:.3f} "
            f"| {_mean_sd(m['final_accuracies'])} | {m['best_accuracy']:.3f} | {paired} "
            f"| {m['reached']}/{len(m['seeds'])} | {_per_seed(m['steps_to_target'], '{:d}')} "
            f"| {_per_seed(m['time_to_target'], '{:.0f}')} | {m['time_per_step']:.2f} | {cost} |")
        if with_cost:
            ratio = m.get("interleaved_step_ratio")
            lines[-1] += (f" {ratio:.2f}x |" if ratio else " - |") + f" {_per_seed(m['grpo_steps_to_target'], '{:.1f}')} |"
    if with_cost:
        lines += ["", f"Interleaved step ratio: median paired ratio from `{summary['step_cost_source']}`; "
                  "time to target in GRPO steps = steps to target x that ratio."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--folder", type=Path, default=Path("results/default"),
                    help="output folder of `python -m oar_lite compare`")
    ap.add_argument("--target", type=float, default=None, help="held-out accuracy target (default: compare's)")
    ap.add_argument("--methods", nargs="+", default=None)
    ap.add_argument("--step-cost", type=Path, default=None,
                    help="a benchmarks.step_cost JSON with the toy model: adds time to target in GRPO steps")
    ap.add_argument("--out", type=Path, default=common.DEFAULT_OUT / "learning.json")
    args = ap.parse_args(argv)
    from oar_lite.compare import DEFAULT_TARGET

    summary = summarize_folder(args.folder, target=args.target or DEFAULT_TARGET, methods=args.methods)
    if args.step_cost:
        add_step_cost(summary, args.step_cost)
    summary["command"] = "python -m benchmarks.learning " + " ".join(argv if argv is not None else sys.argv[1:])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(summary, indent=1, default=str) + "\n")
    summary["markdown"] = render(summary)
    print(summary["markdown"])
    return summary


if __name__ == "__main__":
    main()
