"""Matplotlib pictures of training runs, drawn on an axis you give, so notebooks and
``python -m oar_lite.lab compare`` draw the same: learning curves over seeds and time per phase
from `oar_lite.train`'s metric records, TRL log histories, the Monte-Carlo ground truth, and
``compare.png`` (`save_figure`).
"""
from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np

from .findings.positive import RELEVANT
from .ground_truth import PIVOT_THRESHOLD, probability_jumps
from ..attribution import display_name
from .report import by_method_and_seed, method_order, phase_times
from ..train import PHASES

METHOD_COLORS = {"uniform": "#555555", "oar-g": "#1f77b4", "oar-p": "#d62728", "entropy": "#2ca02c", "random": "#9467bd"}
PHASE_COLORS = {"generate": "#8da0cb", "reward": "#a6d854", "attribute": "#fc8d62", "update": "#66c2a5"}


def method_color(method: str, index: int = 0) -> str:
    """A stable colour per method (the ``tab10`` cycle for methods without one)."""
    import matplotlib.pyplot as plt

    base = method.partition(":")[0]
    return METHOD_COLORS.get(method, METHOD_COLORS.get(base, plt.get_cmap("tab10")(index % 10)))


def _moving_average(window: int, x: np.ndarray, *ys: np.ndarray) -> tuple[np.ndarray, ...]:
    """``x`` and each ``y`` averaged over ``window`` points (x cut to match), unchanged when too short."""
    if window <= 1 or len(x) < window:
        return (x, *ys)
    kernel = np.ones(window) / window
    return (x[window - 1:], *(np.convolve(y, kernel, mode="valid") for y in ys))


