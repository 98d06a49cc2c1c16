"""Pictures of credit assignment, shared by every notebook so that OAR-P (notebook 02) and
OAR-G (notebook 03) look alike: token heatmaps as HTML (live) and as matplotlib figures
(they survive on GitHub and the course site), signed token advantages, the scores ->
weights curve, and a widget that redraws the reshaping as its sliders move.
"""
from __future__ import annotations

import html
from typing import Mapping, Sequence

import numpy as np
import torch

from ..reshape import RESHAPING, bilevel_weights


def _as_array(values) -> np.ndarray:
    if torch.is_tensor(values):
        values = values.detach().cpu().float().numpy()
    return np.asarray(values, dtype=float)


def _as_tensor(values) -> torch.Tensor:
    return torch.from_numpy(_as_array(values)).float()


def token_strings(tokenizer, ids: Sequence[int]) -> list[str]:
    """Each id decoded on its own (spaces kept, so the tokens read as the text)."""
    ids = ids.tolist() if torch.is_tensor(ids) else list(ids)
    return [tokenizer.decode([i], skip_special_tokens=False, clean_up_tokenization_spaces=False) for i in ids]


def _shaded(tokens: Sequence[str], values, labels: Sequence[int] | None,
            vmax: float | None) -> tuple[np.ndarray, np.ndarray]:
    """``(values, shade)`` of a token heatmap: the values as an array, checked one per token
    (labels too), and their shading in [0, 1] up to ``vmax`` (default: the largest), NaN as 0."""
    values = _as_array(values)
    if len(tokens) != len(values):
        raise ValueError(f"{len(tokens)} tokens but {len(values)} values; expected one value per token")
    if labels is not None and len(labels) != len(tokens):
        raise ValueError(f"{len(tokens)} tokens but {len(labels)} labels")
    shown = np.nan_to_num(values, nan=0.0)
    finite = shown[np.isfinite(shown)]
    top = vmax if vmax is not None else (finite.max() if finite.size else 1.0)
    return values, np.clip(shown / top, 0, 1) if top > 0 else np.zeros_like(shown)


def token_heatmap_html(
    tokens: Sequence[str],
    values,
    *,
    labels: Sequence[int] | None = None,
    vmax: float | None = None,
    title: str | None = None,
    color: str = "214, 39, 40",
) -> str:
    """HTML (for ``IPython.display.HTML``) of n tokens shaded by their values.

    Args:
        tokens: n token strings (`token_strings`).
        values: ``[n]`` non-negative values, shaded linearly up to ``vmax`` (default: the
            largest); NaN (not scored) is drawn plain.
        labels: optional ``[n]`` ints; label > 0 is underlined (e.g. pivotal tokens).
        title: a caption; color: the shading as ``"r, g, b"``.

    Raises:
        ValueError: ``values`` or ``labels`` is not one per token.
    """
    values, shade = _shaded(tokens, values, labels, vmax)
    spans = []
    for i, (tok, v, a) in enumerate(zip(tokens, values, shade)):
        text = html.escape(tok).replace(" ", "&nbsp;").replace("\n", "&#9166;<br>")
        style = "padding:1px 0;border-radius:2px;"
        if np.isfinite(v):
            style += f"background:rgba({color},{a:.2f});"
        if labels is not None and labels[i] > 0:
            style += "border-bottom:2px solid #222;"
        tip = "" if not np.isfinite(v) else f' title="{v:.3g}"'
        spans.append(f'<span style="{style}"{tip}>{text}</span>')
    head = f"<div style='font-weight:bold;margin-top:4px'>{html.escape(title)}</div>" if title else ""
    return f"{head}<div style='font-family:monospace;line-height:1.9'>{''.join(spans)}</div>"


FIGURE_DPI = 120
"""The dpi of every figure of the series (matplotlib-inline's 72 is too small for token labels)."""


def readable_figures(dpi: int = FIGURE_DPI) -> None:
    """Set matplotlib's defaults for the series: ``dpi`` for shown and saved figures, and
    labels large enough to read tokens."""
    import matplotlib as mpl

    if dpi < 110:
        raise ValueError(f"dpi must be at least 110 for readable token labels, got {dpi}")
    mpl.rcParams.update({"figure.dpi": dpi, "savefig.dpi": dpi, "font.size": 9,
                         "xtick.labelsize": 8, "ytick.labelsize": 8})


def _display_token(tok: str) -> str:
    return tok.replace(" ", "\u2423").replace("\n", "\u23ce")


