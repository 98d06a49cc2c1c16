"""How much of a batch gradient's noise credit can remove (notebook 06, section 8): the share of
its variance carried by tokens the reward does not depend on (``noise_share.json``,
`benchmarks/noise_share.py`), per batch setting at the shipped toy model and per completion on
SmolLM2, with the SNR bound it sets on the best credit. The words are ``noise.md.j2``'s.
"""
from __future__ import annotations

import json

from .. import ground_truth, regime
from . import prose

TEMPLATE = "noise.md.j2"


def shares(data: dict | None = None) -> dict:
    """``{"toy": {setting: {"prompts", "completions", "irrelevant", "irrelevant_ci", "bound"}},
    "toy_range": [lowest, highest irrelevant share], "smollm2": {name: {"n", "units", "tokens",
    "irrelevant_tokens", "share", "share_ci", "bound"}}, "smollm2_share"`` (at the pivot threshold of
    section 7, with ``"smollm2_share_ci"``)}``; ``bound`` is section 8's SNR bound, 1 / (1 - share) - 1."""
    data = json.loads((regime.RESULTS_DIR / "noise_share.json").read_text()) if data is None else data
    toy = {}
    for k, e in data.items():
        if e["kind"] == "toy" and e["settings"].get("model") == "shipped":
            c = e["components"]
            s = c["shares"]["irrelevant"]
            toy[k] = {"prompts": c["shares"]["prompts"], "completions": c["shares"]["completions"], "irrelevant": s,
                      "irrelevant_ci": list(c["shares_ci"]["irrelevant"]), "bound": 1 / (1 - s) - 1}
    smol = {k: {"n": e["completion"]["n"], "units": e["completion"]["units"], "tokens": e["tokens"]["completion"],
                "irrelevant_tokens": e["tokens"]["irrelevant"], "share": e["completion"]["share"],
                "share_ci": list(e["completion"]["share_ci"]), "bound": 1 / (1 - e["completion"]["share"]) - 1,
                "threshold": e["settings"].get("threshold", ground_truth.PIVOT_THRESHOLD)}
            for k, e in data.items() if e["kind"] == "smollm2"}
    low = min(toy, key=lambda k: toy[k]["irrelevant"])
    high = max(toy, key=lambda k: toy[k]["irrelevant"])
    at_pivot = next(v for v in smol.values() if v["threshold"] == ground_truth.PIVOT_THRESHOLD)
    return {"toy": toy, "toy_range": [toy[low]["irrelevant"], toy[high]["irrelevant"]], "toy_low": low,
            "toy_high": high, "smollm2": smol, "smollm2_share": at_pivot["share"], "smollm2_share_ci": at_pivot["share_ci"]}


def text(piece: str, numbers: dict) -> str:
    """A piece of section 8 in words: ``"toy_table"``, ``"toy_reading"``, ``"smollm2"`` (`shares`)."""
    return prose.render(TEMPLATE, piece, n=numbers)
