"""Is the learner noise-limited? The batch-size study (issue 39; notebook 06, section 10), read by
its pre-registered rule over every seed set it was run on (issue 48): GRPO at several prompts per
step, each batch size against the smallest paired by seed, and the credit methods measured at the
smallest batch placed on that curve (`regime.batch_equivalent`: the batch size each is worth).
The words are ``batch.md.j2``'s.

A *world* is the ``batch_size.json`` entries run with the same settings (model, optimizer,
learning rate, batch sizes, steps, target); each entry is one seed set of it, named
``"<world>: <label>"`` (an entry without a label is the pre-registered set). A ``regimes.json``
entry is a credit set of a world's seed set when its GRPO runs are that set's smallest-batch runs
(the same per-seed accuracies on its seeds): the credit methods at the smallest batch. Every set
enters the pooled reading; the pooled reading comes first, each set beside it.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

from ...attribution import PLAIN_GRPO
from .. import regime
from . import positive, prose, seeds

BATCH = "batch_size.json"
"""Issue 39's mechanism test: GRPO at 2, 4 and 8 prompts per step, one entry per world, optimizer and seed set."""
PRE_REGISTERED = "pre-registered"
"""The label of an entry named without one: the seeds the study's rule was written for."""
TEMPLATE = "batch.md.j2"


def _read(name: str) -> dict:
    return json.loads((regime.RESULTS_DIR / name).read_text())


def world_key(entry: dict) -> tuple:
    """What makes two ``batch_size.json`` entries seed sets of one world: every setting but the seeds
    (the model by its folder's name: the runs' folders differ between machines)."""
    s = {k: v for k, v in entry["settings"].items() if k != "seeds_asked"}
    s["model"] = Path(s["model"]).name
    return tuple(sorted((k, json.dumps(v)) for k, v in s.items())) + (("prompts", tuple(entry["table"]["prompts"])),)


def set_label(name: str) -> str:
    """``"plain toy, adamw: external replication, seeds 601-605"`` -> ``"external replication"`` (the
    seeds are printed beside every label, so a trailing ``", seeds ..."`` is dropped); a name without a
    label is the pre-registered set."""
    return re.sub(r", seeds [\d, -]+$", "", name.split(": ", 1)[1]) if ": " in name else PRE_REGISTERED


def _per_seed(entry: dict) -> dict[int, dict]:
    """``{seed: {prompts: {"area", "steps", "per_completion"}}}`` of one sweep entry."""
    t = entry["table"]
    by = lambda lists, order: dict(zip(order, lists))
    out: dict[int, dict] = {}
    for p in t["prompts"]:
        label = f"{p} prompts"
        area = by(t["area"]["methods"][label]["area"], t["area"]["seeds"])
        steps = by(t["steps"]["methods"][label]["steps"], t["steps"]["seeds"])
        per = by(t["per_completion"]["rows"][label]["area"], t["seeds"])
        for s in t["seeds"]:
            out.setdefault(s, {})[p] = {"area": area[s], "steps": steps[s], "per_completion": per[s]}
    return out


def _rows(per_seed: dict[int, dict], sizes: list[int], budget: int, n_boot: int) -> dict[int, dict]:
    """Each batch size against the smallest, over the seeds of ``per_seed`` (one set or several)."""
    order = sorted(per_seed)
    col = lambda p, key: [per_seed[s][p][key] for s in order]
    ref = sizes[0]
    rows = {}
    for p in sizes:
        r = seeds.paired(col(ref, "area"), col(p, "area"), col(ref, "steps"), col(p, "steps"), n_boot=n_boot)
        pc = seeds.paired(col(ref, "per_completion"), col(p, "per_completion"), n_boot=n_boot)
        rows[p] = {"mean": float(np.mean(col(p, "area"))), "diff": r["diff"], "diff_ci": r["diff_ci"],
                   "steps": r["steps"], "reached": sum(x <= budget for x in col(p, "steps")), "speedup": r["speedup"],
                   "speedup_ci": r["speedup_ci"], "per_completion": pc["diff"], "per_completion_ci": pc["diff_ci"]}
    return rows


def credit_sets(world_sets: list[dict], regimes: dict) -> list[dict]:
    """The ``regimes.json`` entries whose GRPO runs are a seed set's smallest-batch runs: the same
    per-seed mean accuracy on every one of their seeds. ``[{"label", "name", "seeds", "entry"}]``,
    labelled as the seed set they share."""
    found = []
    for name, e in regimes.items():
        area = e.get("area", {})
        if PLAIN_GRPO not in area.get("methods", {}) or "uniform" not in e.get("reused", {}).get("methods", []):
            continue
        mine = dict(zip(area["seeds"], area["methods"][PLAIN_GRPO]["area"]))
        for st in world_sets:
            ref = {s: st["per_seed"][s][st["sizes"][0]]["area"] for s in st["per_seed"]}
            if set(mine) <= set(ref) and all(abs(mine[s] - ref[s]) < 1e-12 for s in mine):
                found.append({"label": st["label"], "name": name, "seeds": sorted(mine), "entry": e})
    return found


