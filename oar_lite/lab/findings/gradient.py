"""What credit does to one step's gradient (notebook 06, sections 3-6): the gradient-quality
measurements of ``gradient_quality.json`` (8 prompts x 8 completions) and
``gradient_quality_regime.json`` (the learning regime's 2 x 4), each weighting's cosine to the true
gradient, bias cosine and signal-to-noise ratio against uniform credit's, and where each puts the
blame of a wrong completion. The words are ``gradient.md.j2``'s.
"""
from __future__ import annotations

import json

from .. import regime
from . import prose

ORACLE = "oracle (0.1 elsewhere)"
"""The oracle weighting of the gradient-quality files (`oar_lite.course.oracle`, 0.1 off the wrong tokens)."""
TEMPLATE = "gradient.md.j2"


def _snr_gains(st: dict) -> dict[str, float]:
    return {k: v["snr"] / st["uniform"]["snr"] - 1 for k, v in st.items()}


def measured(data: dict | None = None) -> dict:
    """``gradient_quality.json`` read: ``{"settings", "command", "stats": {weighting: {"cosine",
    "bias_cosine", "snr", "snr_gain"}}, "best"`` (the weighting with the highest SNR), ``"blame":
    {weighting: {"share", "n"}}, "wrong_tokens"`` (the share of reasoning tokens that are wrong)}."""
    data = json.loads((regime.RESULTS_DIR / "gradient_quality.json").read_text()) if data is None else data
    st, gains = data["stats"], _snr_gains(data["stats"])
    return {"settings": data["settings"], "command": data["command"],
            "stats": {k: {**{f: v[f] for f in ("cosine", "bias_cosine", "snr")}, "snr_gain": gains[k]} for k, v in st.items()},
            "best": max((k for k in st if k != "uniform"), key=lambda k: st[k]["snr"]),
            "blame": {k: v for k, v in data["blame"].items() if not k.startswith("_")},
            "wrong_tokens": data["blame"]["_tokens"]["share"], "oracle": ORACLE}


def in_regime(data: dict | None = None) -> dict:
    """``gradient_quality_regime.json`` read: the SNR gains over uniform credit at the learning
    regime's batch, with their 95% intervals (batches resampled): ``{"settings", "command",
    "gains": {weighting: {"gain", "ci" or None}}, "oracle"}``."""
    data = json.loads((regime.RESULTS_DIR / "gradient_quality_regime.json").read_text()) if data is None else data
    cis = data.get("snr_vs_uniform_ci", {})
    return {"settings": data["settings"], "command": data["command"], "oracle": ORACLE,
            "gains": {k: {"gain": g, "ci": [x - 1 for x in cis[k]] if k in cis else None}
                      for k, g in _snr_gains(data["stats"]).items() if k != "uniform"}}


def text(piece: str, numbers: dict) -> str:
    """A piece of sections 3-6 in words: ``"live"`` (a `gradient_quality` run's ``"stats"``),
    ``"table"`` and ``"reading"`` (`measured`), ``"blame"`` (`measured`), ``"regime"`` (`in_regime`)."""
    return prose.render(TEMPLATE, piece, n=numbers)
