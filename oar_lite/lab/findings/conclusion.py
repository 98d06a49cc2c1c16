"""What notebook 06 found, read aloud (section 11), and the README's toy-world bullets: every number
they state is taken from the readings the notebook's own tables render (`regimes.rows` for the
regimes table, `noise.shares` for section 8's, `positive.findings` for section 9's, `batch.worlds`
for section 10's), so the conclusion and the tables beside it are one source. The words are
``conclusion.md.j2``'s.
"""
from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

from .. import ground_truth, regime
from . import batch, gradient, noise, positive, prose, regimes

UNIFORMITY_PATH = Path(str(resources.files("oar_lite.lab") / "data" / "weight_uniformity.json"))
"""How uniform OAR's weights are in training (`benchmarks/weight_uniformity.py`)."""
TEMPLATE = "conclusion.md.j2"


def uniformity(data: dict | None = None) -> dict | None:
    """``weight_uniformity.json`` read: ``{"command", "rows": [{"setting", "method", "completions",
    "tau_quantiles", "tau_zero_share", "at_floor", "effective_share"}], "by_setting": {setting: rows},
    "flat", "peaked", "most_zero"}``:
    the settings whose every method keeps an effective share of at least 0.8 (``flat``) or none does
    (``peaked``), and the row with the largest share of completions at tau = 0. None when not shipped."""
    if data is None:
        if not UNIFORMITY_PATH.is_file():
            return None
        data = json.loads(UNIFORMITY_PATH.read_text())
    rows = [{"setting": setting, "method": m, **{k: e[k] for k in ("completions", "tau_quantiles", "tau_zero_share",
                                                                  "at_floor", "effective_share")}}
            for setting, methods in data["results"].items() for m, e in methods.items() if e.get("completions")]
    by = {}
    for r in rows:
        by.setdefault(r["setting"], []).append(r["effective_share"])
    return {"command": data["command"], "rows": rows,
            "by_setting": {k: [r for r in rows if r["setting"] == k] for k in by},
            "flat": [k for k, xs in by.items() if min(xs) >= 0.8],
            "peaked": [k for k, xs in by.items() if max(xs) < 0.8],
            "most_zero": max(rows, key=lambda r: r["tau_zero_share"]) if rows else None}


def numbers() -> dict:
    """Every reading the conclusion states, from the shipped files: ``gradient`` (`gradient.measured`),
    ``regime_gradient`` (`gradient.in_regime`), ``regimes`` (`regimes.tally` of the regimes table's
    rows), ``confirm`` (`regimes.confirmatory`), ``noise`` (`noise.shares`), ``positive``
    (`positive.findings`), ``batch`` (`batch.worlds`), ``auc`` (the ground-truth table:
    ``{method: {"mean", "ci95", "n"}}``) and ``uniformity``."""
    auc = ground_truth.ground_truth_table()
    return {"gradient": gradient.measured(), "regime_gradient": gradient.in_regime(),
            "regimes": regimes.tally(regimes.rows()), "confirm": regimes.confirmatory(), "noise": noise.shares(),
            "positive": positive.findings(), "batch": batch.worlds(),
            "auc": {k: {"mean": v["auc_mean"], "ci95": v["auc_ci95"], "n": v["auc_n"]} for k, v in auc.items()},
            "uniformity": uniformity(), "bar": regime.PAYS_SPEEDUP}


def text(piece: str, found: dict | None = None) -> str:
    """A piece in words: ``"uniformity"`` (its table), ``"conclusion"`` (section 11, read aloud),
    ``"readme"`` (the README's toy-world bullets)."""
    found = numbers() if found is None else found
    return prose.render(TEMPLATE, piece, n=found)
