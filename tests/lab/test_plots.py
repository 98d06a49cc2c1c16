"""oar_lite.lab.plots draws what it is given: TRL log histories."""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pytest

from oar_lite.lab import plots
from oar_lite.lab.plots import log_history_series, plot_log_history

HISTORY = [
    {"loss": 0.1, "reward": 0.25, "oar/weight_std": 0.5, "step": 1},
    {"loss": 0.2, "reward": 0.5, "oar/weight_std": float("nan"), "step": 2},
    {"eval_loss": 0.3, "step": 2},  # an evaluation entry: no reward
    {"loss": 0.0, "reward": 0.75, "oar/weight_std": 0.7, "step": 3},
    {"train_runtime": 9.0, "step": 3},  # the end-of-training summary
]


def test_series_skips_entries_without_the_key_or_with_nan():
    xs, ys = log_history_series(HISTORY, "reward")
    np.testing.assert_array_equal(xs, [1, 2, 3])
    np.testing.assert_array_equal(ys, [0.25, 0.5, 0.75])
    xs, ys = log_history_series(HISTORY, "oar/weight_std")
    np.testing.assert_array_equal(xs, [1, 3])
    with pytest.raises(ValueError, match="no log entry has 'oar/frac_boosted'.*reward"):
        log_history_series(HISTORY, "oar/frac_boosted")


def test_plot_draws_one_line_per_key_with_smoothing():
    fig, ax = plt.subplots()
    plot_log_history(ax, HISTORY, ["reward", "loss"], smooth=2)
    lines = ax.get_lines()
    assert [line.get_label() for line in lines] == ["reward", "loss"]
    np.testing.assert_allclose(lines[0].get_xdata(), [2, 3])
    np.testing.assert_allclose(lines[0].get_ydata(), [0.375, 0.625])
    plt.close(fig)
    fig, ax = plt.subplots()
    plot_log_history(ax, HISTORY, "reward", labels=["train reward"])
    assert ax.get_ylabel() == "train reward" and len(ax.get_lines()) == 1
    with pytest.raises(ValueError, match="one label per key"):
        plot_log_history(ax, HISTORY, ["reward", "loss"], labels=["a"])
    with pytest.raises(ValueError, match="keys is empty"):
        plot_log_history(ax, HISTORY, [])
    plt.close(fig)


def _eval_records(method, seed, accuracies, *, wall=1.0):
    return [{"type": "eval", "method": method, "seed": seed, "step": 10 * i, "wall_time": wall * i,
             "eval_accuracy": a} for i, a in enumerate(accuracies)]


def test_seed_band_is_the_mean_with_the_seeds_min_and_max_cut_to_the_shortest_run():
    from oar_lite.lab.plots import seed_band

    runs = [_eval_records("oar-g", 0, [0.1, 0.5, 0.9], wall=1.0), _eval_records("oar-g", 1, [0.3, 0.1], wall=3.0),
            _eval_records("oar-g", 2, [0.2, None], wall=2.0)]  # a missing value is left out of that point
    x, mean, low, high = seed_band(runs, "wall_time", "eval_accuracy")
    np.testing.assert_allclose(x, [0.0, 2.0])  # cut to 2 points; wall time averaged over seeds
    np.testing.assert_allclose(mean, [0.2, 0.3])
    np.testing.assert_allclose(low, [0.1, 0.1])
    np.testing.assert_allclose(high, [0.3, 0.5])
    assert np.all(low <= mean) and np.all(mean <= high)
    with pytest.raises(ValueError, match="no runs"):
        seed_band([], "step", "eval_accuracy")


def test_plot_curves_draws_a_line_per_method_and_a_band_only_over_several_seeds():
    from matplotlib.collections import PolyCollection

    from oar_lite.lab.plots import plot_curves

    records = (_eval_records("oar-p", 0, [0.2, 0.6]) + _eval_records("oar-p", 1, [0.4, 0.8])
               + _eval_records("uniform", 0, [0.1, 0.3])
               + [{"type": "train", "method": "uniform", "seed": 0, "step": 0, "eval_accuracy": 9.0}])  # not eval
    fig, ax = plt.subplots()
    plot_curves(ax, records, target=0.5)
    lines = ax.get_lines()
    assert [line.get_label() for line in lines] == ["GRPO (1 seed)", "OAR-P (2 seeds)", "target 0.5"]
    np.testing.assert_allclose(lines[0].get_ydata(), [0.1, 0.3])  # GRPO first, train records ignored
    np.testing.assert_allclose(lines[1].get_ydata(), [0.3, 0.7])  # the mean over the two seeds
    np.testing.assert_allclose(lines[2].get_ydata(), [0.5, 0.5])
    bands = [c for c in ax.collections if isinstance(c, PolyCollection)]
    assert len(bands) == 1  # one seed: no band
    ys = bands[0].get_paths()[0].vertices[:, 1]
    assert ys.min() == pytest.approx(0.2) and ys.max() == pytest.approx(0.8)  # min and max over the seeds
    plt.close(fig)
    fig, ax = plt.subplots()
    plot_curves(ax, records, methods=["oar-p", "oar-g"])  # chosen order; a method without records is skipped
    assert [line.get_label() for line in ax.get_lines()] == ["OAR-P (2 seeds)"]
    plt.close(fig)


