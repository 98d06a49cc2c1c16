"""Does better credit make GRPO learn faster in one regime of the toy world? Trains GRPO,
the oracle, its controls and OAR with `oar_lite.compare`, then reads steps to a target
accuracy over seeds (`oar_lite.regime.learning_table`: 95% bootstrap intervals, speed-up
paired with GRPO by seed, the share of the oracle's gain recovered), the same at targets
0.05 either side, and the mean held-out accuracy over the run. Results:
benchmarks/RESULTS.md, "When credit matters".

Each run adds (or replaces) its ``--name`` entry in ``regimes.json`` of
`oar_lite.regime.RESULTS_DIR`, which notebook 06 reads; ``--render`` prints every entry::

    python -m benchmarks.credit_regime --name small-batch --profile credit --out results/credit \\
        --methods uniform oracle inverted:oracle shuffled:oracle oar-p:answer_mean oar-g:answer_mean
    python -m benchmarks.credit_regime --name digits4 --profile credit --digits 4 --methods uniform oracle
    python -m benchmarks.credit_regime --render
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from benchmarks import common
from oar_lite.regime import RESULTS_DIR

OUT = RESULTS_DIR / "regimes.json"


def main(argv=None) -> dict:
    from oar_lite import compare as cmp, regime

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--name", required=True, help="the regime's entry in the JSON")
    ap.add_argument("--profile", default="credit", choices=sorted(cmp.PROFILES))
    ap.add_argument("--methods", nargs="+", default=["uniform", "oracle"])
    ap.add_argument("--seeds", nargs="+", type=int, default=None)
    ap.add_argument("--steps", type=int, default=None)
    ap.add_argument("--target", type=float, default=None)
    ap.add_argument("--digits", type=int, nargs="+", default=None)
    ap.add_argument("--model", default=None, help="toy model folder (default: the shipped one)")
    ap.add_argument("--set", nargs="*", default=[], metavar="FIELD=VALUE",
                    help="TrainConfig or CreditConfig fields to change, e.g. prompts_per_step=4 boost=9")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--out", default=None, help="compare folder (default: results/credit-<name>)")
    ap.add_argument("--json", type=Path, default=OUT)
    ap.add_argument("--note", default="", help="what this regime changes, in words")
    ap.add_argument("--reuse", nargs="*", default=[], metavar="DIR",
                    help="other compare folders whose runs of methods not trained here join the table (e.g. GRPO's "
                         "runs of the same seeds when only the boost changes, which uniform credit ignores)")
    ap.add_argument("--oracle", default="oracle",
                    help="the method whose gain the others' recovered fraction refers to (default: the blame oracle; "
                         "the positive control's is oracle-relevant)")
    ap.add_argument("--reuse-methods", nargs="+", default=["uniform"],
                    help="the methods taken from --reuse folders (default: GRPO's runs only)")
    args = ap.parse_args(argv)
    overrides = {field: json.loads(value) for field, _, value in (item.partition("=") for item in args.set)}
    out = args.out or f"results/credit-{args.name}"
    command = common.command("credit_regime", argv)
    t0 = time.time()
    summary = cmp.compare(args.methods, args.seeds, steps=args.steps, out=out, profile=args.profile,
                          target=args.target, jobs=args.jobs, model_dir=args.model, overrides=overrides,
                          digits=args.digits[0] if args.digits and len(args.digits) == 1 else args.digits,
                          progress=False, command=command)
    records = cmp.load_records(out)
    trained, methods = {r.get("method") for r in records}, list(args.methods)
    for folder in args.reuse:  # the same seeds give the same prompts, so the pairing holds
        reused = [r for r in cmp.load_records(folder) if r.get("method") in args.reuse_methods
                  and r.get("method") not in trained]
        records += reused
        methods = [m for m in dict.fromkeys(r["method"] for r in reused if "method" in r) if m not in methods] + methods
    methods.sort(key=lambda m: (m != "uniform", m != args.oracle))  # GRPO, the oracle, then the rest in order
    table = regime.learning_table(records, target=summary["target"], methods=methods, oracle=args.oracle,
                                  max_step=summary["settings"]["steps"])
    # The same runs read at a target 0.05 lower and higher: does the verdict hang on the target chosen?
    others = {f"{t:g}": regime.learning_table(records, target=t, methods=methods, oracle=args.oracle,
                                              max_step=summary["settings"]["steps"])
              for t in (round(summary["target"] - 0.05, 4), round(summary["target"] + 0.05, 4)) if 0 < t <= 1}
    # Without a target: the mean held-out accuracy over the run, paired against GRPO seed by seed.
    area = regime.accuracy_area_table(records, methods=methods, oracle=args.oracle,
                                      max_step=summary["settings"]["steps"])
    entry = {"name": args.name, "note": args.note, "command": command, "settings": summary["settings"],
             "oracle": args.oracle,
             "table": table, "other_targets": others, "area": area, "wall_s": time.time() - t0,
             "reused": {"folders": args.reuse, "methods": [m for m in methods if m not in args.methods]}}
    data = json.loads(args.json.read_text()) if args.json.exists() else {}
    data[args.name] = entry
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(data, indent=1, default=str) + "\n")
    print(render(entry))
    return entry


def _ci(value: float, interval, digits: int = 1, unit: str = "") -> str:
    """``value (low-high)``."""
    return f"{value:.{digits}f}{unit} ({interval[0]:.{digits}f}-{interval[1]:.{digits}f})"


def render(entry: dict) -> str:
    from oar_lite.report import markdown_table

    t = entry["table"]
    rows = [[m, _ci(e["mean"], e["ci"]), f"{e['reached']}/{len(t['seeds'])}", _ci(e["speedup"], e["speedup_ci"], 2, "x"),
             None if e["recovered"] is None else
             f"{e['recovered']:.2f} ({e['recovered_ci'][0]:.2f} to {e['recovered_ci'][1]:.2f})",
             f"{e['final_accuracy']:.3f}"] for m, e in t["methods"].items()]
    lines = [f"{entry['name']}: target {t['target']:g}, seeds {t['seeds']}", "",
             *markdown_table(["method", "steps to target (mean, 95% CI)", "reached", "speed-up vs GRPO (95% CI)",
                              "recovered (95% CI)", "final acc."], rows)]
    if "area" in entry:
        lines += ["", "Mean held-out accuracy over the run (steps " + f"{entry['area']['steps'][0]}-{entry['area']['steps'][-1]}"
                  + "), minus GRPO's, paired by seed: " + "; ".join(
                      f"{m} {e['mean']:.3f} ({e['diff']:+.3f}, {e['diff_ci'][0]:+.3f} to {e['diff_ci'][1]:+.3f}"
                      + ("" if e["recovered"] is None else f", recovered {e['recovered']:.2f} "
                         f"({e['recovered_ci'][0]:.2f} to {e['recovered_ci'][1]:.2f})") + ")"
                      for m, e in entry["area"]["methods"].items())]
    for target, other in entry.get("other_targets", {}).items():
        lines += ["", f"At target {target}: " + "; ".join(
            f"{m} {e['mean']:.1f} ({e['ci'][0]:.1f}-{e['ci'][1]:.1f}, {e['censored']} censored)"
            for m, e in other["methods"].items())]
    return "\n".join(lines)


def render_regimes(data: dict) -> str:
    """The table of regimes tried (GRPO against the oracle in each), for RESULTS.md."""
    from oar_lite.report import intervals_overlap, markdown_table

    rows = []
    for name, e in data.items():
        t, s = e["table"], e["settings"]
        g, o = t["methods"]["uniform"], t["methods"].get("oracle")
        if o is None or "oracle" in e.get("reused", {}).get("methods", []):  # each oracle run listed once
            continue
        a = e.get("area", {}).get("methods", {}).get("oracle")
        rows.append([name, e["note"], f"{s['prompts_per_step']}x{s['group_size']}, {s['steps']}", f"{t['target']:g}",
                     len(t["seeds"]), _ci(g["mean"], g["ci"]), _ci(o["mean"], o["ci"]),
                     _ci(o["speedup"], o["speedup_ci"], 2, "x"),
                     "overlap" if intervals_overlap(g["ci"], o["ci"]) else "disjoint",
                     None if a is None else f"{a['diff']:+.3f} ({a['diff_ci'][0]:+.3f} to {a['diff_ci'][1]:+.3f})"])
    return "\n".join(markdown_table(["regime", "what changes", "P x G, steps", "target", "seeds", "GRPO steps (95% CI)",
                                      "oracle steps (95% CI)", "speed-up (95% CI)", "intervals",
                                      "mean acc. oracle - GRPO (95% CI)"], rows))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--render"]:  # print the tables of the JSON, e.g. for RESULTS.md
        data = json.loads(OUT.read_text())
        print(render_regimes(data))
        for entry in data.values():
            print("\n" + render(entry))
    else:
        main()
