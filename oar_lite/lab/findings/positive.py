"""The positive control (issue 28; notebook 06, section 9): worlds with k scratch words the answer
never reads, where most of a batch gradient's noise is removable, screened, one picked by a rule
written down before the runs, confirmed, and read again over every seed set run there (issue 39).
Numbers from ``positive_control.json`` and ``noise_share.json``; the words are ``positive.md.j2``'s.
"""
from __future__ import annotations

import json

import torch

from .. import regime
from ..stats import rank_agreement
from . import prose, seeds

POSITIVE = "positive_control.json"
"""The positive control's learning runs: entries ``screen, k=K`` and ``confirm, k=K`` of
``benchmarks/credit_regime.py`` (`oar_lite.lab.regime.RESULTS_DIR`)."""
WORLDS = (0, 16, 32, 64)
"""The scratch-word counts k of the pre-registered sweep (benchmarks/RESULTS.md)."""
SPEARMAN_CLAIM = 0.8
"""Pre-registered claim 3: the oracle's speed-up ranks the worlds as their shares do, Spearman >= this."""
RECOVERED_CLAIM = 0.5
"""Pre-registered claim 4 (issue 28's goal): OAR-P or OAR-G recovers at least this share of the oracle's gain."""
RELEVANT = "oracle-relevant"
"""The positive control's oracle: 1 on the tokens the reward depends on, 0 elsewhere (`oar_lite.course.oracle`)."""
INVERTED = "inverted:" + RELEVANT
REPLICATION = "external replication, k=64, seeds 201-205"
"""Issue 39's replication of the k = 64 confirmatory run on fresh seeds, rerun here (benchmarks/RESULTS.md)."""
STABLE = "stable-rule world (k=64, step 300), seeds 500-509"
"""Issue 39 item 2: the positive control on the model the stable-world rule keeps (a new world, not pooled)."""
TEMPLATE = "positive.md.j2"


def screen_name(k: int) -> str:
    return f"screen, k={k}"


def confirm_name(k: int) -> str:
    return f"confirm, k={k}"


def share_name(k: int) -> str:
    return f"k={k} world, 2x4"


def oar_weights_name(k: int) -> str:
    """The ``noise_share.json`` entry that weighs the same batches with OAR and the oracle."""
    return f"k={k} world, 2x4, OAR's weights"


SEED_SETS = (("screen", screen_name), ("confirmatory", confirm_name), ("external replication", lambda k: REPLICATION))
"""The positive control's seed sets in one world, in the order they were run: ``(label, entry name of k)``."""


def _read(name: str) -> dict:
    return json.loads((regime.RESULTS_DIR / name).read_text())


def sweep(control: dict | None = None, shares: dict | None = None) -> list[dict]:
    """One row per screened world, k ascending: the share of the gradient's variance carried by
    reward-irrelevant tokens (``noise_share.json``) beside the screen's learning result. Each row:
    ``k``, ``share``, ``share_ci``, ``seeds``, ``target``, ``grpo_steps`` / ``oracle_steps`` with
    ``*_ci``, ``speedup``, ``speedup_ci``, ``diff`` / ``diff_ci`` (mean held-out accuracy over the
    run, oracle - GRPO, paired by seed), ``controls`` (``{method: {"diff", "diff_ci", "speedup"}}``)
    and ``qualifies`` (the follow-up rule's test: `regime.pays` and a positive accuracy difference)."""
    control = _read(POSITIVE) if control is None else control
    shares = _read("noise_share.json") if shares is None else shares
    rows = []
    for k in WORLDS:
        entry, share = control.get(screen_name(k)), shares.get(share_name(k))
        if entry is None or share is None:
            continue
        t, area = entry["table"]["methods"], entry["area"]["methods"]
        g, o = t["uniform"], t[RELEVANT]
        rows.append({
            "k": k, "share": share["components"]["shares"]["irrelevant"],
            "snr_bound": 1 / (1 - share["components"]["shares"]["irrelevant"]) - 1,  # section 8's bound
            "share_ci": list(share["components"]["shares_ci"]["irrelevant"]),
            "seeds": list(entry["table"]["seeds"]), "target": entry["table"]["target"],
            "grpo_steps": g["mean"], "grpo_ci": list(g["ci"]), "oracle_steps": o["mean"], "oracle_ci": list(o["ci"]),
            "speedup": o["speedup"], "speedup_ci": list(o["speedup_ci"]),
            "diff": area[RELEVANT]["diff"], "diff_ci": list(area[RELEVANT]["diff_ci"]),
            "controls": {m: {"diff": area[m]["diff"], "diff_ci": list(area[m]["diff_ci"]), "speedup": t[m]["speedup"]}
                         for m in t if m not in ("uniform", RELEVANT)},
            "qualifies": regime.pays(entry["table"], RELEVANT) and area[RELEVANT]["diff"] > 0,
        })
        rows[-1].update(inverted=rows[-1]["controls"].get(INVERTED), shuffled=rows[-1]["controls"].get("shuffled:" + RELEVANT))
    return rows


