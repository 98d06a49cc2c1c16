"""Matplotlib helpers for training results: learning curves with a band over seeds, and
time per step split by phase. They take the metric records `oar_lite.train` writes
(``{"type": "train" | "eval", "method", "seed", "step", ...}``) and draw on an axis you
give them, so notebooks and ``python -m oar_lite compare`` draw the same pictures.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Iterable, Sequence

import numpy as np

PHASES = ("generate", "reward", "attribute", "update")
METHOD_COLORS = {"uniform": "#555555", "oar-g": "#1f77b4", "oar-p": "#d62728", "entropy": "#2ca02c", "random": "#9467bd"}
PHASE_COLORS = {"generate": "#8da0cb", "reward": "#a6d854", "attribute": "#fc8d62", "update": "#66c2a5"}


def method_label(method: str) -> str:
    """Display name: ``"uniform"`` is plain GRPO."""
    return "GRPO (uniform)" if method == "uniform" else method.upper() if method in ("oar-g", "oar-p") else method


def method_color(method: str, index: int = 0) -> str:
    """A stable colour per method (the ``tab10`` cycle for methods without one)."""
    import matplotlib.pyplot as plt

    base = method.partition(":")[0]
    return METHOD_COLORS.get(method, METHOD_COLORS.get(base, plt.get_cmap("tab10")(index % 10)))


def by_method_and_seed(records: Iterable[dict], kind: str = "eval") -> dict[str, dict[int, list[dict]]]:
    """Group records of one ``type`` as ``{method: {seed: [records sorted by step]}}``."""
    out: dict[str, dict[int, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for r in records:
        if r.get("type") == kind:
            out[r["method"]][r["seed"]].append(r)
    return {m: {s: sorted(rs, key=lambda r: r["step"]) for s, rs in seeds.items()} for m, seeds in out.items()}


def seed_band(runs: Sequence[Sequence[dict]], x: str, y: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Mean curve and min/max band over seeds.

    Runs are aligned by position (the same evaluation schedule), cut to the shortest.
    ``x`` is averaged too (wall time differs from seed to seed).

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
        ax: a matplotlib axis.
        records: metric records of several runs.
        x, y: record fields (``"step"`` or ``"wall_time"``; ``"eval_accuracy"``,
            ``"reward_mean"``, ``"entropy"``, ...).
        kind: ``"eval"`` or ``"train"`` records.
        methods: which methods, in this order (default: all, sorted with uniform first).
        target: draw a dotted horizontal line at this value.
        smooth: moving-average window over points (1: none), for noisy train metrics.
    """
    grouped = by_method_and_seed(records, kind)
    order = list(methods) if methods else sorted(grouped, key=lambda m: (m != "uniform", m))
    for i, method in enumerate(order):
        if method not in grouped:
            continue
        runs = list(grouped[method].values())
        xm, ym, lo, hi = seed_band(runs, x, y)
        if smooth > 1 and len(ym) >= smooth:
            kernel = np.ones(smooth) / smooth
            ym, lo, hi = (np.convolve(v, kernel, mode="valid") for v in (ym, lo, hi))
            xm = xm[smooth - 1:]
        color = method_color(method, i)
        label = f"{method_label(method)} ({len(runs)} seed{'s' if len(runs) != 1 else ''})"
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
    """Stacked horizontal bars: seconds per step in each phase, one bar per method.

    Args:
        phase_times: ``{method: {"generate": s, "reward": s, "attribute": s, "update": s}}``.
    """
    order = list(methods) if methods else sorted(phase_times, key=lambda m: (m != "uniform", m))
    order = [m for m in order if m in phase_times]
    left = np.zeros(len(order))
    for phase in PHASES:
        values = np.array([phase_times[m].get(phase, 0.0) for m in order])
        ax.barh(range(len(order)), values, left=left, color=PHASE_COLORS[phase], label=phase)
        left += values
    ax.set_yticks(range(len(order)), [method_label(m) for m in order])
    ax.invert_yaxis()
    ax.set_xlabel("seconds per step (median)")
    ax.legend(loc="lower right", fontsize="small")
    ax.grid(axis="x", alpha=0.3)
    return ax