def test_plot_phase_times_stacks_each_methods_phases_in_its_order():
    from oar_lite.lab.plots import plot_phase_times
    from oar_lite.train import PHASES

    times = {"oar-g": {"generate": 1.0, "attribute": 0.5, "update": 2.0},
             "uniform": {"generate": 1.0, "reward": 0.25, "update": 2.0}}
    fig, ax = plt.subplots()
    plot_phase_times(ax, times)
    assert [t.get_text() for t in ax.get_yticklabels()] == ["GRPO", "OAR-G"]
    containers = ax.containers
    assert [c.get_label() for c in containers] == list(PHASES)
    for row, method in enumerate(["uniform", "oar-g"]):
        left = 0.0
        for phase, bars in zip(PHASES, containers):
            bar = bars[row]
            assert bar.get_x() == pytest.approx(left) and bar.get_width() == pytest.approx(times[method].get(phase, 0.0))
            left += bar.get_width()
        assert left == pytest.approx(sum(times[method].values()))  # the bar's end is the step's time
    plt.close(fig)


def test_plot_batch_size_draws_grpo_s_curve_and_a_star_where_credit_meets_it():
    batch = {"world": "plain toy", "optimizer": "adamw",
             "rows": {p: {"diff": d, "diff_ci": [d - 0.01, d + 0.01]} for p, d in ((2, 0.0), (4, 0.04), (8, 0.05))},
             "marks": {"oracle": {"diff": 0.02, "diff_ci": [0.0, 0.04], "seeds": [0, 1], "worth": 2.8},
                       "oar-g:answer_mean": {"diff": -0.01, "diff_ci": [-0.02, 0.0], "seeds": [0, 1], "worth": 2.0}}}
    fig, ax = plt.subplots()
    plots.plot_batch_size(ax, batch)
    stars = [l for l in ax.lines if l.get_marker() == "*"]
    assert len(stars) == 1 and stars[0].get_xdata()[0] == 2.8  # a method worth no more than 2 prompts gets no star
    labels = ax.get_legend_handles_labels()[1]
    assert "GRPO at P prompts per step" in labels and "oracle at 2 prompts (2 seeds)" in labels
    assert [t.get_text() for t in ax.get_xticklabels()] == ["2", "4", "8"]
    plt.close(fig)


def test_plot_confirmatory_draws_steps_per_target_and_the_per_seed_differences():
    from oar_lite.lab.findings import regimes

    confirm = regimes.confirmatory()
    fig, axes = plt.subplots(1, 2)
    plots.plot_confirmatory(axes, confirm)
    assert len(axes[0].patches) == 2 * len(confirm["targets"])
    assert [t.get_text() for t in axes[0].get_xticklabels()] == [f"target {k}" for k in confirm["targets"]]
    assert len(axes[1].collections[0].get_offsets()) == confirm["seeds"]
    plt.close(fig)


def test_plot_noise_shares_stacks_the_three_parts_to_one():
    shares = {"a": {"prompts": 0.2, "completions": 0.7, "irrelevant": 0.1},
              "b": {"prompts": 0.5, "completions": 0.3, "irrelevant": 0.2}}
    fig, ax = plt.subplots()
    plots.plot_noise_shares(ax, shares)
    ends = {}
    for bar in ax.patches:
        ends[bar.get_y()] = max(ends.get(bar.get_y(), 0), bar.get_x() + bar.get_width())
    assert sorted(round(v, 9) for v in ends.values()) == [1.0, 1.0] and len(ax.patches) == 6
    assert ax.get_legend_handles_labels()[1] == ["prompts", "completions", "irrelevant tokens"]
    plt.close(fig)