def token_heatmap_figure(
    tokens: Sequence[str],
    values,
    *,
    labels: Sequence[int] | None = None,
    vmax: float | None = None,
    title: str | None = None,
    color: str = "214, 39, 40",
    width: int = 90,
    fontsize: float = 9,
    scale_label: str = "value",
):
    """The static matplotlib twin of `token_heatmap_html` (same arguments; labelled tokens
    bold and underlined, spaces drawn as ``\u2423``): text wrapped at ``width`` characters,
    and under it the colour scale, from 0 (white) to the value drawn in full colour (``vmax``
    or the largest), labelled ``scale_label``.

    Returns:
        The ``matplotlib.figure.Figure``: the tokens' axes first (one text artist per token,
        in order), then the colour bar's.
    """
    import matplotlib.pyplot as plt
    from matplotlib.colors import LinearSegmentedColormap, Normalize

    values, shade = _shaded(tokens, values, labels, vmax)
    if width < 10:
        raise ValueError(f"width must be at least 10 characters, got {width}")
    rgb = tuple(int(c) / 255 for c in color.split(","))
    texts = [_display_token(t) or "\u2205" for t in tokens]
    places, line, col = [], 0, 0
    for text in texts:
        if col + len(text) > width and col > 0:
            line, col = line + 1, 0
        places.append((line, col))
        col += len(text) + 0.4
    lines = line + 1
    char_w, line_h = fontsize * 0.6 / 72, fontsize * 2.0 / 72      # inches
    text_h, scale_h = lines * line_h + (0.35 if title else 0.1) + 0.1, 0.55
    fig = plt.figure(figsize=(max(4.0, (width + 2) * char_w), text_h + scale_h))
    ax = fig.add_axes((0, scale_h / (text_h + scale_h), 1, text_h / (text_h + scale_h)))
    ax.set_xlim(-1, width + 1)
    ax.set_ylim(lines + (0.6 if title else 0.1), -0.6)
    ax.axis("off")
    if title:
        ax.text(-0.5, -0.1, title, fontsize=fontsize, fontweight="bold", va="bottom")
    for i, (text, (row, x)) in enumerate(zip(texts, places)):
        marked = labels is not None and labels[i] > 0
        box = None
        if np.isfinite(values[i]):
            box = dict(boxstyle="square,pad=0.15", facecolor=(*rgb, float(shade[i])), edgecolor="none")
        ax.text(x, row + 0.5, text, fontsize=fontsize, fontfamily="monospace", va="center", ha="left",
                fontweight="bold" if marked else "normal", bbox=box)
        if marked:
            ax.plot([x, x + len(text)], [row + 0.85, row + 0.85], color="#222", lw=1.2)
    finite = values[np.isfinite(values)]
    top = vmax if vmax is not None else (float(finite.max()) if finite.size else 1.0)
    scale = fig.add_axes((0.04, 0.42 * scale_h / (text_h + scale_h), 0.3, 0.14 / (text_h + scale_h)))
    shades = LinearSegmentedColormap.from_list("shade", [(1.0, 1.0, 1.0), rgb])   # alpha over white, as drawn
    fig.colorbar(plt.cm.ScalarMappable(Normalize(0, top if top > 0 else 1.0), shades), cax=scale,
                 orientation="horizontal", label=scale_label)
    scale.tick_params(labelsize=fontsize - 1)
    scale.xaxis.label.set_size(fontsize - 1)
    return fig


def show_token_heatmap(tokens: Sequence[str], values, **kwargs) -> None:
    """Display one token heatmap, with its colour scale: the static figure
    (`token_heatmap_figure`, keyword arguments go to it), which looks the same in Jupyter,
    on Colab, on a repository page and on the course site. (`token_heatmap_html` is the live
    version the reshaping widget redraws.)"""
    import matplotlib.pyplot as plt
    from IPython.display import display

    fig = token_heatmap_figure(tokens, values, **kwargs)
    display(fig)
    plt.close(fig)


