"""oar_lite.lab.plots draws what it is given: TRL log histories."""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pytest

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
