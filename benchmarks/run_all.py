"""Every timing benchmark in one command (``make bench``): step cost, OAR-P implementations,
scaling with length, and the learning summary of a comparison::

    python -m benchmarks.run_all                   # the full set
    python -m benchmarks.run_all --quick           # small sizes: checks that everything runs
    python -m benchmarks.run_all --device cuda     # the GPU column

Each benchmark writes its JSON to ``--out``; ``summary.md`` there collects every table with
its command, machine and load, for benchmarks/RESULTS.md. The learning summary is
``compare.md``'s table (`oar_lite.report`) of the records in ``--compare-folder``, finished
or not; it is skipped when no comparison ran (``python -m oar_lite compare``), never trained.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from benchmarks import common

QUICK = {
    "step_cost": ["--model", "toy", "--prompts", "2", "--group-size", "4", "--warmup", "0", "--repeats", "1"],
    "oar_p_implementations": ["--model", "toy", "--sequences", "1", "--warmup", "0", "--repeats", "1"],
    "scaling": ["--lengths", "64", "128", "--warmup", "0", "--repeats", "1"],
}


def learning(folder: Path, out: Path) -> dict | None:
    """The summary of the comparison in ``folder`` (`oar_lite.report.summarize`, at the target and
    with the settings of its ``compare.json`` when it has one), written to ``out`` as JSON;
    None when the folder holds no records."""
    from oar_lite import compare, report

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
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes (checks that everything runs)")
    ap.add_argument("--only", nargs="+", default=["step_cost", "oar_p_implementations", "scaling", "learning"],
                    choices=["step_cost", "oar_p_implementations", "scaling", "learning"])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--compare-folder", type=Path, default=Path("results/default"),
                    help="output folder of `python -m oar_lite compare` for the learning summary")
    ap.add_argument("--out", type=Path, default=common.DEFAULT_OUT)
    args = ap.parse_args(argv)

    from benchmarks import oar_p_implementations, scaling, step_cost

    modules = {"step_cost": step_cost, "oar_p_implementations": oar_p_implementations, "scaling": scaling}
    suffix = "_quick" if args.quick else ""
    if args.device != "cpu":
        suffix += "_" + args.device.replace(":", "")
    sections = []
    for name in args.only:
        start = time.perf_counter()
        if name == "learning":
            report = learning(args.compare_folder, args.out / f"learning{suffix}.json")
            if report is None:
                print(f"learning: no comparison in {args.compare_folder}; run `python -m oar_lite compare` first")
                continue
        else:
            extra = ["--out", str(args.out / f"{name}{suffix}.json")]
            if name == "scaling":
                extra += ["--plot", str(args.out / f"scaling{suffix}.png") if suffix else
                          str(Path(__file__).resolve().parent / "scaling.png")]
            report = modules[name].main((QUICK[name] if args.quick else []) + extra + [
                "--threads", str(args.threads), "--device", args.device])
        machine = report.get("machine")
        where = f"Machine: {common.machine_line(machine)}.\n\n" if machine else ""
        command = f"Command: `{report.get('command', '')}` ({time.perf_counter() - start:.0f} s).\n\n"
        sections.append(f"## {name}\n\n{command}{where}{report['markdown']}")
    path = args.out / f"summary{suffix}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(sections))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