def confirmatory_world(rows: list[dict]) -> dict:
    """The pre-registered follow-up rule: among the worlds whose screen `qualifies`, the one with the
    largest speed-up; if none does, the one with the largest measured share. ``{"k", "qualified",
    "speedup", "share"}`` (the reason is the template's)."""
    if not rows:
        raise ValueError("no screened world with a measured share: run the screens and benchmarks.noise_share first")
    qualified = [r for r in rows if r["qualifies"]]
    best = max(qualified, key=lambda r: r["speedup"]) if qualified else max(rows, key=lambda r: r["share"])
    return {"k": best["k"], "qualified": bool(qualified), "speedup": best["speedup"], "share": best["share"]}


def pooled(control: dict | None = None, k: int = 64, *, n_boot: int = 10_000) -> dict | None:
    """The oracle and its inversion against GRPO in world k, per seed set and pooled over all.

    Each set (`SEED_SETS`) is a ``credit_regime`` entry run with the same settings on other seeds,
    so its per-seed readings pool (`seeds.paired`: mean held-out accuracy over the run, method -
    GRPO, and the speed-up in steps to the target). None when fewer than 2 sets hold per-seed
    data; ValueError when two sets share a seed or read different targets.

    Returns:
        ``{"k", "target", "sets": [{"label", "name", "seeds", "methods": {m: reading}}],
        "pooled": {"label": "pooled", "seeds", "methods": {m: reading}}}`` for `RELEVANT` and `INVERTED`.
    """
    control = _read(POSITIVE) if control is None else control
    per_set = []
    for label, name in SEED_SETS:
        entry = control.get(name(k))
        if entry is None or "area" not in entry or "seeds" not in entry["area"]:
            continue
        area, table = entry["area"], entry["table"]
        if "area" not in area["methods"]["uniform"] or "steps" not in table["methods"]["uniform"]:
            continue
        by_seed = lambda rows, order: dict(zip(order, rows))
        common = sorted(set(area["seeds"]) & set(table["seeds"]))
        rows = {m: {"area": by_seed(area["methods"][m]["area"], area["seeds"]),
                    "steps": by_seed(table["methods"][m]["steps"], table["seeds"])}
                for m in ("uniform", RELEVANT, INVERTED) if m in area["methods"] and m in table["methods"]}
        per_set.append({"label": label, "name": name(k), "seeds": common, "target": table["target"], "rows": rows})
    if len(per_set) < 2:
        return None
    every = seeds.disjoint(per_set)
    if len({st["target"] for st in per_set}) > 1:
        raise ValueError(f"the sets read different targets {[st['target'] for st in per_set]}; they do not pool")

    def reading(parts: list[dict], m: str) -> dict | None:
        if not all(m in st["rows"] for st in parts):
            return None
        col = lambda method, key: [st["rows"][method][key][s] for st in parts for s in st["seeds"]]
        return seeds.paired(col("uniform", "area"), col(m, "area"), col("uniform", "steps"), col(m, "steps"),
                            n_boot=n_boot)

    def named(label: str, name: str, seed_list: list[int], parts: list[dict]) -> dict:
        methods = {m: r for m in (RELEVANT, INVERTED) if (r := reading(parts, m)) is not None}
        return {"label": label, "name": name, "seeds": seed_list, "methods": methods,
                "oracle": methods.get(RELEVANT), "inverted": methods.get(INVERTED)}

    return {"k": k, "target": per_set[0]["target"],
            "sets": [named(st["label"], st["name"], st["seeds"], [st]) for st in per_set],
            "pooled": named("pooled", "pooled", every, per_set)}


def stable(control: dict | None = None) -> dict | None:
    """The positive control on the stable-rule model (`STABLE`): GRPO's mean held-out accuracy over
    the run and the oracle's and the inverted oracle's differences, paired by seed. None before it is shipped."""
    control = _read(POSITIVE) if control is None else control
    e = control.get(STABLE)
    if e is None:
        return None
    area = e["area"]["methods"]
    reading = lambda m: {"diff": area[m]["diff"], "diff_ci": list(area[m]["diff_ci"])} if m in area else None
    return {"seeds": list(e["table"]["seeds"]), "grpo": area["uniform"]["mean"], "oracle": reading(RELEVANT),
            "inverted": reading(INVERTED)}