def _marks(credit: list[dict], n_boot: int) -> dict[str, dict]:
    """Each credit method against GRPO at the smallest batch, pooled over ``credit``'s entries, with
    each entry's own reading (``"sets"``)."""
    methods = [m for m in credit[0]["entry"]["area"]["methods"] if m != PLAIN_GRPO] if credit else []
    out = {}
    for m in methods:
        parts = [c for c in credit if m in c["entry"]["area"]["methods"]]
        col = lambda c, k: c["entry"]["area"]["methods"][k]["area"]
        ref = [x for c in parts for x in col(c, PLAIN_GRPO)]
        mine = [x for c in parts for x in col(c, m)]
        pooled = seeds.paired(ref, mine, n_boot=n_boot)
        pooled_seeds = [s for c in parts for s in c["entry"]["area"]["seeds"]]
        out[m] = {**pooled, "seeds": pooled_seeds,
                  "sets": [{"label": c["label"], "seeds": c["seeds"],
                            **seeds.paired(col(c, PLAIN_GRPO), col(c, m), n_boot=n_boot)} for c in parts]}
        if len(pooled_seeds) >= 3:
            out[m]["without_extreme"] = seeds.without_extreme(pooled, pooled_seeds, n_boot=n_boot)
    return out


def worlds(batches: dict | None = None, regimes: dict | None = None, control: dict | None = None, *,
           n_boot: int = 10_000) -> list[dict] | None:
    """The batch-size study, one reading per world, pooled over its seed sets (None before any sweep).

    The learner is *noise-limited* when a bigger batch's mean-accuracy difference over the smallest
    has a 95% interval above 0 (benchmarks/RESULTS.md, "Issue 39"), read on the pooled seeds
    (``noise_limited``) and on each set (``sets[i]["noise_limited"]``). Credit methods are placed on
    the pooled curve: in the plain toy the `credit_sets` of the world, pooled the same way; in a
    k-scratch world the oracle pooled over every seed set of the positive control (`positive.pooled`),
    both only on a curve of the optimizer they trained with (AdamW).

    Returns:
        one dict per world: ``{"world", "optimizer", "learning_rate", "seeds", "target", "budget",
        "rows": {prompts: {"mean", "diff", "diff_ci", "steps", "reached", "speedup", "speedup_ci",
        "per_completion", "per_completion_ci"}}, "noise_limited", "sets": [{"label", "name", "seeds",
        "rows", "noise_limited"}], "marks": {method: {"diff", "diff_ci", "diffs", "seeds", "worth",
        "worth_ci", "sets": [...], "without_extreme"?}}}``.
    """
    try:
        batches = _read(BATCH) if batches is None else batches
    except FileNotFoundError:
        return None
    regimes = _read("regimes.json") if regimes is None else regimes
    control = _read(positive.POSITIVE) if control is None else control
    grouped: dict[tuple, list[tuple[str, dict]]] = {}
    for name, e in batches.items():
        grouped.setdefault(world_key(e), []).append((name, e))
    out = []
    for entries in grouped.values():
        first = entries[0][1]
        s, sizes = first["settings"], sorted(first["table"]["prompts"])
        budget = s["steps"]
        sets = [{"label": set_label(n), "name": n, "seeds": sorted(e["table"]["seeds"]), "sizes": sizes,
                 "per_seed": _per_seed(e)} for n, e in entries]
        seeds.disjoint(sets)
        pooled_seed = {k: v for st in sets for k, v in st["per_seed"].items()}
        rows = _rows(pooled_seed, sizes, budget, n_boot)
        limited = lambda rs: any(prose.reads(rs[p]["diff_ci"]) == "above" for p in sizes[1:])
        model = Path(s["model"]).name
        k = int(model.removeprefix("scratch")) if model.startswith("scratch") else 0
        optimizer = s.get("optimizer", "adamw")
        marks: dict[str, dict] = {}
        if k and optimizer == "adamw":  # the positive control trained with AdamW
            p = positive.pooled(control, k)
            if p is not None:
                o = p["pooled"]["methods"][positive.RELEVANT]
                marks["oracle-relevant"] = {**o, "seeds": p["pooled"]["seeds"], "sets": []}
        elif not k:
            credit = credit_sets(sets, regimes)
            if credit and all(c["entry"]["settings"].get("optimizer", "adamw") == optimizer for c in credit):
                marks = _marks(credit, n_boot)
        diffs = {p: rows[p]["diff"] for p in sizes}
        for mark in marks.values():
            mark["worth"] = regime.batch_equivalent(diffs, mark["diff"])
            mark["worth_ci"] = [regime.batch_equivalent(diffs, x) for x in mark["diff_ci"]]
        set_rows = []
        for st in sets:
            r = rows if len(sets) == 1 else _rows(st["per_seed"], sizes, budget, n_boot)
            set_rows.append({"label": st["label"], "name": st["name"], "seeds": st["seeds"], "rows": r,
                             "noise_limited": limited(r)})
        out.append({"world": f"k = {k}" if k else "plain toy", "optimizer": optimizer,
                    "learning_rate": s.get("learning_rate"), "seeds": sorted(pooled_seed), "target": s["target"],
                    "budget": first["table"]["per_completion"]["budget"], "rows": rows,
                    "noise_limited": limited(rows), "sets": set_rows, "marks": marks})
    return out or None


def table(found: list[dict]) -> str:
    """`worlds` as one markdown table: per world, the pooled rows first, then each seed set's."""
    return prose.render(TEMPLATE, "table", worlds=found)


def conclusion(found: list[dict] | None = None) -> str:
    """The batch-size study in words, for a teacher to read aloud (notebook 06, section 10)."""
    return prose.render(TEMPLATE, "conclusion", worlds=worlds() if found is None else found)


def sentence(found: list[dict] | None = None) -> str:
    """The batch-size study in one bullet (the README), or ``""`` when no world is noise-limited."""
    return prose.render(TEMPLATE, "sentence", worlds=worlds() if found is None else found)
