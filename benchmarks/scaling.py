"""Scaling with completion length: OAR-P and OAR-G time, peak memory and tokens processed.

Synthetic sequences (`benchmarks.common.synthetic_sequence`): a 32-token random prompt,
then exactly L completion tokens (random reasoning, the marker, the answer): the cost of
attribution depends on the lengths, not the text. OAR-P runs in mode ``last`` at the
device's token budget with prefix reuse, OAR-G in ``answer_mean`` (one forward, one
backward), interleaved at each length. Expected: OAR-G about linear in L; OAR-P about
R * T / 2 tokens, so roughly quadratic.

Run (offline, from the repository root)::

    .venv/bin/python -m benchmarks.scaling                                   # SmolLM2, 64..1024
    .venv/bin/python -m benchmarks.scaling --lengths 1024 --oar-p-first-chunk  # peak of one chunk at L=1024
    .venv/bin/python -m benchmarks.scaling --device cuda --repeats 5 --long-repeats 3

Writes ``benchmarks/results/scaling.json`` and the plot ``benchmarks/scaling.png``.
"""
from __future__ import annotations

from pathlib import Path

import torch

from benchmarks import common
from oar_lite.lab import report as tables

LENGTHS = (64, 128, 256, 512, 1024)
MARKERS = {"smollm2": (" The answer is", " 42", "."), "toy": (" A=", "42", "</s>")}


def sequence(model_name: str, tokenizer, length: int, *, prompt_length: int = 32, device="cpu"):
    marker, answer, end = MARKERS[model_name]
    return common.synthetic_sequence(tokenizer, length, prompt_length=prompt_length, marker=marker, answer=answer,
                                     end=end, device=device)