def plot_token_heatmap(
    ax,
    tokens: Sequence[str],
    rows: Mapping[str, Sequence[float]],
    *,
    normalise: bool = True,
    cmap: str = "Reds",
    max_tokens: int = 80,
    colorbar: str | None = "default",
):
    """A heatmap on ``ax``: n tokens along x, one row per method (or the ground truth), with
    its colour scale beside it.

    Args:
        rows: ``{name: [n] values}``; NaN cells (unscored tokens) are left blank.
        normalise: scale each row to [0, 1] so rows in different units compare.
        max_tokens: draw only the first this many tokens.
        colorbar: the colour bar's label ("default": says whether the rows are scaled), or
            None for no colour bar (the caller draws one shared by several axes).

    Returns:
        The image.
    """
    n = min(len(tokens), max_tokens)
    grid = []
    for name, values in rows.items():
        v = _as_array(values)
        if len(v) != len(tokens):
            raise ValueError(f"row {name!r} has {len(v)} values for {len(tokens)} tokens")
        v = v[:n].copy()
        if normalise:
            finite = v[np.isfinite(v)]
            lo, hi = (finite.min(), finite.max()) if finite.size else (0.0, 1.0)
            v = (v - lo) / (hi - lo) if hi > lo else np.where(np.isfinite(v), 0.5, np.nan)
        grid.append(v)
    image = ax.imshow(np.ma.masked_invalid(np.array(grid)), aspect="auto", cmap=cmap, vmin=0,
                      vmax=1 if normalise else None, interpolation="nearest")
    ax.set_yticks(range(len(rows)), list(rows))
    ax.set_xticks(range(n), [_display_token(t) for t in tokens[:n]], fontsize=9, rotation=90,
                  fontfamily="monospace")
    ax.tick_params(length=0)
    if colorbar is not None:
        label = ("each row scaled to [0, 1]" if normalise else "value") if colorbar == "default" else colorbar
        ax.figure.colorbar(image, ax=ax, label=label, fraction=0.03, pad=0.01)
    return image


def plot_token_advantages(
    ax,
    tokens: Sequence[Sequence[str]],
    values: Sequence,
    *,
    row_labels: Sequence[str] | None = None,
    marks: Sequence | None = None,
    vmax: float | None = None,
    cmap: str = "RdBu",
    max_tokens: int = 80,
    fontsize: float = 7,
):
    """Signed per-token values of G completions (e.g. token advantages ``A_i * w_t``), one
    row each, every token written in its cell, on one diverging scale centred at 0
    (``"RdBu"``: blue is credit, red is blame).

    Args:
        tokens: G rows of token strings (row i has n_i tokens; shorter rows end blank).
        values: G rows of ``[n_i]`` signed values (NaN cells are left blank).
        row_labels: G names for the y axis.
        marks: optional G rows of ``[n_i]`` bools, written in bold (e.g. pivotal tokens).
        vmax: the scale is ``[-vmax, vmax]`` (default: the largest |value|).

    Returns:
        The image (for a colour bar).

    Raises:
        ValueError: rows of tokens, values, labels or marks that do not match.
    """
    if len(tokens) != len(values):
        raise ValueError(f"{len(tokens)} rows of tokens but {len(values)} rows of values; expected one each")
    for what, given in (("row labels", row_labels), ("rows of marks", marks)):
        if given is not None and len(given) != len(tokens):
            raise ValueError(f"{len(given)} {what} for {len(tokens)} rows")
    rows = [_as_array(v) for v in values]
    for i, (toks, v) in enumerate(zip(tokens, rows)):
        if v.ndim != 1 or len(v) != len(toks):
            raise ValueError(f"row {i}: {len(toks)} tokens but values of shape {v.shape}; expected [{len(toks)}]")
        if marks is not None and len(marks[i]) != len(toks):
            raise ValueError(f"row {i}: {len(toks)} tokens but {len(marks[i])} marks")
    n = min(max((len(t) for t in tokens), default=0), max_tokens)
    grid = np.full((len(tokens), n), np.nan)
    for i, v in enumerate(rows):
        grid[i, : min(len(v), n)] = v[:n]
    finite = np.abs(grid[np.isfinite(grid)])
    top = vmax if vmax is not None else (finite.max() if finite.size and finite.max() > 0 else 1.0)
    image = ax.imshow(np.ma.masked_invalid(grid), aspect="auto", cmap=cmap, vmin=-top, vmax=top,
                      interpolation="nearest")
    for i, toks in enumerate(tokens):
        for j, tok in enumerate(toks[:n]):
            bold = marks is not None and bool(marks[i][j])
            dark = np.isfinite(grid[i, j]) and abs(grid[i, j]) > 0.6 * top
            ax.text(j, i, _display_token(tok), ha="center", va="center", fontsize=fontsize, fontfamily="monospace",
                    fontweight="bold" if bold else "normal", color="white" if dark else "black")
    ax.set_yticks(range(len(tokens)), list(row_labels) if row_labels is not None else range(len(tokens)))
    ax.set_xticks([])
    ax.tick_params(length=0)
    return image


