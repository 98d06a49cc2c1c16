"""Does better credit make GRPO learn faster in one regime of the toy world? Trains GRPO,
the oracle, its controls and OAR with `oar_lite.lab.compare`, then reads steps to a target
accuracy over seeds (`oar_lite.lab.regime.learning_table`: 95% bootstrap intervals, speed-up
paired with GRPO by seed, the share of the oracle's gain recovered), the same at targets
0.05 either side, and the mean held-out accuracy over the run. Results:
benchmarks/RESULTS.md, "When credit matters".

Each run adds (or replaces) its ``--name`` entry in ``regimes.json`` of
`oar_lite.lab.regime.RESULTS_DIR`, which notebook 06 reads; ``--render`` prints every entry::

    python -m benchmarks.credit_regime --name small-batch --profile credit --out results/credit \\
        --methods uniform oracle inverted:oracle shuffled:oracle oar-p:answer_mean oar-g:answer_mean
    python -m benchmarks.credit_regime --name digits4 --profile credit --digits 4 --methods uniform oracle
    python -m benchmarks.credit_regime --render
"""
from __future__ import annotations

import json
import time

from benchmarks import common
from oar_lite.lab import compare as cmp, regime
from oar_lite.lab.findings import regimes as regime_findings
from oar_lite.lab.report import markdown_table
from oar_lite.train import OPTIMIZERS

OUT = regime.RESULTS_DIR / "regimes.json"


def main(argv=None) -> dict | str:
    ap = common.parser(__doc__, OUT, timing=False, out_flag="--json")
    ap.add_argument("--render", action="store_true", help="print the tables of every entry of --json, train nothing")
    ap.add_argument("--name", help="the regime's entry in the JSON (needed unless --render)")
    ap.add_argument("--profile", default="credit", choices=sorted(cmp.PROFILES))
    ap.add_argument("--methods", nargs="+", type=cmp.method_name, default=["uniform", "oracle"])
    ap.add_argument("--seeds", nargs="+", type=int, default=None)
    ap.add_argument("--digits", type=int, nargs="+", default=None)
    ap.add_argument("--model", default=None, help="toy model folder (default: the shipped one)")
    ap.add_argument("--out", dest="folder", default=None, help="compare folder (default: results/credit-<name>)")
    ap.add_argument("--note", default="", help="what this regime changes, in words")
    ap.add_argument("--reuse", nargs="*", default=[], metavar="DIR",
                    help="other compare folders whose runs of methods not trained here join the table (e.g. GRPO's "
                         "runs of the same seeds when only the boost changes, which uniform credit ignores)")
    ap.add_argument("--oracle", default="oracle",
                    help="the method whose gain the others' recovered fraction refers to (default: the blame oracle; "
                         "the positive control's is oracle-relevant)")
    ap.add_argument("--reuse-methods", nargs="+", default=["uniform"],
                    help="the methods taken from --reuse folders (default: GRPO's runs only)")
    ap.add_argument("--optimizer", default=None, choices=sorted(OPTIMIZERS),
                    help="the runs' optimizer (default: the profile's, AdamW); sgd wants a far larger --learning-rate")
    cmp.add_run_flags(ap, {k: cmp.RUN_OPTIONS[k] for k in ("target", "jobs")})
    args = ap.parse_args(argv)
    if args.render:
        data = json.loads(args.out.read_text())
        text = "\n".join([regime_findings.text("table", regime_findings.rows(data)),
                          *("\n" + render(entry) for entry in data.values())])
        print(text)
        return text
    if not args.name:
        ap.error("--name is required (the regime's entry in the JSON), unless --render")
    common.require_toy_model(ap, args.model)
    common.require_inputs(ap, "--reuse", args.reuse, "runs", "a compare folder (an earlier run's --out)")
    out = args.folder or f"results/credit-{args.name}"
    command = common.command("credit_regime", argv)
    t0 = time.time()
    overrides = cmp.run_overrides(ap, args, args.methods)  # a flag without effect: a usage error, nothing trained
    if args.optimizer is not None:
        overrides["optimizer"] = args.optimizer
    summary = cmp.compare(args.methods, args.seeds, steps=args.steps, out=out, profile=args.profile,
                          target=args.target, jobs=cmp.RUN_OPTIONS["jobs"].default if args.jobs is None else args.jobs, threads=args.threads, model_dir=args.model,
                          overrides=overrides, digits=args.digits[0] if args.digits and len(args.digits) == 1
                          else args.digits, progress=False, command=command)
    records = cmp.load_records(out)
    trained, methods = {r.get("method") for r in records}, list(args.methods)
    for folder in args.reuse:  # the same seeds give the same prompts, so the pairing holds
        reused = [r for r in cmp.load_records(folder) if r.get("method") in args.reuse_methods
                  and r.get("method") not in trained]
        records += reused
        methods = [m for m in dict.fromkeys(r["method"] for r in reused if "method" in r) if m not in methods] + methods
    methods.sort(key=lambda m: (m != "uniform", m != args.oracle))  # GRPO, the oracle, then the rest in order
    options = {"methods": methods, "oracle": args.oracle, "max_step": summary["settings"]["steps"]}
    table = regime.learning_table(records, target=summary["target"], **options)
    # The same runs read at a target 0.05 lower and higher: does the verdict hang on the target chosen?
    others = {f"{t:g}": regime.learning_table(records, target=t, **options)
              for t in (round(summary["target"] - 0.05, 4), round(summary["target"] + 0.05, 4)) if 0 < t <= 1}
    # Without a target: the mean held-out accuracy over the run, paired against GRPO seed by seed.
    area = regime.accuracy_area_table(records, **options)
    entry = {"name": args.name, "note": args.note, "command": command, "settings": summary["settings"],
             "oracle": args.oracle,
             "table": table, "other_targets": others, "area": area, "wall_s": time.time() - t0,
             "reused": {"folders": [common.portable(f) for f in args.reuse], "methods": [m for m in methods if m not in args.methods]}}
    common.write_entry(args.out, args.name, entry)
    print(render(entry))
    return entry


def _ci(value: float, interval, digits: int = 1, unit: str = "") -> str:
    """``value (low-high)``."""
    return f"{value:.{digits}f}{unit} ({interval[0]:.{digits}f}-{interval[1]:.{digits}f})"


def render(entry: dict) -> str:
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


if __name__ == "__main__":
    main()
