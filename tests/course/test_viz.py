"""The shared renderer: heatmaps and the reshaping widget draw what they are given."""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch

from oar_lite import bilevel_weights
from oar_lite.course.viz import plot_scores_to_weights, plot_token_heatmap, reshape_widget, token_heatmap_html


def test_html_heatmap_shades_escapes_and_underlines():
    out = token_heatmap_html(["a", "<b>", " "], [0.0, 2.0, float("nan")], labels=[0, 1, 0])
    assert "&lt;b&gt;" in out and ">&lt;b&gt;<" in out
    assert "rgba(214, 39, 40,1.00)" in out and "rgba(214, 39, 40,0.00)" in out
    assert out.count("border-bottom") == 1
    with pytest.raises(ValueError, match="one value per token"):
        token_heatmap_html(["a"], [1.0, 2.0])


def test_matplotlib_heatmap_rows_normalised():
    fig, ax = plt.subplots()
    image = plot_token_heatmap(ax, list("abcd"), {"oar-p": [0, 1, 2, np.nan], "truth": [1, 0, 1, 0]})
    grid = image.get_array()
    assert grid.shape == (2, 4) and grid.mask[0, 3]
    np.testing.assert_allclose(grid[0, :3], [0, 0.5, 1])
    plt.close(fig)


def test_scores_to_weights_and_widget_agree_with_reshape():
    scores = torch.tensor([0.0, 0.1, 0.5, 2.0, 9.0])
    fig, ax = plt.subplots()
    w = plot_scores_to_weights(ax, scores)
    torch.testing.assert_close(w, bilevel_weights(scores))
    plt.close(fig)
    box = reshape_widget(list("abcde"), scores)
    torch.testing.assert_close(box.weights(), bilevel_weights(scores))
    box.children[0].children[1].value = 0.0  # boost slider
    box.children[0].children[0].value = 0.0  # quantile slider
    torch.testing.assert_close(box.weights(), torch.ones(5))
    assert "sum = 5.0" in box.children[3].value
    plt.close("all")


def test_token_advantages_grid_is_signed_shared_and_ragged():
    from oar_lite.course.viz import plot_token_advantages

    fig, ax = plt.subplots()
    image = plot_token_advantages(ax, [list("abc"), list("de")], [[1.5, -0.5, 0.0], [-3.0, np.nan]],
                                  row_labels=["right", "wrong"], marks=[[1, 0, 0], [0, 0]])
    grid = image.get_array()
    assert grid.shape == (2, 3) and grid.mask[1, 2] and grid.mask[1, 1] and not grid.mask[0, 2]
    np.testing.assert_allclose(grid[0], [1.5, -0.5, 0.0])
    assert image.get_clim() == (-3.0, 3.0)  # one symmetric scale for every row
    texts = ax.texts
    assert [t.get_text() for t in texts] == list("abcde")
    assert texts[0].get_fontweight() == "bold" and texts[1].get_fontweight() == "normal"
    assert texts[3].get_color() == "white"  # |-3| is dark on the scale
    with pytest.raises(ValueError, match="row 1"):
        plot_token_advantages(ax, [list("ab"), list("cd")], [[1, 2], [1]])
    plt.close(fig)


def test_static_token_heatmap_wraps_shades_and_marks():
    from oar_lite.course.viz import token_heatmap_figure

    tokens = ["ab", " ", "<c>", "\n", "dd"] * 8
    values = [0.0, 2.0, float("nan"), 1.0, 4.0] * 8
    fig = token_heatmap_figure(tokens, values, labels=[1, 0, 0, 0, 0] * 8, vmax=4.0, title="t", width=20)
    ax = fig.axes[0]
    texts = [t for t in ax.texts if t.get_text() != "t"]
    assert [t.get_text() for t in texts[:5]] == ["ab", "\u2423", "<c>", "\u23ce", "dd"]
    assert texts[2].get_bbox_patch() is None                       # NaN: not scored, no box
    assert texts[4].get_bbox_patch().get_facecolor()[3] == 1.0      # 4.0 at vmax 4: full colour
    assert texts[1].get_bbox_patch().get_facecolor()[3] == 0.5
    assert texts[0].get_fontweight() == "bold" and len(ax.lines) == 8   # marked: bold + underline
    rows = {round(t.get_position()[1], 3) for t in texts}
    assert len(rows) > 1                                             # 40 tokens wrapped at 20 characters
    assert all(t.get_position()[0] + len(t.get_text()) <= 20 + 1 for t in texts)
    with pytest.raises(ValueError, match="one value per token"):
        token_heatmap_figure(["a"], [1.0, 2.0])
    plt.close(fig)


def test_readable_figures_sets_dpi_and_refuses_small():
    from oar_lite.course.viz import readable_figures

    readable_figures()
    assert matplotlib.rcParams["figure.dpi"] >= 110 and matplotlib.rcParams["savefig.dpi"] >= 110
    with pytest.raises(ValueError, match="at least 110"):
        readable_figures(72)


def test_token_heatmap_figure_has_a_colour_scale_and_show_displays_one_picture(monkeypatch):
    from oar_lite.course import viz

    fig = viz.token_heatmap_figure(list("abc"), [0.0, 1.0, 3.0], scale_label="score")
    text_ax, scale = fig.axes
    assert len(text_ax.texts) == 3 and scale.get_xlabel() == "score"
    assert scale.get_xlim() == (0.0, 3.0)                    # 0 (white) to the largest value
    plt.close(fig)
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda *objs, **kw: shown.extend(objs))
    viz.show_token_heatmap(list("ab"), [0.0, 1.0], vmax=2.0)
    assert len(shown) == 1 and hasattr(shown[0], "savefig")  # one output, the figure
    plt.close("all")


def test_plot_token_heatmap_draws_its_colour_bar():
    fig, ax = plt.subplots()
    plot_token_heatmap(ax, list("ab"), {"x": [0, 1]})
    assert [a.get_ylabel() for a in fig.axes[1:]] == ["each row scaled to [0, 1]"]
    fig2, ax2 = plt.subplots()
    plot_token_heatmap(ax2, list("ab"), {"x": [0, 1]}, colorbar=None)
    assert len(fig2.axes) == 1
    plt.close("all")


def test_reshape_widget_carries_its_static_picture():
    import base64

    box = reshape_widget(list("abcde"), torch.tensor([0.0, 0.1, 0.5, 2.0, 9.0]))
    bundle = box._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert base64.b64decode(bundle["image/png"])[:8] == b"\x89PNG\r\n\x1a\n"
    plt.close("all")


def test_token_strings_are_one_per_id_and_read_as_the_text(tok):
    from oar_lite.course.viz import token_strings

    ids = tok("12+34=46")["input_ids"]
    pieces = token_strings(tok, torch.tensor(ids))
    assert len(pieces) == len(ids) and pieces == token_strings(tok, ids)
    assert "".join(pieces) == tok.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)