def seed_band(runs: Sequence[Sequence[dict]], x: str, y: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Mean curve and min/max band over seeds: runs aligned by position (the same schedule),
    cut to the shortest, ``x`` averaged too (wall time differs by seed).

    Returns:
        ``(x_mean [K], y_mean [K], y_low [K], y_high [K])``.
    """
    if not runs:
        raise ValueError("no runs to draw")
    k = min(len(r) for r in runs)
    xs = np.array([[r[i][x] for i in range(k)] for r in runs], dtype=float)
    ys = np.array([[np.nan if r[i][y] is None else r[i][y] for i in range(k)] for r in runs], dtype=float)
    return xs.mean(0), np.nanmean(ys, 0), np.nanmin(ys, 0), np.nanmax(ys, 0)


def plot_curves(ax, records: Iterable[dict], *, x: str = "step", y: str = "eval_accuracy", kind: str = "eval",
                methods: Sequence[str] | None = None, target: float | None = None, smooth: int = 1):
    """One line per method (mean over seeds) with a min-max band over seeds.

    Args:
        records: metric records of several runs.
        x, y: record fields (``"step"`` or ``"wall_time"``; ``"eval_accuracy"``, ...).
        kind: ``"eval"`` or ``"train"`` records.
        methods: which methods, in this order (default: all, uniform first).
        target: draw a dotted horizontal line at this value.
        smooth: moving-average window (1: none), for noisy train metrics.
    """
    grouped = by_method_and_seed(records, kind)
    for i, method in enumerate(method_order(methods, grouped)):
        if method not in grouped:
            continue
        runs = list(grouped[method].values())
        xm, ym, lo, hi = _moving_average(smooth, *seed_band(runs, x, y))
        color = method_color(method, i)
        label = f"{display_name(method)} ({len(runs)} seed{'s' if len(runs) != 1 else ''})"
        ax.plot(xm, ym, color=color, label=label, lw=2, marker="o" if kind == "eval" else None, ms=3)
        if len(runs) > 1:
            ax.fill_between(xm, lo, hi, color=color, alpha=0.18, lw=0)
    if target is not None:
        ax.axhline(target, color="black", ls=":", lw=1, label=f"target {target:g}")
    ax.set_xlabel({"step": "step", "wall_time": "training wall time (s)"}.get(x, x))
    ax.set_ylabel({"eval_accuracy": "held-out accuracy (greedy)", "reward_mean": "train reward"}.get(y, y))
    ax.grid(alpha=0.3)
    return ax


def plot_phase_times(ax, phase_times: dict[str, dict[str, float]], *, methods: Sequence[str] | None = None):
    """Stacked horizontal bars, one per method, of ``phase_times``: ``{method: {phase:
    seconds per step}}`` for the phases of `oar_lite.train.PHASES`."""
    order = [m for m in method_order(methods, phase_times) if m in phase_times]
    left = np.zeros(len(order))
    for phase in PHASES:
        values = np.array([phase_times[m].get(phase, 0.0) for m in order])
        ax.barh(range(len(order)), values, left=left, color=PHASE_COLORS[phase], label=phase)
        left += values
    ax.set_yticks(range(len(order)), [display_name(m) for m in order])
    ax.invert_yaxis()
    ax.set_xlabel("seconds per step (median)")
    ax.legend(loc="lower right", fontsize="small")
    ax.grid(axis="x", alpha=0.3)
    return ax


def log_history_series(log_history: Iterable[dict], key: str, *, x: str = "step") -> tuple[np.ndarray, np.ndarray]:
    """One metric of a TRL ``trainer.state.log_history`` as ``(x [K], values [K])`` in logging
    order, skipping entries without it or with None/NaN; ValueError naming the logged keys
    when no entry has it."""
    log_history = list(log_history)
    rows = [h for h in log_history if h.get(key) is not None and h.get(x) is not None]
    rows = [h for h in rows if not (isinstance(h[key], float) and np.isnan(h[key]))]
    if not rows:
        seen = sorted({k for h in log_history for k in h})
        raise ValueError(f"no log entry has {key!r} (and {x!r}); logged keys are {seen}")
    return np.array([h[x] for h in rows], dtype=float), np.array([h[key] for h in rows], dtype=float)


def plot_log_history(ax, log_history: Iterable[dict], keys: str | Sequence[str], *, x: str = "step",
                     labels: Sequence[str] | None = None, smooth: int = 1):
    """Metrics of a TRL run (``trainer.state.log_history``) against ``x``, one line per key
    (e.g. ``"reward"``), labelled ``labels`` (default: the keys), smoothed over ``smooth``
    points (1: none)."""
    keys = [keys] if isinstance(keys, str) else list(keys)
    if not keys:
        raise ValueError("keys is empty; expected one or more logged metric names")
    if labels is not None and len(labels) != len(keys):
        raise ValueError(f"expected one label per key ({len(keys)}), got {len(labels)}")
    if smooth < 1:
        raise ValueError(f"smooth must be >= 1, got {smooth}")
    log_history = list(log_history)
    for i, key in enumerate(keys):
        xs, ys = _moving_average(smooth, *log_history_series(log_history, key, x=x))
        ax.plot(xs, ys, marker="o" if len(xs) <= 30 else None, ms=3, lw=2, label=labels[i] if labels else key)
    ax.set_xlabel(x)
    if len(keys) == 1:
        ax.set_ylabel(labels[0] if labels else keys[0])
    else:
        ax.legend(fontsize="small")
    ax.grid(alpha=0.3)
    return ax


def plot_ground_truth(axes, completion: dict, *, methods: Sequence[str] = ("oar-p:answer_mean", "oar-g:answer_mean"),
                      threshold: float | None = None, title: str | None = None):
    """One completion of the Monte-Carlo ground truth (`oar_lite.lab.ground_truth.load_ground_truth`).

    On ``axes = (top, bottom)`` sharing x: P(correct | prefix) after each reasoning token with
    its 95% Wilson band, pivotal tokens (``|delta P| >= threshold``, default
    `oar_lite.lab.ground_truth.PIVOT_THRESHOLD`) shaded; below, each of ``methods``' scores in
    ``completion["scores"]`` over its maximum, as grouped bars.
    """
    threshold = PIVOT_THRESHOLD if threshold is None else threshold
    top, bottom = axes
    p = np.asarray(completion["p"], dtype=float)
    R = len(p) - 1
    low = np.asarray(completion.get("wilson_low", p), dtype=float)
    high = np.asarray(completion.get("wilson_high", p), dtype=float)
    x = np.arange(-1, R)  # p[t] is the value after token t - 1; -1 is the prompt alone
    top.step(x, p, where="post", color="black", label="P(correct | prefix)")
    top.fill_between(x, low, high, step="post", color="black", alpha=0.15, label="95% Wilson interval")
    delta, _ = probability_jumps(completion)
    for t in np.flatnonzero(np.abs(delta.numpy()) >= threshold - 1e-9):
        for ax in axes:
            ax.axvspan(t - 0.5, t + 0.5, color="#ffbf00", alpha=0.3, lw=0)
    top.set_ylim(-0.02, 1.02)
    top.set_ylabel("P(correct)")
    top.legend(loc="best", fontsize=8)
    if title:
        top.set_title(title, fontsize=9)
    width = 0.8 / max(len(methods), 1)
    colors = [method_color(m, j) for j, m in enumerate(methods)]
    if len(set(colors)) < len(colors):  # two modes of one method: tell them apart
        import matplotlib.pyplot as plt

        colors = [plt.get_cmap("tab10")(j) for j in range(len(methods))]
    for j, m in enumerate(methods):
        s = np.asarray(completion["scores"][m], dtype=float)
        s = s / s.max() if s.max() > 0 else s
        bottom.bar(np.arange(R) + (j - (len(methods) - 1) / 2) * width, s, width=width, label=display_name(m),
                   color=colors[j])
    bottom.set_ylabel("score / max")
    bottom.legend(loc="best", fontsize=8)
    tokens = completion.get("tokens", [""] * R)[:R]
    bottom.set_xticks(np.arange(R))
    bottom.set_xticklabels([repr(t)[1:-1] for t in tokens], rotation=90, fontsize=7)
    bottom.set_xlim(-1.5, R - 0.5)
    bottom.set_xlabel("reasoning token (shaded: pivotal)")
    return axes


def save_figure(records: Sequence[dict], path, *, target: float | None = None, methods: Sequence[str] | None = None):
    """``compare.png``: held-out accuracy against steps and against training wall time, and
    time per step by phase. When the records carry CPU time (one torch thread per run), a
    third curve panel shows accuracy against CPU time, which a busy machine does not skew."""
    # A bare Figure draws to a file without pyplot: no backend switch, nothing left open in
    # a notebook that calls this (matplotlib.use("Agg") there would stop inline plots).
    from matplotlib.figure import Figure

    fig = Figure(figsize=(12, 8.5))
    axes = fig.subplots(2, 2).ravel()
    panels = [("step", "held-out accuracy by step"), ("wall_time", "held-out accuracy by training wall time")]
    if all("cpu_time" in r for r in records if r.get("type") in ("train", "eval")):
        panels.append(("cpu_time", "held-out accuracy by training CPU time"))
    else:
        axes[2].axis("off")
    for ax, (x, title) in zip(axes, panels):
        plot_curves(ax, records, x=x, methods=methods, target=target)
        ax.set_title(title)
    if len(panels) == 3:
        axes[2].set_xlabel("training CPU time (s)")
    trains = by_method_and_seed(records, "train")
    plot_phase_times(axes[3], {m: phase_times(trains.get(m, {}).values()) for m in by_method_and_seed(records, "eval")},
                     methods=methods)
    axes[3].set_title("wall time per step, by phase")
    axes[0].legend(loc="lower right", fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return path


def plot_positive_control(axes, sweep: Sequence[dict], *, confirm: dict | None = None, bar: float = 1.5):
    """The positive control's sweep (`oar_lite.lab.findings.positive.sweep`), against the share of
    the gradient's variance carried by reward-irrelevant tokens: the oracle's speed-up in
    steps to the target (left, the project's bar dashed) and the mean held-out accuracy over
    the run minus GRPO's, for the oracle and its inverted and shuffled controls (right).
    Error bars are the 95% intervals of both axes; each point is labelled with its k. With
    ``confirm`` (`findings.positive.findings`'s ``"confirm"``), the confirmatory run's oracle is
    drawn as a star at its world's share."""
    share = np.array([r["share"] for r in sweep])
    share_err = np.array([[r["share"] - r["share_ci"][0], r["share_ci"][1] - r["share"]] for r in sweep]).T

    def errorbar(ax, ys, lows, highs, offset=0.0, **kw):
        ys = np.asarray(ys, dtype=float)
        yerr = np.array([ys - np.asarray(lows), np.asarray(highs) - ys])
        ax.errorbar(share + offset, ys, xerr=share_err, yerr=yerr, fmt="o", capsize=3, **kw)

    left, right = axes
    errorbar(left, [r["speedup"] for r in sweep], [r["speedup_ci"][0] for r in sweep],
             [r["speedup_ci"][1] for r in sweep], color=method_color("oracle"), label="oracle")
    for r in sweep:
        left.annotate(f"k={r['k']}", (r["share"], r["speedup"]), textcoords="offset points", xytext=(6, 6), fontsize=8)
    left.axhline(1.0, color="gray", lw=0.8)
    left.axhline(bar, color="gray", lw=0.8, ls="--", label=f"the bar ({bar:g}x)")
    left.set_xlabel("irrelevant tokens' share of the gradient variance")
    left.set_ylabel("speed-up in steps to the target vs GRPO")
    left.legend(fontsize=8)
    def diff(r, method):  # the oracle's own difference sits in the row, its controls' under "controls"
        e = r if method == RELEVANT else r["controls"].get(method, {"diff": np.nan, "diff_ci": (np.nan, np.nan)})
        return e["diff"], e["diff_ci"]

    for method, label, offset, color in ((RELEVANT, "oracle", 0.0, method_color("oracle")),
                                         ("inverted:" + RELEVANT, "inverted", -0.006, "tab:red"),
                                         ("shuffled:" + RELEVANT, "shuffled", 0.006, "tab:gray")):
        rows = [diff(r, method) for r in sweep]
        errorbar(right, [d for d, _ in rows], [c[0] for _, c in rows], [c[1] for _, c in rows], offset=offset,
                 color=color, label=label)
    if confirm is not None:
        x = next(r["share"] for r in sweep if r["k"] == confirm["k"]) + 0.012
        o = confirm["methods"][RELEVANT]
        label = f"oracle, confirmatory ({len(confirm['seeds'])} new seeds)"
        for ax, y, (lo, hi) in ((left, o["speedup"], o["speedup_ci"]), (right, o["diff"], o["diff_ci"])):
            ax.errorbar([x], [y], yerr=[[y - lo], [hi - y]], fmt="*", ms=11, capsize=3, color=method_color("oracle"),
                        mec="black", label=label)
        left.legend(fontsize=8)
    right.axhline(0.0, color="gray", lw=0.8)
    right.set_xlabel("irrelevant tokens' share of the gradient variance")
    right.set_ylabel("mean held-out accuracy - GRPO's")
    right.legend(fontsize=8)


def plot_batch_size(ax, batch: dict):
    """One world of the batch-size study (`oar_lite.lab.findings.batch.worlds`: the pooled reading): GRPO's mean held-out
    accuracy over the run minus its smallest batch's, against prompts per step (95% intervals,
    log scale), with each credit method measured at the smallest batch drawn as a horizontal band
    at its own difference (its interval) and a star where it meets GRPO's curve: the batch size it
    is worth."""
    sizes = sorted(batch["rows"])
    ys = np.array([batch["rows"][p]["diff"] for p in sizes])
    cis = np.array([batch["rows"][p]["diff_ci"] for p in sizes])  # [P, 2]
    ax.errorbar(sizes, ys, yerr=[ys - cis[:, 0], cis[:, 1] - ys], fmt="o-", capsize=3,
                color=method_color("uniform"), label="GRPO at P prompts per step")
    for i, (method, mark) in enumerate(batch["marks"].items()):
        color = method_color(method, i + 1)
        ax.axhspan(*mark["diff_ci"], color=color, alpha=0.12)
        ax.axhline(mark["diff"], color=color, ls="--", lw=1.2,
                   label=f"{method} at {sizes[0]} prompts ({len(mark['seeds'])} seeds)")
        if sizes[0] < mark["worth"] < float("inf"):
            ax.plot([mark["worth"]], [mark["diff"]], "*", ms=12, color=color, mec="black")
    ax.axhline(0.0, color="gray", lw=0.8)
    ax.set_xscale("log", base=2)
    ax.set_xticks(sizes, [str(p) for p in sizes])
    ax.set_xlabel("prompts per step (group size 4)")
    ax.set_ylabel(f"mean held-out accuracy - {sizes[0]} prompts'")
    ax.set_title(f"{batch['world']}, {batch['optimizer']}")
    ax.legend(fontsize=7)


def plot_confirmatory(axes, confirm: dict):
    """The confirmatory regime (`oar_lite.lab.findings.regimes.confirmatory`): steps to each target,
    GRPO and the oracle, mean over seeds with 95% intervals (a run that misses a target counts as
    budget + 2; left), and the mean held-out accuracy over the run, oracle - GRPO, per seed with the
    mean and its interval (right)."""
    targets = confirm["targets"]
    for k, (key, method, color) in enumerate((("grpo", "GRPO", method_color("uniform")),
                                              ("oracle", "oracle", method_color("oracle", 1)))):
        xs = np.arange(len(targets)) + (k - 0.5) * 0.3
        e = [t[key] for t in targets.values()]
        axes[0].bar(xs, [x["mean"] for x in e], width=0.3, color=color, label=method, capsize=3,
                    yerr=np.array([[x["mean"] - x["ci"][0], x["ci"][1] - x["mean"]] for x in e]).T)
    axes[0].set_xticks(range(len(targets)), [f"target {k}" for k in targets])
    axes[0].set_ylabel(f"steps (mean over {confirm['seeds']} seeds, 95% CI)")
    axes[0].set_title("steps to the target (a run that misses it counts as budget + 2)", fontsize=9)
    axes[0].legend()
    diffs, a = np.asarray(confirm["per_seed"]["diffs"]), confirm["area"]
    axes[1].scatter(diffs, np.zeros_like(diffs), color=method_color("oracle", 1), alpha=0.6, label="one seed")
    axes[1].errorbar([a["diff"]], [0.3], xerr=[[a["diff"] - a["diff_ci"][0]], [a["diff_ci"][1] - a["diff"]]], fmt="o",
                     color="k", capsize=4, label="mean, 95% CI")
    axes[1].axvline(0, color="tab:gray", lw=0.8, ls="--")
    axes[1].set_ylim(-0.5, 0.8)
    axes[1].set_yticks([])
    axes[1].set_xlabel("mean held-out accuracy over the run: oracle - GRPO, same seed")
    axes[1].legend(loc="upper left", fontsize=8)


def plot_noise_shares(ax, shares: dict):
    """Where a batch gradient's variance comes from (`oar_lite.lab.findings.noise.shares`' ``"toy"``):
    per setting, the shares of the prompts drawn, the completions sampled and the tokens the reward
    does not depend on, stacked to 1."""
    names = list(shares)
    left = np.zeros(len(names))
    for part, color, label in (("prompts", "tab:gray", "prompts"), ("completions", "tab:blue", "completions"),
                               ("irrelevant", "tab:red", "irrelevant tokens")):
        values = np.array([shares[k][part] for k in names])
        ax.barh(names, values, left=left, color=color, label=label)
        left += values
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel("share of a batch gradient's variance")
    ax.legend(loc="lower right", fontsize=8)