def findings(control: dict | None = None, shares: dict | None = None) -> dict | None:
    """Everything section 9 reads: the sweep, the world the follow-up rule picks, the rank
    correlation of the oracle's speed-up with the share (NaN when either does not vary), OAR's
    weights on the picked world's batches, the pooled reading, the stable-rule world and the
    confirmatory run (steps, speed-up, accuracy differences, OAR's recovered fractions). None
    before any screen."""
    try:
        control = _read(POSITIVE) if control is None else control
    except FileNotFoundError:
        return None
    shares = _read("noise_share.json") if shares is None else shares
    rows = sweep(control, shares)
    if not rows:
        return None
    pick = confirmatory_world(rows)
    rho = (rank_agreement(torch.tensor([r["share"] for r in rows]), torch.tensor([r["speedup"] for r in rows]))
           if len(rows) > 1 else float("nan"))
    out = {"sweep": rows, "pick": pick, "spearman": None if rho != rho else rho, "confirm": None,
           "oar_weights": None, "bar": regime.PAYS_SPEEDUP, "spearman_claim": SPEARMAN_CLAIM,
           "recovered_claim": RECOVERED_CLAIM}
    weighed = shares.get(oar_weights_name(pick["k"]))
    if weighed is not None and RELEVANT in weighed["snr_vs_uniform"]:
        gain, mass = weighed["snr_vs_uniform"], weighed.get("weight_mass", {})
        out["oar_weights"] = {m: {"snr_gain": gain[m], "snr_recovered": gain[m] / gain[RELEVANT] if gain[RELEVANT] else None,
                                  **{k: mass.get(m, {}).get(k) for k in ("irrelevant_mass", "effective_share")}}
                              for m in (RELEVANT, *sorted(k for k in gain if k.startswith("oar-")))}
        out["oar_weights"]["uniform"] = {k: mass.get("uniform", {}).get(k) for k in ("irrelevant_mass", "effective_share")}
        out["oar_weights"]["oracle"] = out["oar_weights"][RELEVANT]
    out["pooled"] = pooled(control, pick["k"])
    out["stable"] = stable(control)
    entry = control.get(confirm_name(pick["k"]))
    if entry is not None:
        t, area = entry["table"]["methods"], entry["area"]["methods"]
        c = {"k": pick["k"], "seeds": list(entry["table"]["seeds"]), "target": entry["table"]["target"],
             "methods": {m: {"steps": e["mean"], "ci": list(e["ci"]), "speedup": e["speedup"],
                             "speedup_ci": list(e["speedup_ci"]), "diff": area[m]["diff"],
                             "diff_ci": list(area[m]["diff_ci"]), "diff_recovered": area[m]["recovered"]}
                         for m, e in t.items()},
             "pays": regime.pays(entry["table"], RELEVANT)}
        o = c["oracle"] = c["methods"][RELEVANT]
        c["inverted"] = c["methods"].get(INVERTED)
        c["oar"] = {m: v for m, v in c["methods"].items() if m.startswith("oar-")}
        # A gain to recover: the oracle's accuracy or speed-up interval clears no-change.
        c["gain_measured"] = prose.reads(o["diff_ci"]) == "above" or prose.reads(o["speedup_ci"], 1.0) == "above"
        recovered = [v["diff_recovered"] for m, v in c["methods"].items()
                     if m.startswith("oar-") and v["diff_recovered"] is not None]
        c["oar_best_recovered"] = max(recovered) if recovered and c["gain_measured"] else None
        out["confirm"] = c
    return out


def table(rows: list[dict]) -> str:
    """`sweep` as a markdown table (notebook 06, ``benchmarks/positive_control.py``)."""
    return prose.render(TEMPLATE, "table", rows=rows)


def pooled_table(p: dict) -> str:
    """`pooled` as a markdown table, the pooled row first."""
    return prose.render(TEMPLATE, "pooled_table", p=p)


def pooled_sentence(p: dict) -> str:
    """`pooled` in words: the pooled estimate first (both readings: mean accuracy and steps to the
    target), then each set, then the confirmatory run's claims read again on the replication."""
    return prose.render(TEMPLATE, "pooled_sentence", p=p, bar=regime.PAYS_SPEEDUP)


def sentence(f: dict | None) -> str:
    """The positive control in a few sentences (the credit conclusion's last paragraph, the README)."""
    return prose.render(TEMPLATE, "sentence", f=f, bar=regime.PAYS_SPEEDUP)


def conclusion(f: dict | None = None) -> str:
    """`findings` in words (notebook 06, section 9)."""
    return prose.render(TEMPLATE, "conclusion", f=findings() if f is None else f, bar=regime.PAYS_SPEEDUP)
