"""What a comparison's records say (`oar_lite.lab.compare` writes them): records by method and
seed, steps to a target (`steps_to_target`, the one rule), statistics over seeds, markdown
tables (`markdown_table`, which the benchmarks use too) and the verdict in words. The
figure is `oar_lite.lab.plots.save_figure`.
"""
from __future__ import annotations

import statistics
import textwrap
from collections import defaultdict
from typing import Iterable, Sequence

from ..attribution import CreditConfig, display_name
from ..settings import settings_of
from ..train import PHASES
from . import stats


# ----------------------------------------------------------------------------- records and statistics

def by_method_and_seed(records: Iterable[dict], kind: str = "eval") -> dict[str, dict[int, list[dict]]]:
    """Group records of one ``type`` as ``{method: {seed: [records sorted by step]}}``."""
    out: dict[str, dict[int, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for r in records:
        if r.get("type") == kind:
            out[r["method"]][r["seed"]].append(r)
    return {m: {s: sorted(rs, key=lambda r: r["step"]) for s, rs in seeds.items()} for m, seeds in out.items()}


def first_reaching(evals: Sequence[dict], target: float) -> dict | None:
    """The first eval record by step (step 0 included) with ``eval_accuracy >= target``, else None."""
    return next((r for r in sorted(evals, key=lambda r: r["step"]) if r["eval_accuracy"] >= target), None)


def steps_to_target(evals: Sequence[dict], target: float) -> tuple[float, bool]:
    """``(step, reached)``: the first evaluated step (step 0 included) whose held-out accuracy
    reaches ``target``; a run that never does is censored at its last evaluated step + its
    evaluation interval, ``(that step, False)``: a lower bound, so a comparison of means is
    conservative for whoever reaches it. The one steps-to-target rule of every table."""
    evals = sorted(evals, key=lambda r: r["step"])
    first = first_reaching(evals, target)
    if first is not None:
        return float(first["step"]), True
    every = evals[-1]["step"] - evals[-2]["step"] if len(evals) > 1 else 1
    return float(evals[-1]["step"] + every), False


def _median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def phase_times(runs: Iterable[Sequence[dict]]) -> dict[str, float]:
    """Median wall seconds per step of each phase over the train records of several runs."""
    return {p: _median([r[f"time_{p}"] for rs in runs for r in rs]) or 0.0 for p in PHASES}


def method_order(methods: Sequence[str] | None, available: Iterable[str]) -> list[str]:
    """``methods`` if given, else every ``available`` method sorted with GRPO (``"uniform"``) first."""
    return list(methods) if methods else sorted(available, key=lambda m: (m != "uniform", m))


def summarize(records: Sequence[dict], *, target: float, methods: Sequence[str] | None = None) -> dict:
    """Per method, over seeds: held-out accuracy at the start and at the end (mean, std,
    min, max), the best, steps and training wall time to first reach ``target``, the
    median seconds per step in each phase, and per-seed differences to GRPO (``"uniform"``):
    ``{"target": target, "methods": {method: {...}}}``, plain floats, JSON-ready.

    Steps to target follow `steps_to_target`'s rule (that of `oar_lite.lab.regime`): a run that
    never reaches the target is censored at its last evaluated step + one evaluation interval,
    a lower bound, and counted in the mean, never left out of it (``target_reached`` says which
    were); its time to target is censored at its last evaluation's training wall time."""
    evals = by_method_and_seed(records, "eval")
    trains = by_method_and_seed(records, "train")
    order = method_order(methods, evals)
    result = {}
    for method in (m for m in order if m in evals):
        runs = evals[method]
        seeds = sorted(runs)
        accs = {s: [r["eval_accuracy"] for r in runs[s]] for s in seeds}
        finals = [accs[s][-1] for s in seeds]
        targets = [steps_to_target(runs[s], target) for s in seeds]
        firsts = [first_reaching(runs[s], target) for s in seeds]
        steps = [rs for s, rs in trains.get(method, {}).items() if s in runs]
        phase = phase_times(steps)
        curves = [statistics.mean(accs[s][1:] or accs[s][:1]) for s in seeds]
        result[method] = {
            "seeds": seeds,
            "start_accuracy": statistics.mean(a[0] for a in accs.values()),
            "final_accuracy": statistics.mean(finals),
            "final_accuracy_std": statistics.pstdev(finals) if len(finals) > 1 else 0.0,
            "final_accuracy_min": min(finals),
            "final_accuracy_max": max(finals),
            "final_accuracies": finals,
            "best_accuracy": statistics.mean(max(a) for a in accs.values()),
            # Mean held-out accuracy over the evaluations after step 0: the area under the curve,
            # less sensitive to one noisy evaluation than a first crossing of the target.
            "curve_accuracy": statistics.mean(curves),
            "curve_accuracies": curves,
            "reached": sum(reached for _, reached in targets),
            "target_reached": [reached for _, reached in targets],
            "steps_to_target": [step for step, _ in targets],
            "time_to_target": [(f or runs[s][-1])["wall_time"] for f, s in zip(firsts, seeds)],
            "final_step": max(runs[s][-1]["step"] for s in seeds),
            "train_reward_last5": statistics.mean(r["reward_mean"] for rs in steps for r in rs[-5:]) if steps else None,
            "weight_std": _median([r["weight_std"] for rs in steps for r in rs]),
            "time_per_step": sum(phase.values()),
            "time_per_phase": phase,
            # Within one run the phases share the machine's load, so this ratio survives a busy
            # machine better than comparing runs trained at different times.
            "attribution_overhead": sum(phase.values()) / max(sum(phase.values()) - phase["attribute"], 1e-9),
            "cpu_per_step": _median([sum(r[f"cpu_{p}"] for p in PHASES) for rs in steps for r in rs if "cpu_update" in r]),
        }
    grpo = result.get("uniform", {})
    for m in result.values():
        m["step_cost_vs_grpo"] = m["time_per_step"] / grpo["time_per_step"] if grpo.get("time_per_step") else None
        m["cpu_cost_vs_grpo"] = (m["cpu_per_step"] / grpo["cpu_per_step"]
                                 if grpo.get("cpu_per_step") and m["cpu_per_step"] else None)
        # Paired by seed: the same seed gives every method the same prompts and sampling seeds,
        # so per-seed differences are less noisy than differences of means.
        if grpo:
            for key, values in (("paired_diff_vs_grpo", "final_accuracies"), ("paired_curve_diff_vs_grpo", "curve_accuracies")):
                base = dict(zip(grpo["seeds"], grpo[values]))
                m[key] = [a - base[s] for s, a in zip(m["seeds"], m[values]) if s in base]
    return {"target": target, "methods": result}


# ----------------------------------------------------------------------------- tables and words

def markdown_table(header: Sequence[str], rows: Iterable[Sequence]) -> list[str]:
    """The lines of a markdown table; a None cell shows as ``-``."""
    line = lambda cells: "| " + " | ".join("-" if c is None else str(c) for c in cells) + " |"
    return [line(header), "|" + "---|" * len(header), *(line(r) for r in rows)]


def _fmt_target(values: list, reached: list, fmt: str) -> str:
    """The mean over every seed, censored runs included, marked ``>=`` when any was censored
    (then the mean is a lower bound), with how many seeds reached the target."""
    mean = fmt.format(statistics.mean(values))
    return f"{'' if all(reached) else '>= '}{mean} ({sum(reached)}/{len(reached)} reached)"


def _settings_lines(s: dict) -> list[str]:
    """The settings and the machine, in words; every credit setting (`CreditConfig`'s, by its label)."""
    lo, hi = s.get("digits") or (None, None)
    digits = "" if lo is None else f"{lo}-digit problems, " if lo == hi else f"{lo}-{hi}-digit problems, "
    credit = "".join(f", {declared.label or name} {s[name]}" for name, declared in settings_of(CreditConfig).items()
                     if name != "method" and name in s)
    elapsed = f"total {s.get('elapsed_s', 0) / 60:.1f} min"
    if s.get("read_back"):
        elapsed += (f" ({s['read_back']} of {s.get('runs')} runs read back from an earlier invocation, "
                    "so this is not the training time)")
    return [f"Settings: {s.get('steps')} steps x {s.get('prompts_per_step')} prompts x {s.get('group_size')} completions, "
            f"{digits}learning rate {s.get('learning_rate')}{credit}, seeds {s.get('seeds')}, held-out problems "
            f"{s.get('eval_size') or 'all'} (greedy, every {s.get('eval_every')} steps), model {s.get('model_dir')}.",
            f"Machine: {s.get('machine')}; {s.get('jobs')} run(s) at a time, {s.get('threads')} torch thread(s) each; "
            f"{elapsed}.", ""]


def render_markdown(summary: dict) -> str:
    """``compare.md``: the settings, one table row per method, and what happened in words."""
    methods = summary["methods"]
    lines = ["# GRPO vs OAR on the toy task", ""]
    if summary.get("command"):
        lines += [f"Command: `{summary['command']}`", ""]
    if summary.get("settings"):
        lines += _settings_lines(summary["settings"])
    rows = []
    for method, m in methods.items():
        diffs, cdiffs = m.get("paired_diff_vs_grpo") or [], m.get("paired_curve_diff_vs_grpo") or []
        paired = "-" if method == "uniform" or not diffs else (
            f"{statistics.mean(diffs):+.3f} ± {statistics.pstdev(diffs):.3f}" if len(diffs) > 1 else f"{diffs[0]:+.3f}")
        curve = f"{m['curve_accuracy']:.3f}" + ("" if method == "uniform" or not cdiffs else f" ({statistics.mean(cdiffs):+.3f})")
        rows.append([display_name(method), f"{m['start_accuracy']:.3f}",
                     f"{m['final_accuracy']:.3f} ± {m['final_accuracy_std']:.3f}",
                     f"{m['final_accuracy_min']:.3f}-{m['final_accuracy_max']:.3f}", paired, curve,
                     f"{m['best_accuracy']:.3f}", _fmt_target(m["steps_to_target"], m["target_reached"], "{:.1f}"),
                     _fmt_target(m["time_to_target"], m["target_reached"], "{:.0f}")])
    lines += [
        f"Target: held-out accuracy >= {summary['target']:g} (greedy). Steps and time to target: mean over all seeds; "
        "a seed that never reached it is censored at its last evaluation + one interval (steps) or its last evaluation "
        "(time), so a mean marked >= is a lower bound; one noisy evaluation can cross the target. \"mean acc. over run\": "
        "held-out accuracy averaged over the evaluations after step 0. \"- GRPO\": minus GRPO's on the same "
        "seed (same prompts), averaged over seeds.", "",
        *markdown_table(["method", "start acc.", "final acc. (mean ± std)", "min-max", "final - GRPO",
                         "mean acc. over run (- GRPO)", "best", "steps to target", "time to target (s)"], rows), "",
        "Time per step (training only, evaluation excluded; medians over all steps and seeds). Wall seconds "
        "compare badly across runs on a shared machine (each run meets different neighbours); CPU seconds "
        "(one torch thread per run) measure the work. \"step / (step - attribute)\" is the attribution "
        "overhead inside each method's own runs.", ""]
    ratio = lambda x: f"{x:.2f}x" if x else None
    lines += markdown_table(
        ["method", "wall s/step", *PHASES, "wall vs GRPO", "CPU s/step", "CPU vs GRPO", "step / (step - attribute)"],
        [[display_name(method), f"{m['time_per_step']:.2f}", *(f"{m['time_per_phase'][p]:.2f}" for p in PHASES),
          ratio(m.get("step_cost_vs_grpo")), f"{m['cpu_per_step']:.2f}" if m.get("cpu_per_step") else None,
          ratio(m.get("cpu_cost_vs_grpo")), ratio(m["attribution_overhead"])] for method, m in methods.items()])
    return "\n".join([*lines, "", *verdict(summary), ""])


def terminal_summary(summary: dict, width: int = 80) -> str:
    """What ``demo`` prints: one narrow table (accuracy, paired gap, pace, CPU cost) and the
    verdict wrapped to ``width`` columns; ``compare.md`` (`render_markdown`) has the full tables."""
    methods, rows = summary["methods"], []
    for method, m in methods.items():
        diffs = m.get("paired_diff_vs_grpo") or []
        cost = m.get("cpu_cost_vs_grpo")
        rows.append([display_name(method), f"{m['final_accuracy']:.3f} ± {m['final_accuracy_std']:.3f}",
                     "-" if method == "uniform" or not diffs else f"{statistics.mean(diffs):+.3f}",
                     _fmt_target(m["steps_to_target"], m["target_reached"], "{:.1f}"), f"{cost:.2f}x" if cost else "-"])
    table = markdown_table(["method", "final acc.", "- GRPO", f"steps to {summary['target']:g}", "CPU vs GRPO"], rows)
    prose = [textwrap.fill(line, width, subsequent_indent="  ") for line in verdict(summary)]
    return "\n".join([*table, "", *prose])


def verdict(summary: dict) -> list[str]:
    """What happened, in sentences, from the numbers (whichever method wins): each method's
    final accuracy against GRPO's by the project's one rule (`oar_lite.lab.stats.versus` on the
    95% interval of the per-seed differences), a screen below `stats.SCREEN_SEEDS` seeds."""
    methods = summary["methods"]
    base = methods.get("uniform")
    out = []
    for method, m in methods.items():
        if method == "uniform" or base is None:
            continue
        diff = m["final_accuracy"] - base["final_accuracy"]
        diffs = m.get("paired_diff_vs_grpo") or [diff]
        interval = stats.paired_interval(diffs) if len(diffs) > 1 else None
        reading = stats.versus(interval, seeds=len(diffs))
        if reading == stats.ONE_SEED:
            word = "one seed, too few to tell it from GRPO"
        else:
            word = (f"95% interval {interval[0]:+.3f} to {interval[1]:+.3f} over {len(diffs)} paired seeds: "
                    f"{VERSUS_WORDS[reading]} GRPO"
                    + (f"; a screen, under {stats.SCREEN_SEEDS} seeds" if stats.is_screen(len(diffs)) else ""))
        pace = (f"steps to the target {_fmt_target(m['steps_to_target'], m['target_reached'], '{:.1f}')} "
                f"against {_fmt_target(base['steps_to_target'], base['target_reached'], '{:.1f}')} for GRPO")
        if not (all(m["target_reached"]) and all(base["target_reached"])):
            pace += " (a seed that never reached it counts as its last evaluation + one interval: >= marks a lower bound)"
        cost = (f", at {m['cpu_cost_vs_grpo']:.2f}x GRPO's CPU time per step" if m.get("cpu_cost_vs_grpo") else
                f", at {m['step_cost_vs_grpo']:.2f}x GRPO's wall time per step" if m.get("step_cost_vs_grpo") else "")
        out.append(f"- {display_name(method)}: final accuracy {m['final_accuracy']:.3f} vs GRPO {base['final_accuracy']:.3f} "
                   f"({diff:+.3f}, {word}); {pace}{cost}.")
    return out


VERSUS_WORDS = {stats.ABOVE: "higher than", stats.BELOW: "lower than", stats.INCLUDES: "not distinguishable from"}
"""`oar_lite.lab.stats.versus`'s outcomes for a difference in accuracy, in words."""