def plot_scores_to_weights(ax, scores, *, color: str = "#1f77b4", **reshaping):
    """Scatter of one completion's ``[R]`` scores (log1p scale) against their weights under
    `bilevel_weights` with the ``reshaping`` settings (its keywords; default: theirs), the
    suppressed region shaded; returns the ``[R]`` weights."""
    s = _as_tensor(scores)
    w = bilevel_weights(s, **reshaping)
    x = torch.log1p(s).numpy()
    ax.scatter(x, w.numpy(), s=18, color=color, zorder=3)
    ax.axhline(1.0, color="#888", lw=0.8, ls="--", label="plain GRPO (w = 1)")
    raw = bilevel_weights(s, **{**reshaping, "preserve_mass": False})
    below = (raw < 1).numpy()
    if below.any():
        ax.axvspan(x.min(), x[below].max(), color="#fdd", zorder=0, label="suppressed")
    ax.set_xlabel("log1p(importance score)")
    ax.set_ylabel("token weight")
    ax.legend(fontsize=8, loc="upper left")
    return w


def reshape_widget(tokens: Sequence[str], scores, *, labels: Sequence[int] | None = None):
    """Sliders for quantile, boost and floor that redraw the weights and the heatmap of R
    reasoning tokens with ``[R]`` scores (``[R]`` labels underlined).

    Returns:
        An ``ipywidgets.VBox``; its ``weights()`` gives the weights at the current sliders.
        Displayed, it also carries a static PNG of its current state (``image/png`` next to the
        widget in its display data), which a page without a kernel (a repository page, the
        course site) shows in place of the sliders.
    """
    import base64
    import io

    import ipywidgets as widgets
    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure

    class ReshapeBox(widgets.VBox):
        def _repr_mimebundle_(self, **kwargs):
            bundle = super()._repr_mimebundle_(**kwargs)
            bundle["image/png"] = static_png()
            return bundle

    scores = _as_tensor(scores)
    if len(tokens) != scores.numel():
        raise ValueError(f"{len(tokens)} tokens but {scores.numel()} scores")
    default = {name: s.default for name, s in RESHAPING.items()}
    quantile = widgets.FloatSlider(value=default["quantile"], min=0.0, max=0.9, step=0.05, description="quantile")
    boost = widgets.FloatSlider(value=default["boost"], min=0.0, max=3.0, step=0.1, description="boost")
    floor = widgets.FloatSlider(value=default["floor"], min=0.0, max=1.0, step=0.05, description="floor")
    preserve = widgets.Checkbox(value=default["preserve_mass"], description="preserve mass")
    plot_out, text_out = widgets.Output(), widgets.HTML()

    def settings():
        return dict(quantile=quantile.value, boost=boost.value, floor=floor.value, preserve_mass=preserve.value)

    def current():
        return bilevel_weights(scores, **settings())

    def redraw(_=None):
        w = current()
        text_out.value = token_heatmap_html(tokens, w.numpy(), labels=labels, vmax=max(2.0, float(w.max())),
                                            title=f"weights (sum = {float(w.sum()):.1f}, R = {len(w)})")
        with plot_out:
            plot_out.clear_output(wait=True)
            fig, ax = plt.subplots(figsize=(5, 3))
            plot_scores_to_weights(ax, scores, **settings())
            plt.show()

    def static_png() -> str:
        """The widget's current state as one base64 PNG: the scores -> weights curve, then the
        tokens shaded by their weights (a bare Figure: nothing is shown while it is drawn)."""
        fig = Figure(figsize=(10, 3.2), dpi=FIGURE_DPI)
        curve, strip = fig.subplots(2, 1, height_ratios=[3, 1])
        w = plot_scores_to_weights(curve, scores, **settings())
        curve.set_title(f"quantile {quantile.value:g}, boost {boost.value:g}, floor {floor.value:g}"
                        f"{'' if preserve.value else ', mass not preserved'} (the sliders' state; run the notebook to move them)",
                        fontsize=8)
        plot_token_heatmap(strip, tokens, {"weight": w}, normalise=False, colorbar="weight")
        fig.tight_layout()
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png")
        return base64.b64encode(buffer.getvalue()).decode("ascii")

    for control in (quantile, boost, floor, preserve):
        control.observe(redraw, names="value")
    redraw()
    box = ReshapeBox([widgets.HBox([quantile, boost]), widgets.HBox([floor, preserve]), plot_out, text_out])
    box.weights = current
    return box
