"""Does credit make learning faster? The regimes tried (notebook 06, section 6): GRPO against the
oracle in each set of runs of ``regimes.json`` (`benchmarks/credit_regime.py`), the confirmatory
run with its targets and per-seed differences, OAR's screen and the controls. The regimes table
and every count the notebook's conclusion states about it come from one list of rows (`rows`,
`tally`), so the table and the sentence beside it cannot disagree. The words are ``regimes.md.j2``'s.
"""
from __future__ import annotations

import json

import numpy as np

from .. import regime, stats
from . import prose

CONFIRM = "small batch, 30 steps: GRPO vs oracle, 10 seeds"
"""The confirmatory regime: settings and seeds fixed before its runs (benchmarks/RESULTS.md)."""
CONTROLS = "controls at 30 steps: inverted and shuffled oracle, 10 seeds"
OAR_SCREEN = "small batch, 30 steps: OAR, 3 seeds"
TEMPLATE = "regimes.md.j2"


def _read() -> dict:
    return json.loads((regime.RESULTS_DIR / "regimes.json").read_text())


def rows(regimes: dict | None = None) -> list[dict]:
    """One row per set of runs that trained the oracle itself (`regime.oracle_regimes`), in the
    file's order: ``{"name", "note", "prompts", "group_size", "steps", "target", "seeds", "grpo",
    "oracle" (steps: ``{"mean", "ci"}``), "speedup", "speedup_ci", "diff"`` (mean accuracy, oracle -
    GRPO: ``{"diff", "diff_ci"}`` or None), ``"screen"`` (fewer than `stats.SCREEN_SEEDS` seeds),
    ``"pays"`` (`regime.pays` on its own seeds) and ``"superseded_by"`` (a later set with the same
    settings and more seeds, `regime.superseded`, or None)}``."""
    regimes = _read() if regimes is None else regimes
    out = []
    for name in regime.oracle_regimes(regimes):
        e = regimes[name]
        t, s = e["table"], e["settings"]
        g, o = t["methods"]["uniform"], t["methods"]["oracle"]
        a = e.get("area", {}).get("methods", {}).get("oracle")
        out.append({"name": name, "note": e["note"], "prompts": s["prompts_per_step"], "group_size": s["group_size"],
                    "steps": s["steps"], "target": t["target"], "seeds": len(t["seeds"]),
                    "grpo": {"mean": g["mean"], "ci": list(g["ci"])}, "oracle": {"mean": o["mean"], "ci": list(o["ci"])},
                    "speedup": o["speedup"], "speedup_ci": list(o["speedup_ci"]),
                    "diff": None if a is None else {"diff": a["diff"], "diff_ci": list(a["diff_ci"])},
                    "screen": stats.is_screen(len(t["seeds"])), "pays": regime.pays(t), "bar": regime.PAYS_SPEEDUP,
                    "superseded_by": regime.superseded(name, regimes)})
    return out


def tally(table_rows: list[dict]) -> dict:
    """The counts the prose states about the regimes table: ``{"sets", "screens", "paid"}`` (the
    rows that met the bar on their own seeds, screens excluded), ``"unconfirmed"`` (those a later
    set with more seeds did not confirm) and ``"confirmed"`` (those that stand), as lists of rows."""
    paid = [r for r in table_rows if r["pays"] and not r["screen"]]
    return {"sets": len(table_rows), "screens": sum(r["screen"] for r in table_rows), "paid": paid,
            "unconfirmed": [r for r in paid if r["superseded_by"]],
            "confirmed": [r for r in paid if not r["superseded_by"]],
            "bar": regime.PAYS_SPEEDUP, "screen_seeds": stats.SCREEN_SEEDS}


def confirmatory(regimes: dict | None = None) -> dict:
    """The confirmatory regime read every way section 6 shows it: steps to each target (the
    pre-registered one and 0.05 either side), the mean held-out accuracy over the run per seed,
    OAR's screen and the controls at the same setting."""
    regimes = _read() if regimes is None else regimes
    full = regimes[CONFIRM]
    t = full["table"]
    targets = dict(sorted({f"{t['target']:g}": t, **full["other_targets"]}.items()))
    area = full["area"]["methods"]
    diffs = np.array(area["oracle"]["area"]) - np.array(area["uniform"]["area"])

    def methods(name: str, keep) -> dict | None:
        e = regimes.get(name)
        if e is None:
            return None
        tab, ar = e["table"]["methods"], e.get("area", {}).get("methods", {})
        return {"name": name, "seeds": len(e["table"]["seeds"]), "steps": e["settings"]["steps"],
                "screen": stats.is_screen(len(e["table"]["seeds"])), "target": e["table"]["target"],
                "grpo_steps": tab["uniform"]["mean"], "oracle_steps": tab["oracle"]["mean"],
                "methods": {k: {**{f: v[f] for f in ("mean", "ci", "speedup", "recovered", "recovered_ci", "reached")},
                                "area": None if k not in ar else {f: ar[k][f] for f in ("diff", "diff_ci", "recovered",
                                                                                        "recovered_ci")}}
                            for k, v in tab.items() if keep(k)}}

    return {"command": full["command"], "seeds": len(t["seeds"]), "steps": full["settings"]["steps"],
            "target": t["target"],
            "targets": {k: {"grpo": tab["methods"]["uniform"], "oracle": tab["methods"]["oracle"]}
                        for k, tab in targets.items()},
            "grpo_steps": t["methods"]["uniform"]["mean"], "oracle": t["methods"]["oracle"],
            "area": {"diff": area["oracle"]["diff"], "diff_ci": list(area["oracle"]["diff_ci"])},
            "per_seed": {"diffs": diffs.tolist(), "above": int((diffs > 0).sum()), "n": len(diffs),
                         "median": float(np.median(diffs)), "lowest": float(diffs.min())},
            "oar": methods(OAR_SCREEN, lambda k: k.startswith("oar-")),
            "controls": methods(CONTROLS, lambda k: k.endswith(":oracle"))}


def text(piece: str, numbers) -> str:
    """A piece of section 6 in words: ``"table"`` (`rows`), ``"targets"``, ``"reading"``,
    ``"methods"`` or ``"controls"`` (`confirmatory`), ``"tally"`` (`tally`)."""
    return prose.render(TEMPLATE, piece, n=numbers)