def oar_p_pass_positions(path: str, reasoning: slice, end: int, *, token_budget: int,
                         batch_size: int | None) -> list[slice]:
    """The positions of each pass OAR-P plans for one sequence (mode ``last``, ``end`` =
    answer.start): `perturbation_scores_batch`'s planner on one row, which both paths now run
    (the per-row `perturbation_scores` is the batched scorer with B = 1; ``path`` is kept for
    the reports)."""
    from oar_lite.attribution import DEFAULT_MAX_WASTE, plan_passes

    per_pass = max(1, min(token_budget // end, batch_size or token_budget))
    columns = list(range(reasoning.start, reasoning.stop))
    return [slice(columns[lo], columns[hi - 1] + 1) for lo, hi in
            plan_passes(columns, end, per_pass=per_pass, max_waste=DEFAULT_MAX_WASTE, reuse_prefix=True)]


def measure_length(model, tokenizer, model_name: str, length: int, *, warmup: int, repeats: int, batch_size: int | None,
                   device, progress: bool, token_budget: int | None = None, first_chunk: bool = False,
                   oar_p_path: str = "per-row", oar_p_positions: str = "all") -> dict:
    from oar_lite.attribution import default_token_budget, gradient_scores, perturbation_scores, perturbation_scores_batch

    ids, reasoning, answer = sequence(model_name, tokenizer, length, device=device)
    budget = token_budget or default_token_budget(device)
    passes = oar_p_pass_positions(oar_p_path, reasoning, answer.start, token_budget=budget, batch_size=batch_size)
    chunks = [(s.start, s.stop) for s in passes]
    # The OAR-P call's positions: all of them, or those of its first (longest copies) or last
    # (longest cached prefix) pass; the memory of a pass depends on its copies and their lengths only.
    oar_p_positions = "first" if first_chunk else oar_p_positions
    widest = max(passes, key=lambda s: s.stop - s.start)  # the most copies, so the most tokens held (cache included)
    scored = {"all": reasoning, "first": passes[0], "last": passes[-1], "widest": widest}[oar_p_positions]
    stats: dict = {}
    generator = torch.Generator(device=device).manual_seed(0)
    # One pass's positions alone run as that one pass (no waste bound to split them again).
    waste = {} if oar_p_positions == "all" else {"max_waste": float("inf")}
    if oar_p_path == "per-row":
        def oar_p():
            return perturbation_scores(model, ids, scored, answer, mode="last", pad_token_id=tokenizer.pad_token_id,
                                       batch_size=batch_size, token_budget=budget, stats=stats, **waste)
    else:
        def oar_p():
            return perturbation_scores_batch(model, ids[None], torch.ones_like(ids)[None], [scored], [answer], mode="last",
                                             pad_token_id=tokenizer.pad_token_id, batch_size=batch_size,
                                             token_budget=budget, stats=stats, **waste)[0]
    calls = {
        "oar-p": oar_p,
        "oar-g": lambda: gradient_scores(model, ids, reasoning, answer, mode="answer_mean", generator=generator),
    }
    runs = common.timed_then_memory(calls, warmup=warmup, repeats=repeats, device=device, progress=progress)
    R = reasoning.stop - reasoning.start
    end = answer.start  # mode "last" reads x[:answer.start]
    bounds = common.token_bounds(ids.numel(), reasoning, end)
    out = {"length": length, "T": ids.numel(), "R": R, "repeats": repeats, "token_budget": budget,
           "oar_p_path": oar_p_path, "oar_p_positions": oar_p_positions, "oar_p_scored": scored.stop - scored.start,
           "oar_p_max_pass_held_tokens": stats.get("max_pass_held_tokens",
                                                   max(b - a for a, b in chunks) * answer.start),
           "oar_p_max_pass_tokens": stats["max_pass_tokens"], "oar_p_chunks": len(chunks),
           "oar_p_tokens": stats["forward_tokens"] if oar_p_positions == "all" else None,
           "oar_p_passes": stats["forward_passes"],
           "oar_p_planned_tokens": end + sum((b - a) * (end - a) for a, b in chunks),
           "naive_tokens": bounds["naive"], "half_RT": bounds["half_RT"], "ideal_tokens": bounds["ideal"],
           "loadavg": common.loadavg()}
    for k in calls:
        out[k] = {"time": common.spread(runs[k]["seconds"]),
                  "peak_mib": common.spread(runs[k]["peak_mib"]) if runs[k]["peak_mib"] else None}
        assert torch.isfinite(runs[k]["result"]).all(), f"{k} returned non-finite scores at length {length}"
    out["oar_p_over_oar_g"] = common.spread([p / g for p, g in zip(runs["oar-p"]["seconds"], runs["oar-g"]["seconds"])])
    return out


def profile(model, tokenizer, model_name: str, length: int, *, batch_size: int | None, device, rows: int = 12) -> dict:
    """torch.profiler tables (top ops by self time) of one OAR-P and one OAR-G call at ``length``."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    from oar_lite.attribution import gradient_scores, perturbation_scores

    ids, reasoning, answer = sequence(model_name, tokenizer, length, device=device)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    sort = "self_device_time_total" if device.type == "cuda" else "self_cpu_time_total"  # torch >= 2.4 names
    calls = {"oar-p": lambda: perturbation_scores(model, ids, reasoning, answer, mode="last",
                                                  pad_token_id=tokenizer.pad_token_id, batch_size=batch_size),
             "oar-g": lambda: gradient_scores(model, ids, reasoning, answer, mode="answer_mean")}
    tables = {}
    for k, fn in calls.items():
        with torch_profile(activities=activities) as prof:
            fn()
        tables[k] = prof.key_averages().table(sort_by=sort, row_limit=rows)
    return {"length": length, "tables": tables}


def plot(report: dict, path: Path) -> Path:
    from matplotlib.figure import Figure

    rows = report["lengths"]
    L = [r["length"] for r in rows]
    fig = Figure(figsize=(15, 4.2))
    axes = fig.subplots(1, 3)
    colors = {"oar-p": "tab:red", "oar-g": "tab:blue"}
    labels = {"oar-p": "OAR-P (last, batched, prefix reuse)", "oar-g": "OAR-G (answer_mean)"}
    for k in ("oar-p", "oar-g"):
        times = [r[k]["time"] for r in rows]
        axes[0].plot(L, [t["median"] for t in times], "o-", color=colors[k], label=labels[k])
        axes[0].fill_between(L, [t["min"] for t in times], [t["max"] for t in times], color=colors[k], alpha=0.2)
        if all(r[k]["peak_mib"] for r in rows):
            axes[1].plot(L, [r[k]["peak_mib"]["median"] for r in rows], "o-", color=colors[k], label=labels[k])
    # Guides: slopes 1 and 2 through the first OAR-G and OAR-P points.
    for k, slope, style in (("oar-g", 1, ":"), ("oar-p", 2, "--")):
        t0 = rows[0][k]["time"]["median"]
        axes[0].plot(L, [t0 * (x / L[0]) ** slope for x in L], style, color="gray", lw=1,
                     label=f"~ L^{slope} from the first {k.upper()} point")
    axes[2].plot(L, [r["oar_p_tokens"] or r["oar_p_planned_tokens"] for r in rows], "o-", color="tab:red",
                 label="OAR-P tokens (measured, or planned where only the first chunk ran)")
    axes[2].plot(L, [r["ideal_tokens"] for r in rows], "-.", color="tab:green", label="ideal prefix reuse")
    axes[2].plot(L, [r["half_RT"] for r in rows], "--", color="gray", label="R*T/2")
    axes[2].plot(L, [r["naive_tokens"] for r in rows], ":", color="black", label="naive (R+1)*T")
    for ax, title, ylabel in ((axes[0], "time per completion", "seconds"),
                              (axes[1], "peak memory above the model", "MiB"),
                              (axes[2], "tokens through the model (OAR-P)", "tokens")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(L, [str(x) for x in L])
        ax.set_xlabel("completion length L (tokens)")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize="small")
    m = report["machine"]
    fig.suptitle(f"{report['model']} on {m.get('gpu') or m['cpu']}, {m['torch_threads']} thread(s); "
                 f"band = min-max over repeats", fontsize="medium")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    return path


def render(report: dict) -> str:
    rows = []
    for r in report["lengths"]:
        tokens = r["oar_p_tokens"] or r["oar_p_planned_tokens"]
        rows.append([r["length"], r["T"], r["R"], r["repeats"],
                     f"{r['oar_p_scored']} of {r['R']} ({r.get('oar_p_path', 'per-row')}, {r['oar_p_positions']})",
                     common.fmt(r["oar-p"]["time"], ""), common.fmt(r["oar-g"]["time"], "", 3),
                     f"{r['oar_p_over_oar_g']['median']:.1f}x", common.fmt(r["oar-p"]["peak_mib"], "", 0, "n/a"),
                     common.fmt(r["oar-g"]["peak_mib"], "", 0, "n/a"), r["oar_p_max_pass_tokens"],
                     f"{tokens}{'' if r['oar_p_tokens'] else '*'}", f"{tokens / r['ideal_tokens']:.3f}",
                     f"{tokens / r['naive_tokens']:.2f}", r["loadavg"] and r["loadavg"][0]])
    return "\n".join([
        f"{report['model']}, OAR-P batch_size {report['batch_size']}, warm-up {report['warmup']} "
        "(median [min-max] over the repeats listed; tokens marked * are the planner's count, the run "
        "scored only one pass's positions):", "",
        *tables.markdown_table(["L", "T", "R", "repeats", "OAR-P positions run", "OAR-P (s)", "OAR-G (s)", "OAR-P / OAR-G",
                                "OAR-P peak MiB", "OAR-G peak MiB", "OAR-P largest pass (tokens)", "OAR-P tokens",
                                "/ ideal", "/ naive", "load (1 min)"], rows)]) + "\n"


def main(argv=None) -> dict:
    ap = common.parser(__doc__, "scaling.json")
    ap.add_argument("--model", default="smollm2", choices=sorted(MARKERS))
    ap.add_argument("--lengths", nargs="+", type=int, default=list(LENGTHS))
    ap.add_argument("--long", type=int, default=512, help="from this length on, use --long-repeats")
    ap.add_argument("--long-repeats", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=None, help="OAR-P's row cap per pass (default: none)")
    ap.add_argument("--token-budget", type=int, default=None, help="OAR-P's tokens per pass (default: by device)")
    ap.add_argument("--oar-p-first-chunk", action="store_true",
                    help="OAR-P on its first (widest) chunk's positions only: the peak memory of a full run")
    ap.add_argument("--oar-p-path", choices=["per-row", "batched"], default="per-row",
                    help="perturbation_scores (one row) or perturbation_scores_batch (training's path, here one row)")
    ap.add_argument("--oar-p-positions", choices=["all", "first", "last", "widest"], default="all",
                    help="OAR-P on the positions of one pass only: its first (longest copies), last (longest cached "
                         "prefix) or widest (most copies): the peak memory of a full run without its CPU hours")
    ap.add_argument("--plot", type=Path, default=Path(__file__).resolve().parent / "scaling.png")
    ap.add_argument("--profile", type=int, default=None, metavar="L",
                    help="also profile one OAR-P and one OAR-G call at length L (torch.profiler top ops)")
    args = ap.parse_args(argv)
    device, report = common.start(args, "scaling", argv, model=args.model, batch_size=args.batch_size,
                                  oar_p_first_chunk=args.oar_p_first_chunk, lengths=[])
    model, tok = common.load(args.model, device)
    for i, L in enumerate(sorted(args.lengths)):
        repeats = args.long_repeats if L >= args.long else args.repeats
        row = measure_length(model, tok, args.model, L, warmup=args.warmup if i == 0 else 0, repeats=repeats,
                             batch_size=args.batch_size, device=device, progress=not args.no_progress,
                             token_budget=args.token_budget, first_chunk=args.oar_p_first_chunk,
                             oar_p_path=args.oar_p_path, oar_p_positions=args.oar_p_positions)
        report["lengths"].append(row)
        print(f"L={L}: OAR-P {row['oar-p']['time']['median']:.2f}s, OAR-G {row['oar-g']['time']['median']:.3f}s, "
              f"load {row['loadavg']}", flush=True)
        common.write_json(report, args.out)  # partial results survive an interrupted long run
    if args.profile:
        report["profile"] = profile(model, tok, args.model, args.profile, batch_size=args.batch_size, device=device)
        for k, table in report["profile"]["tables"].items():
            print(f"torch.profiler, {k} at L={args.profile}:\n{table}")
    plot(report, args.plot)
    return common.finish(report, args.out, render)


if __name__ == "__main__":
    main()
