"""Every timing benchmark in one command (``make bench``): step cost, OAR-P implementations,
scaling with length, and the learning summary of a comparison::

    python -m benchmarks.run_all                   # the full set
    python -m benchmarks.run_all --quick           # small sizes: checks that everything runs
    python -m benchmarks.run_all --device cuda     # the GPU column (bfloat16; --dtype float32 for CPU's)

Each benchmark writes its JSON to ``--out``; ``summary.md`` there collects every table with
its command, machine and load, for benchmarks/RESULTS.md, rewritten after each benchmark; a
benchmark that fails leaves its traceback there, the others still run, and the command
fails at the end. The learning summary is
``compare.md``'s table (`oar_lite.lab.report`) of the records in ``--compare-folder``, finished
or not; it is skipped when no comparison ran (``python -m oar_lite.lab compare``), never trained.
"""
from __future__ import annotations

import json
import time
import traceback
from pathlib import Path

import torch

from benchmarks import common

QUICK = {
    "step_cost": ["--model", "toy", "--prompts", "2", "--group-size", "4", "--warmup", "0", "--repeats", "1"],
    "oar_p_implementations": ["--model", "toy", "--sequences", "1", "--warmup", "0", "--repeats", "1"],
    "scaling": ["--lengths", "64", "128", "--warmup", "0", "--repeats", "1"],
}
HALF_PRECISION_TOLERANCE = 5e-2
"""oar_p_implementations' score agreement check in bfloat16/float16 (relative to
max(1, max |score|)): its default, 1e-4, holds in float32 only; in bfloat16 (8 bits of
mantissa) the implementations' different passes round differently. A wrong position
ablated still differs by about the score itself."""


def learning(folder: Path, out: Path) -> dict | None:
    """The summary of the comparison in ``folder`` (`oar_lite.lab.report.summarize`, at the target and
    with the settings of its ``compare.json`` when it has one), written to ``out`` as JSON;
    None when the folder holds no records."""
    from oar_lite.lab import compare, report

    records = compare.load_records(folder) if folder.exists() else []
    if not records:
        return None
    saved = json.loads((folder / "compare.json").read_text()) if (folder / "compare.json").exists() else {}
    summary = report.summarize(records, target=saved.get("target", compare.DEFAULT_TARGET))
    summary.update(settings=saved.get("settings"), command=saved.get("command"))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(summary, indent=1) + "\n")
    summary["markdown"] = report.render_markdown(summary)
    return summary


def main(argv=None) -> None:
    ap = common.parser(__doc__, common.DEFAULT_OUT, timing=False, device=True, threads=2)
    ap.add_argument("--quick", action="store_true", help="small sizes (checks that everything runs)")
    ap.add_argument("--only", nargs="+", default=["step_cost", "oar_p_implementations", "scaling", "learning"],
                    choices=["step_cost", "oar_p_implementations", "scaling", "learning"])
    ap.add_argument("--scored-rounds", action="store_true",
                    help="step_cost times only steps on which plain GRPO scores a row (its --scored-rounds)")
    ap.add_argument("--compare-folder", type=Path, default=Path("results/default"),
                    help="output folder of `python -m oar_lite.lab compare` for the learning summary")
    args = ap.parse_args(argv)

    from benchmarks import oar_p_implementations, scaling, step_cost

    modules = {"step_cost": step_cost, "oar_p_implementations": oar_p_implementations, "scaling": scaling}
    suffix = "_quick" if args.quick else ""
    if args.device != "cpu":
        suffix += "_" + args.device.replace(":", "")
    if args.dtype is not None:
        suffix += "_" + args.dtype
    shared = (["--threads", str(args.threads), "--device", args.device] + (["--dtype", args.dtype] if args.dtype else [])
              + (["--no-progress"] if args.no_progress else []))
    path = args.out / f"summary{suffix}.md"
    sections, failed = [], []

    def write_summary():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(sections))

    for name in args.only:
        start = time.perf_counter()
        # One benchmark failing (a GPU run is often the only one) must not lose the others:
        # its traceback goes into the summary, which is rewritten after every benchmark.
        try:
            if name == "learning":
                report = learning(args.compare_folder, args.out / f"learning{suffix}.json")
                if report is None:
                    print(f"learning: no comparison in {args.compare_folder}; run `python -m oar_lite.lab compare` first")
                    continue
            else:
                extra = ["--out", str(args.out / f"{name}{suffix}.json")]
                if name == "scaling":
                    extra += ["--plot", str(args.out / f"scaling{suffix}.png") if suffix else
                              str(Path(__file__).resolve().parent / "scaling.png")]
                if name == "step_cost" and args.scored_rounds:
                    extra += ["--scored-rounds"]
                if name == "oar_p_implementations" and common.model_dtype(args.device, args.dtype) != torch.float32:
                    extra += ["--tolerance", str(HALF_PRECISION_TOLERANCE)]
                report = modules[name].main((QUICK[name] if args.quick else []) + extra + shared)
        except Exception:  # noqa: BLE001 - reported in the summary and raised again at the end
            failed.append(name)
            error = traceback.format_exc()
            print(error, flush=True)
            sections.append(f"## {name}\n\nFAILED after {time.perf_counter() - start:.0f} s:\n\n```\n"
                            f"{error[-4000:]}```\n")
        else:
            machine = report.get("machine")
            where = f"Machine: {common.machine_line(machine)}.\n\n" if machine else ""
            command = f"Command: `{report.get('command', '')}` ({time.perf_counter() - start:.0f} s).\n\n"
            sections.append(f"## {name}\n\n{command}{where}{report['markdown']}")
        write_summary()
    write_summary()
    print(f"wrote {path}")
    if failed:
        raise RuntimeError(f"benchmark(s) {', '.join(failed)} failed (tracebacks above and in {path}); "
                           "the others' results are in the summary")


if __name__ == "__main__":
    main()
