"""What the series found, in words, from the shipped measurements only: the numbers of the
credit notebook (06) and of the SmolLM2 runs (07), gathered in one place (`credit_findings`,
`learning_findings`) and written out as the prose a teacher can read aloud
(`credit_conclusion`, `learning_conclusion`) and as the README's "What we measured" block
(`readme_summary`; ``python -m oar_lite.lab.findings --write-readme`` rewrites it, and a test fails
when the README and the shipped data disagree). Nothing here trains or samples: it reads
``oar_lite/lab/data``, so a number in the prose changes only when the data does.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import torch

from ..attribution import LIBRARY_METHODS, PLAIN_GRPO, display_name
from ..settings import parser
from . import ground_truth, lora_learning, regime, stats
from .report import markdown_table
from .stats import ABOVE, BELOW, INCLUDES, bootstrap_interval, rank_agreement

CONFIRM = "small batch, 30 steps: GRPO vs oracle, 10 seeds"
"""The confirmatory regime: settings and seeds fixed before its runs (benchmarks/RESULTS.md)."""
CONTROLS = "controls at 30 steps: inverted and shuffled oracle, 10 seeds"
OAR_SCREEN = "small batch, 30 steps: OAR, 3 seeds"
ORACLE = "oracle (0.1 elsewhere)"
"""The oracle weighting of the gradient-quality files (`oar_lite.course.oracle`, 0.1 off the wrong tokens)."""
SPEEDUP_WORDS = {ABOVE: "an interval above 1: faster than GRPO", BELOW: "an interval below 1: slower than GRPO",
                 INCLUDES: "an interval that includes 1: not distinguishable from GRPO's pace"}
"""A speed-up's reading by the one verdict rule (`stats.versus` against 1), in words."""
UNIFORMITY_PATH = Path(__file__).resolve().parent / "data" / "weight_uniformity.json"
README_MARKERS = ("<!-- findings:start -->", "<!-- findings:end -->")


def _read(name: str) -> dict:
    return json.loads((regime.RESULTS_DIR / name).read_text())


def _ci(pair, fmt: str) -> str:
    return f"{pair[0]:{fmt}} to {pair[1]:{fmt}}"


def _reads(interval, no_effect: float = 0.0) -> str:
    """Where a 95% interval over seeds lies, by the one verdict rule (`stats.versus`): `ABOVE`,
    `BELOW` or `INCLUDES` ``no_effect`` (0 for a difference, 1 for a speed-up). A change dict
    (``{"low", "high", ...}``, `lora_learning`) is read by its ``low`` and ``high``."""
    if isinstance(interval, dict):
        interval = (interval["low"], interval["high"])
    return stats.versus(interval, no_effect=no_effect)


def credit_findings() -> dict:
    """The credit notebook's numbers, from ``oar_lite/lab/data/when_credit_matters`` and the
    SmolLM2 ground truth: SNR gains (8 x 8 and the 2 x 4 regime), blame shares, the
    confirmatory learning run, its controls, OAR's screen, the regimes tried, the noise
    share credit can remove, the ground-truth AUCs and (when shipped) how uniform OAR's
    weights are in training. Plain floats, JSON-ready."""
    gq, gq_regime = _read("gradient_quality.json"), _read("gradient_quality_regime.json")
    regimes, shares = _read("regimes.json"), _read("noise_share.json")
    st, sr = gq["stats"], gq_regime["stats"]
    snr = lambda stats, k: stats[k]["snr"] / stats["uniform"]["snr"] - 1
    confirm, controls = regimes[CONFIRM], regimes[CONTROLS]
    t, area = confirm["table"]["methods"], confirm["area"]["methods"]
    tried = regime.oracle_regimes(regimes)
    met = [n for n in tried if not stats.is_screen(len(regimes[n]["table"]["seeds"]))
           and regime.pays(regimes[n]["table"]) and not regime.superseded(n, regimes)]
    toy_shares = {k: e["components"]["shares"]["irrelevant"] for k, e in shares.items() if e["kind"] == "toy"
                  and e["settings"].get("model") == "shipped"}
    smol_share = next(e["completion"] for e in shares.values() if e["kind"] == "smollm2"
                      and e["settings"].get("threshold", ground_truth.PIVOT_THRESHOLD) == ground_truth.PIVOT_THRESHOLD)
    auc = ground_truth.ground_truth_table()
    out = {
        "snr_8x8": {k: snr(st, k) for k in (ORACLE, "OAR-P answer_mean", "OAR-G answer_mean",
                                             "shuffled " + ORACLE, "inverted " + ORACLE)},
        "snr_regime": {k: snr(sr, k) for k in (ORACLE, "OAR-P answer_mean", "OAR-G answer_mean")},
        "snr_regime_ci": {k: [x - 1 for x in gq_regime["snr_vs_uniform_ci"][k]]
                          for k in (ORACLE, "OAR-P answer_mean", "OAR-G answer_mean")},
        "regime_batch": f"{gq_regime['settings']['prompts']} x {gq_regime['settings']['group_size']}",
        "blame": {k: gq["blame"][k]["share"] for k in ("uniform", ORACLE, "OAR-P answer_mean", "OAR-G answer_mean")},
        "confirm": {"seeds": len(confirm["table"]["seeds"]), "steps": confirm["settings"]["steps"],
                    "target": confirm["table"]["target"], "grpo_steps": t["uniform"]["mean"],
                    "oracle_steps": t["oracle"]["mean"], "speedup": t["oracle"]["speedup"],
                    "speedup_ci": list(t["oracle"]["speedup_ci"]),
                    "speedup_reads": _reads(t["oracle"]["speedup_ci"], 1.0),
                    "accuracy_diff": area["oracle"]["diff"], "accuracy_diff_ci": list(area["oracle"]["diff_ci"]),
                    "pays": regime.pays(confirm["table"])},
        "controls": {k: {"diff": e["diff"], "diff_ci": list(e["diff_ci"]),
                         "speedup": controls["table"]["methods"][k]["speedup"]}
                     for k, e in controls["area"]["methods"].items() if k.endswith(":oracle")},
        "oar_screen": {k: {"speedup": e["speedup"], "diff": regimes[OAR_SCREEN]["area"]["methods"][k]["diff"]}
                       for k, e in regimes[OAR_SCREEN]["table"]["methods"].items() if k.startswith("oar-")},
        "regimes_tried": len(tried), "regimes_paid": met,
        "noise_share_toy": [min(toy_shares.values()), max(toy_shares.values())],
        "noise_share_smollm2": smol_share["share"], "noise_share_smollm2_ci": list(smol_share["share_ci"]),
        "auc": {k: {"mean": v["auc_mean"], "ci95": v["auc_ci95"], "n": v["auc_n"]} for k, v in auc.items()},
    }
    out["positive"] = positive_findings()
    if UNIFORMITY_PATH.is_file():
        out["uniformity"] = {setting: {m: {k: e[k] for k in ("effective_share", "tau_zero_share", "at_floor", "weight_std")}
                                       for m, e in methods.items() if e.get("completions")}
                             for setting, methods in json.loads(UNIFORMITY_PATH.read_text())["results"].items()}
    return out


def credit_conclusion(f: dict | None = None) -> str:
    """`credit_findings` as paragraphs of markdown (notebook 06's conclusion)."""
    f = credit_findings() if f is None else f
    c, s8, sr, ci = f["confirm"], f["snr_8x8"], f["snr_regime"], f["snr_regime_ci"]
    inv, shu = f["controls"]["inverted:oracle"], f["controls"]["shuffled:oracle"]
    a = f["auc"]
    paras = [
        "**Credit acts on the noise of the gradient, and there was little noise for it to remove.** GRPO's uniform "
        "credit is already unbiased; better credit can only make each step's gradient less noisy. With large batches "
        f"(8 prompts x 8 completions) the oracle, which knows the wrong token of every wrong answer, raised the "
        f"gradient's signal-to-noise ratio by {s8[ORACLE]:+.0%}, and misplaced credit lowered it (shuffled "
        f"{s8['shuffled ' + ORACLE]:+.0%}, inverted {s8['inverted ' + ORACLE]:+.0%}). But in the small-batch regime "
        f"({f['regime_batch']}) where learning speed was measured, the oracle's gain was {sr[ORACLE]:+.0%} "
        f"(95% interval {_ci(ci[ORACLE], '+.0%')}): indistinguishable from none. Section 8 says why: only "
        f"{f['noise_share_toy'][0]:.0%}-{f['noise_share_toy'][1]:.0%} of a batch gradient's variance comes from "
        "tokens the reward does not depend on, the only part credit can remove without bias. The rest comes from "
        "which prompts were drawn and which digits were sampled, and no credit reaches it.",
        f"**So even perfect credit did not learn faster.** In the confirmatory run ({c['seeds']} seeds, settings fixed "
        f"before it ran) the oracle reached held-out accuracy {c['target']:g} in {c['oracle_steps']:.1f} steps against "
        f"GRPO's {c['grpo_steps']:.1f} ({c['speedup']:.2f}x, 95% interval {_ci(c['speedup_ci'], '.2f')}x, "
        f"{SPEEDUP_WORDS[c['speedup_reads']]}), and its mean held-out accuracy over the run "
        f"differed from GRPO's by {c['accuracy_diff']:+.3f} ({_ci(c['accuracy_diff_ci'], '+.3f')}). Of "
        f"{f['regimes_tried']} regimes tried, "
        + (f"{len(f['regimes_paid'])} met the project's bar ({', '.join(f['regimes_paid'])})"
           if f["regimes_paid"] else "none met the project's bar")
        + f" (>= {regime.PAYS_SPEEDUP:g}x fewer steps, the speed-up's interval above 1, >= {stats.SCREEN_SEEDS} seeds). The setup "
        f"can see harm: the inverted oracle lowered mean accuracy by {inv['diff']:+.3f} "
        f"({_ci(inv['diff_ci'], '+.3f')}), an interval "
        + ("below 0" if _reads(inv["diff_ci"]) == BELOW else "that includes 0")
        + f"; the shuffled oracle moved it by {shu['diff']:+.3f} ({_ci(shu['diff_ci'], '+.3f')}).",
        "**OAR measures influence, not blame.** OAR asks how much the answer *depends on* a token; the oracle asks "
        f"which token *caused* the mistake. On wrong answers OAR-P put {f['blame']['OAR-P answer_mean']:.1%} and OAR-G "
        f"{f['blame']['OAR-G answer_mean']:.1%} of the advantage on the wrong tokens, close to uniform credit's "
        f"{f['blame']['uniform']:.1%} and far from the oracle's {f['blame'][ORACLE]:.1%}: the answer depends on every "
        "result digit, right or wrong. On a real model the two are even anti-aligned: against SmolLM2's Monte-Carlo "
        "ground truth (where P(correct) jumps), OAR-P ranks the pivotal tokens "
        f"{'below' if a['oar-p:last']['mean'] + a['oar-p:last']['ci95'] < 0.5 else 'near'} chance (AUC "
        f"{a['oar-p:last']['mean']:.2f} ± {a['oar-p:last']['ci95']:.2f}, n = {a['oar-p:last']['n']}), OAR-G at "
        f"{a['oar-g:answer_mean']['mean']:.2f} ± {a['oar-g:answer_mean']['ci95']:.2f}, and the model's own entropy "
        f"does best ({a['entropy']['mean']:.2f} ± {a['entropy']['ci95']:.2f}): the decisive tokens come before the "
        "digits the answer copies. SmolLM2 does carry removable noise (tokens that barely move P(correct) hold "
        f"{f['noise_share_smollm2']:.0%} of its completions' noise, 95% interval "
        f"{_ci(f['noise_share_smollm2_ci'], '.0%')}), but OAR does not point at those tokens.",
    ]
    u = f.get("uniformity")
    if u:
        share = {setting: [v["effective_share"] for v in ms.values()] for setting, ms in u.items()}
        flat = [k for k, xs in share.items() if min(xs) >= 0.8]
        peaked = [k for k, xs in share.items() if max(xs) < 0.8]
        zero = {(k, m): v["tau_zero_share"] for k, ms in u.items() for m, v in ms.items()}
        most = max(zero, key=zero.get)
        paras.append(
            "**How far from uniform are OAR's weights in training?** The effective share of the tokens, "
            "(sum w)^2 / (R sum w^2), is 1 for GRPO's equal weights and 1/R when one token takes everything. On real "
            "training batches: "
            + "; ".join(f"{k}: " + ", ".join(f"{m} {v['effective_share']:.2f}" for m, v in ms.items()) for k, ms in u.items())
            + ". "
            + (f"With {', '.join(flat)}'s settings the weights stay close to uniform; " if flat else "")
            + (f"with {', '.join(peaked)}'s (a larger boost) they are far from it, and learning was still no faster: the "
               "weights were concentrated, only not on the noise credit could remove. " if peaked else "")
            + f"`{most[1]}` ({most[0]}) gets tau = 0 on {zero[most]:.0%} of its completions: when a quarter or more "
            "of the tokens tie at the lowest score the threshold is that score, nothing is suppressed and the filler "
            "keeps about its GRPO weight (notebook 04's example).")
    paras.append(
        "**What this does not show.** These are short chains (tens of reasoning tokens), a toy model of under a "
        "million parameters and a 135M one: nothing here tests the long chains of thought and billion-parameter models "
        "where the OAR paper reports its gains, where many more tokens may not matter to the answer. "
        + positive_sentence(f.get("positive"))
        + " Entropy, which found the decisive tokens best here, is the baseline to beat.")
    return "\n\n".join(paras)


# ----------------------------------------------------------------------------- the positive control (issue 28)

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


def screen_name(k: int) -> str:
    return f"screen, k={k}"


def confirm_name(k: int) -> str:
    return f"confirm, k={k}"


def share_name(k: int) -> str:
    return f"k={k} world, 2x4"


def oar_weights_name(k: int) -> str:
    """The ``noise_share.json`` entry that weighs the same batches with OAR and the oracle."""
    return f"k={k} world, 2x4, OAR's weights"


def positive_sweep(control: dict | None = None, shares: dict | None = None) -> list[dict]:
    """One row per screened world, k ascending: the share of the gradient's variance carried
    by reward-irrelevant tokens (``noise_share.json``) beside the screen's learning result,
    GRPO against the oracle and its controls (``positive_control.json``). Worlds without a
    screen entry or a share are left out. Each row: ``k``, ``share``, ``share_ci``, ``seeds``,
    ``grpo_steps`` / ``oracle_steps`` (mean steps to the target) with ``*_ci``, ``speedup``,
    ``speedup_ci``, ``diff`` / ``diff_ci`` (mean held-out accuracy over the run, oracle - GRPO,
    paired by seed), ``controls`` (``{method: {"diff", "diff_ci", "speedup"}}``) and
    ``qualifies`` (the follow-up rule's test: `regime.pays` and a positive mean-accuracy difference)."""
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
            "share_ci": list(share["components"]["shares_ci"]["irrelevant"]),
            "seeds": list(entry["table"]["seeds"]), "target": entry["table"]["target"],
            "grpo_steps": g["mean"], "grpo_ci": list(g["ci"]), "oracle_steps": o["mean"], "oracle_ci": list(o["ci"]),
            "speedup": o["speedup"], "speedup_ci": list(o["speedup_ci"]),
            "diff": area[RELEVANT]["diff"], "diff_ci": list(area[RELEVANT]["diff_ci"]),
            "controls": {m: {"diff": area[m]["diff"], "diff_ci": list(area[m]["diff_ci"]), "speedup": t[m]["speedup"]}
                         for m in t if m not in ("uniform", RELEVANT)},
            "qualifies": regime.pays(entry["table"], RELEVANT) and area[RELEVANT]["diff"] > 0,
        })
    return rows


def confirmatory_world(sweep: list[dict]) -> dict:
    """The pre-registered follow-up rule: among the worlds whose screen `qualifies`, the one
    with the largest speed-up; if none does, the one with the largest measured share.
    ``{"k", "reason"}``."""
    if not sweep:
        raise ValueError("no screened world with a measured share: run the screens and benchmarks.noise_share first")
    qualified = [r for r in sweep if r["qualifies"]]
    if qualified:
        best = max(qualified, key=lambda r: r["speedup"])
        return {"k": best["k"], "reason": f"its screen met the bar with the largest speed-up ({best['speedup']:.2f}x)"}
    best = max(sweep, key=lambda r: r["share"])
    return {"k": best["k"], "reason": f"no screen met the bar; it has the largest share ({best['share']:.0%})"}


REPLICATION = "external replication, k=64, seeds 201-205"
"""Issue 39's replication of the k = 64 confirmatory run on fresh seeds, rerun here (benchmarks/RESULTS.md)."""
SEED_SETS = (("screen", screen_name), ("confirmatory", confirm_name), ("external replication", lambda k: REPLICATION))
"""The positive control's seed sets in one world, in the order they were run: ``(label, entry name of k)``."""
INVERTED = "inverted:" + RELEVANT


def positive_pooled(control: dict | None = None, k: int = 64, *, n_boot: int = 10_000) -> dict | None:
    """The oracle and its inversion against GRPO in world k, per seed set and pooled over all.

    Each set (`SEED_SETS`: the screen, the confirmatory run, the external replication) is a
    ``credit_regime`` entry of ``positive_control.json`` run with the same settings on other
    seeds, so its per-seed readings pool: the mean held-out accuracy over the run, method -
    GRPO paired by seed, and steps to the target (speed-up = GRPO's mean / the method's),
    95% bootstrap intervals over seeds (`stats.bootstrap_interval`). None when fewer than 2
    sets hold per-seed data. ValueError when two sets share a seed (they would count twice).

    Returns:
        ``{"k", "target", "sets": [{"label", "name", "seeds", "methods": {m: reading}}],
        "pooled": {"label": "pooled", "seeds", "methods": {m: reading}}}``, a reading being
        ``{"diffs" (per seed), "diff", "diff_ci", "steps", "grpo_steps", "speedup", "speedup_ci"}``,
        for `RELEVANT` and `INVERTED` where a set ran them.
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
        by_seed = lambda rows, seeds: dict(zip(seeds, rows))
        seeds = sorted(set(area["seeds"]) & set(table["seeds"]))
        rows = {m: {"area": by_seed(area["methods"][m]["area"], area["seeds"]),
                    "steps": by_seed(table["methods"][m]["steps"], table["seeds"])}
                for m in ("uniform", RELEVANT, INVERTED) if m in area["methods"] and m in table["methods"]}
        per_set.append({"label": label, "name": name(k), "seeds": seeds, "target": table["target"], "rows": rows})
    if len(per_set) < 2:
        return None
    seen: dict[int, str] = {}
    for st in per_set:
        for seed in st["seeds"]:
            if seed in seen:
                raise ValueError(f"seed {seed} is in both {seen[seed]!r} and {st['name']!r}: pooled seeds must differ")
            seen[seed] = st["name"]
    if len({st["target"] for st in per_set}) > 1:
        raise ValueError(f"the sets read different targets {[st['target'] for st in per_set]}; they do not pool")

    def reading(parts: list[dict], m: str) -> dict | None:
        if not all(m in st["rows"] for st in parts):
            return None
        pairs = np.array([[st["rows"]["uniform"]["area"][s], st["rows"][m]["area"][s],
                           st["rows"]["uniform"]["steps"][s], st["rows"][m]["steps"][s]]
                          for st in parts for s in st["seeds"]])  # [S, 4]
        diffs = pairs[:, 1] - pairs[:, 0]
        ratio = lambda p: p[:, 2].mean() / max(p[:, 3].mean(), 1e-9)
        return {"diffs": diffs.tolist(), "diff": float(diffs.mean()),
                "diff_ci": list(bootstrap_interval(np.mean, diffs[:, None], n=n_boot)),
                "steps": float(pairs[:, 3].mean()), "grpo_steps": float(pairs[:, 2].mean()),
                "speedup": float(ratio(pairs)), "speedup_ci": list(bootstrap_interval(ratio, pairs, n=n_boot))}

    sets = [{"label": st["label"], "name": st["name"], "seeds": st["seeds"],
             "methods": {m: r for m in (RELEVANT, INVERTED) if (r := reading([st], m)) is not None}} for st in per_set]
    pooled = {"label": "pooled", "seeds": sorted(seen),
              "methods": {m: r for m in (RELEVANT, INVERTED) if (r := reading(per_set, m)) is not None}}
    return {"k": k, "target": per_set[0]["target"], "sets": sets, "pooled": pooled}


def _seed_span(seeds: list[int]) -> str:
    """Sorted seeds with runs of 3 or more consecutive ones written as ranges: "0-14, 201-205"."""
    runs: list[list[int]] = []
    for s in seeds:
        if runs and s == runs[-1][-1] + 1:
            runs[-1].append(s)
        else:
            runs.append([s])
    return ", ".join(f"{r[0]}-{r[-1]}" if len(r) >= 3 else ", ".join(map(str, r)) for r in runs)


def pooled_table(p: dict) -> str:
    """`positive_pooled` as a markdown table, the pooled row first."""
    rows = []
    for st in (p["pooled"], *p["sets"]):
        o, inv = st["methods"].get(RELEVANT), st["methods"].get(INVERTED)
        rows.append([st["label"], f"{_seed_span(st['seeds'])} ({len(st['seeds'])})",
                     "-" if o is None else f"{o['diff']:+.3f} ({_ci(o['diff_ci'], '+.3f')})",
                     "-" if inv is None else f"{inv['diff']:+.3f} ({_ci(inv['diff_ci'], '+.3f')})",
                     "-" if o is None else f"{o['grpo_steps']:.1f} / {o['steps']:.1f}",
                     "-" if o is None else f"{o['speedup']:.2f}x ({_ci(o['speedup_ci'], '.2f')})"])
    return "\n".join(markdown_table(
        ["seeds", "seeds (n)", "mean acc., oracle - GRPO (95% CI)", "inverted - GRPO (95% CI)",
         f"steps to {p['target']:g}, GRPO / oracle", "oracle speed-up (95% CI)"], rows))


def pooled_sentence(p: dict) -> str:
    """`positive_pooled` in words: the pooled estimate first, then each set, then claims 1 and 2
    read again (a set's claim is replicated only when the replication's own interval shows it)."""
    o, inv = p["pooled"]["methods"][RELEVANT], p["pooled"]["methods"].get(INVERTED)
    n = len(p["pooled"]["seeds"])
    text = (f"Pooled over all {n} seeds run in the k = {p['k']} world, the oracle's mean held-out accuracy differed from "
            f"GRPO's by {o['diff']:+.3f} ({_ci(o['diff_ci'], '+.3f')}), "
            + {ABOVE: "a gain", INCLUDES: "an interval that includes 0", BELOW: "a loss"}[_reads(o["diff_ci"])]
            + f", and it reached {p['target']:g} {o['speedup']:.2f}x as fast ({_ci(o['speedup_ci'], '.2f')})")
    if inv is not None:
        text += (f"; the inverted oracle by {inv['diff']:+.3f} ({_ci(inv['diff_ci'], '+.3f')}), "
                 + ("below 0" if _reads(inv["diff_ci"]) == BELOW else "an interval that includes 0"))
    text += ". Per seed set (mean accuracy, oracle - GRPO): " + "; ".join(
        f"{st['label']} (seeds {_seed_span(st['seeds'])}) {st['methods'][RELEVANT]['diff']:+.3f} "
        f"({_ci(st['methods'][RELEVANT]['diff_ci'], '+.3f')})" for st in p["sets"] if RELEVANT in st["methods"]) + "."
    rep = next((st for st in p["sets"] if st["label"] == "external replication"), None)
    if rep is not None and RELEVANT in rep["methods"]:
        ro, rinv = rep["methods"][RELEVANT], rep["methods"].get(INVERTED)
        text += (" The confirmatory run's gain " + ("replicated" if _reads(ro["diff_ci"]) == ABOVE else "did not replicate")
                 + f" on the external replication's seeds ({ro['diff']:+.3f}, {_ci(ro['diff_ci'], '+.3f')})")
        if rinv is not None:
            harmed, gained = _reads(rinv["diff_ci"]) == BELOW, _reads(ro["diff_ci"]) == ABOVE
            text += (", nor did the inverted oracle's harm" if not harmed and not gained else
                     ", and the inverted oracle's harm did not either" if not harmed else
                     ", and the inverted oracle's harm did") + f" ({rinv['diff']:+.3f}, {_ci(rinv['diff_ci'], '+.3f')})"
        text += ("; so claims 1 and 2 of the confirmatory run (an oracle gain, an inverted-oracle harm) are "
                 + ("not replicated" if _reads(ro["diff_ci"]) != ABOVE and (rinv is None or _reads(rinv["diff_ci"]) != BELOW)
                    else "replicated in part" if _reads(ro["diff_ci"]) != ABOVE or (rinv is not None and _reads(rinv["diff_ci"]) != BELOW)
                    else "replicated")
                 + (f", and the oracle's gain in this world is too small to measure with {n} seeds."
                    if _reads(o["diff_ci"]) == INCLUDES else "."))
    return text


def positive_findings(control: dict | None = None, shares: dict | None = None) -> dict | None:
    """The positive control's numbers: the sweep (`positive_sweep`), the world the follow-up
    rule picks, the rank correlation of the oracle's speed-up with the share across worlds
    (NaN when either does not vary), and the confirmatory run when it is shipped (steps,
    speed-up, mean-accuracy differences and OAR's recovered fractions). None before any screen."""
    try:
        control = _read(POSITIVE) if control is None else control
    except FileNotFoundError:
        return None
    shares = _read("noise_share.json") if shares is None else shares
    sweep = positive_sweep(control, shares)
    if not sweep:
        return None
    pick = confirmatory_world(sweep)
    rho = (rank_agreement(torch.tensor([r["share"] for r in sweep]), torch.tensor([r["speedup"] for r in sweep]))
           if len(sweep) > 1 else float("nan"))
    out = {"sweep": sweep, "pick": pick, "spearman": rho, "confirm": None, "oar_weights": None}
    weighed = shares.get(oar_weights_name(pick["k"]))
    if weighed is not None and RELEVANT in weighed["snr_vs_uniform"]:
        gain, mass = weighed["snr_vs_uniform"], weighed.get("weight_mass", {})
        out["oar_weights"] = {m: {"snr_gain": gain[m], "snr_recovered": gain[m] / gain[RELEVANT] if gain[RELEVANT] else None,
                                  **{k: mass.get(m, {}).get(k) for k in ("irrelevant_mass", "effective_share")}}
                              for m in (RELEVANT, *sorted(k for k in gain if k.startswith("oar-")))}
        out["oar_weights"]["uniform"] = {k: mass.get("uniform", {}).get(k) for k in ("irrelevant_mass", "effective_share")}
    out["pooled"] = positive_pooled(control, pick["k"])
    out["stable"] = stable_reading(control)
    entry = control.get(confirm_name(pick["k"]))
    if entry is not None:
        t, area = entry["table"]["methods"], entry["area"]["methods"]
        out["confirm"] = {
            "k": pick["k"], "seeds": list(entry["table"]["seeds"]), "target": entry["table"]["target"],
            "methods": {m: {"steps": e["mean"], "ci": list(e["ci"]), "speedup": e["speedup"],
                            "speedup_ci": list(e["speedup_ci"]), "recovered": e["recovered"],
                            "recovered_ci": e["recovered_ci"] and list(e["recovered_ci"]),
                            "diff": area[m]["diff"], "diff_ci": list(area[m]["diff_ci"]),
                            "diff_recovered": area[m]["recovered"],
                            "diff_recovered_ci": area[m]["recovered_ci"] and list(area[m]["recovered_ci"])}
                        for m, e in t.items()},
            "pays": regime.pays(entry["table"], RELEVANT),
        }
        o = out["confirm"]["methods"][RELEVANT]
        # A gain to recover: the oracle's accuracy or speed-up interval clears no-change.
        out["confirm"]["gain_measured"] = _reads(o["diff_ci"]) == ABOVE or _reads(o["speedup_ci"], 1.0) == ABOVE
        recovered = [v["diff_recovered"] for m, v in out["confirm"]["methods"].items()
                     if m.startswith("oar-") and v["diff_recovered"] is not None]
        out["confirm"]["oar_best_recovered"] = max(recovered) if recovered and out["confirm"]["gain_measured"] else None
    return out


def positive_sentence(f: dict | None) -> str:
    """The positive control in two sentences (the credit conclusion's last paragraph, the README)."""
    if f is None:
        return ("A world where the removable share is large is built (`toy.chain_of_thought(scratch=k)`: k scratch "
                "words the answer never reads) and its sweep pre-registered in benchmarks/RESULTS.md, not yet run.")
    top = max(f["sweep"], key=lambda r: r["share"])
    c = f["confirm"]
    text = (f"The positive control (notebook 06, section 9) raised the removable share to {top['share']:.0%} "
            f"(k = {top['k']} scratch words the answer never reads)")
    if f.get("pooled") is not None:  # every seed set, the pooled estimate first (issue 39)
        return text + ". " + pooled_sentence(f["pooled"])
    if c is None:
        return text + (f"; on the screen the oracle's speed-up there was {top['speedup']:.2f}x "
                       f"({_ci(top['speedup_ci'], '.2f')}), the confirmatory run is not shipped yet.")
    o, inv = c["methods"][RELEVANT], c["methods"].get("inverted:" + RELEVANT)
    text += (f"; in its confirmatory run (k = {c['k']}, {len(c['seeds'])} seeds never screened) the oracle reached "
             f"{c['target']:g} {o['speedup']:.2f}x as fast as GRPO ({_ci(o['speedup_ci'], '.2f')}), mean accuracy "
             f"{o['diff']:+.3f} ({_ci(o['diff_ci'], '+.3f')})")
    if inv is not None:
        text += (f", while the inverted oracle {'hurt' if _reads(inv['diff_ci']) == BELOW else 'moved it by'} "
                 f"{inv['diff']:+.3f} ({_ci(inv['diff_ci'], '+.3f')})")
    if c["pays"]:
        return text + ". There, credit paid."
    best = c["oar_best_recovered"]
    if c["gain_measured"]:
        return text + (f". A real gain, seen on {len(c['seeds'])} seeds the screen never saw (its 5 seeds could not see it), "
                       f"but below the project's bar ({regime.PAYS_SPEEDUP:g}x with the speed-up's interval above 1) and far below the "
                       "ceiling section 8's bound allows."
                       + (f" OAR-P and OAR-G recovered at best {best:+.2f} of it (mean accuracy)." if best is not None else ""))
    return text + ". Section 8's bound makes a large share necessary for credit to pay; here it was not sufficient."


def positive_table(sweep: list[dict]) -> str:
    """`positive_sweep` as a markdown table (notebook 06, ``benchmarks/positive_control.py``)."""
    rows = []
    for r in sweep:
        c = r["controls"]
        rows.append([r["k"], f"{r['share']:.0%} ({_ci(r['share_ci'], '.0%')})", f"{1 / (1 - r['share']) - 1:+.0%}",
                     len(r["seeds"]), f"{r['grpo_steps']:.1f} ({_ci(r['grpo_ci'], '.1f')})",
                     f"{r['oracle_steps']:.1f} ({_ci(r['oracle_ci'], '.1f')})",
                     f"{r['speedup']:.2f}x ({_ci(r['speedup_ci'], '.2f')})", f"{r['diff']:+.3f} ({_ci(r['diff_ci'], '+.3f')})",
                     *(f"{c[m]['diff']:+.3f} ({_ci(c[m]['diff_ci'], '+.3f')})" if m in c else "-"
                       for m in ("inverted:" + RELEVANT, "shuffled:" + RELEVANT)),
                     "yes" if r["qualifies"] else "no"])
    return "\n".join(markdown_table(
        ["k", "irrelevant share (95% CI)", "SNR bound", "seeds", "GRPO steps", "oracle steps", "speed-up (95% CI)",
         "mean acc., oracle - GRPO", "inverted - GRPO", "shuffled - GRPO", "meets the rule"], rows))


STABLE = "stable-rule world (k=64, step 300), seeds 500-509"
"""Issue 39 item 2: the positive control on the model the stable-world rule keeps (``positive_control.json``)."""


def stable_reading(control: dict | None = None) -> dict | None:
    """The positive control on the stable-rule model (`STABLE`): GRPO's mean held-out accuracy over
    the run and the oracle's and the inverted oracle's differences from it, paired by seed, with
    their 95% intervals. None before it is shipped."""
    control = _read(POSITIVE) if control is None else control
    e = control.get(STABLE)
    if e is None:
        return None
    area = e["area"]["methods"]
    return {"seeds": list(e["table"]["seeds"]), "grpo": area["uniform"]["mean"],
            "methods": {m: {"diff": area[m]["diff"], "diff_ci": list(area[m]["diff_ci"])} for m in (RELEVANT, INVERTED)
                        if m in area}}


def stable_sentence(s: dict) -> str:
    """`stable_reading` in words (a new world, reported beside the pooled reading, not pooled with it)."""
    words = {ABOVE: "a gain", BELOW: "a loss", INCLUDES: "an interval that includes 0"}
    text = (f"**On the stable-rule model** (the k = 64 world's checkpoint the stable-world rule keeps, step 300, which "
            f"starts near the target: a new world, not another seed set; seeds {_seed_span(s['seeds'])}): GRPO's mean "
            f"held-out accuracy over the run was {s['grpo']:.3f}")
    for m, label in ((RELEVANT, "the oracle"), (INVERTED, "the inverted oracle")):
        if m in s["methods"]:
            r = s["methods"][m]
            text += f"; {label} {r['diff']:+.3f} ({_ci(r['diff_ci'], '+.3f')}), {words[_reads(r['diff_ci'])]}"
    return text + "."


def positive_conclusion(f: dict | None = None) -> str:
    """`positive_findings` in words (the credit notebook's positive-control section)."""
    f = positive_findings() if f is None else f
    if f is None:
        return "The positive control has not been run yet (benchmarks/RESULTS.md has its pre-registration)."
    sweep, pick = f["sweep"], f["pick"]
    worlds = "; ".join(f"k = {r['k']}: share {r['share']:.0%} ({_ci(r['share_ci'], '.0%')}), oracle {r['speedup']:.2f}x "
                       f"({_ci(r['speedup_ci'], '.2f')}), mean accuracy {r['diff']:+.3f} ({_ci(r['diff_ci'], '+.3f')})"
                       for r in sweep)
    rho = f["spearman"]
    grows = all(a["share"] < b["share"] for a, b in zip(sweep, sweep[1:]))
    follows = rho == rho and rho >= SPEARMAN_CLAIM - 1e-9
    paid = any(r["qualifies"] for r in sweep)
    head = (("The share grew with the scratch words" if grows else "The share did not grow steadily with the scratch words")
            + ("; so did the oracle's gain" if follows and paid else
               "; the oracle paid in some world, but its gain did not rank the worlds as the share does" if paid else
               "; on the screens the oracle's gain did not follow"))
    paras = [
        f"**{head}.** Screened on "
        f"{len(sweep[0]['seeds'])} seeds per world: {worlds}. "
        + ("No world's screen met the bar" if not any(r["qualifies"] for r in sweep)
           else "The screen met the bar at k = " + ", ".join(str(r["k"]) for r in sweep if r["qualifies"]))
        + f" (>= {regime.PAYS_SPEEDUP:g}x fewer steps with the speed-up's interval above 1 and a positive accuracy difference). "
        + ("The speed-up's rank correlation with the share cannot be computed: one of them did not vary across "
           "worlds." if rho != rho else
           f"The speed-up's rank correlation with the share across the worlds is {rho:+.2f} (the pre-registered "
           f"claim needs >= {SPEARMAN_CLAIM:g}: {'met' if follows else 'not met'}).")
        + f" The follow-up rule picked k = {pick['k']}: {pick['reason']}.",
    ]
    if f.get("pooled") is not None:
        paras.insert(0, "**Every seed set, pooled first.** " + pooled_sentence(f["pooled"]))
    if f.get("stable") is not None:
        paras.insert(1, stable_sentence(f["stable"]))
    c = f["confirm"]
    if c is not None:
        m, o = c["methods"], c["methods"][RELEVANT]
        g = m["uniform"]
        inv = m.get("inverted:" + RELEVANT)
        text = (f"**The confirmatory run** (k = {c['k']}, seeds {c['seeds'][0]}-{c['seeds'][-1]}, never screened): the "
                f"oracle reached {c['target']:g} in {o['steps']:.1f} steps ({_ci(o['ci'], '.1f')}) against GRPO's "
                f"{g['steps']:.1f} ({_ci(g['ci'], '.1f')}), {o['speedup']:.2f}x ({_ci(o['speedup_ci'], '.2f')}x); mean "
                f"accuracy {o['diff']:+.3f} ({_ci(o['diff_ci'], '+.3f')}). Claim 1 (>= {regime.PAYS_SPEEDUP:g}x, the "
                f"speed-up's interval above 1): {'met' if c['pays'] else 'not met'}.")
        if inv is not None:
            text += (f" The inverted oracle: mean accuracy {inv['diff']:+.3f} ({_ci(inv['diff_ci'], '+.3f')}); claim 2 "
                     f"(an interval below 0): {'met' if _reads(inv['diff_ci']) == BELOW else 'not met'}.")
        oar = {k: v for k, v in m.items() if k.startswith("oar-")}
        if oar and not c["gain_measured"]:
            text += (" OAR: " + "; ".join(f"{k} {v['diff']:+.3f} ({_ci(v['diff_ci'], '+.3f')})" for k, v in oar.items())
                     + "; the oracle's own gain has an interval that includes 0, so there is no gain for OAR to recover "
                     "and a recovered fraction would divide by noise.")
        elif oar:
            text += " OAR's share of the oracle's gain in mean accuracy: " + "; ".join(
                f"{k} {v['diff']:+.3f} ({_ci(v['diff_ci'], '+.3f')})"
                + ("" if v["diff_recovered"] is None else f", recovered {v['diff_recovered']:.2f}")
                for k, v in oar.items()) + "."
            best = c["oar_best_recovered"]
            if best is not None:
                text += f" Claim 4 (one of them recovers >= {RECOVERED_CLAIM:g}): {'met' if best >= RECOVERED_CLAIM else 'not met'}."
        paras.append(text)
    w = f.get("oar_weights")
    learned = None if c is None else c["oar_best_recovered"]
    if w:
        oar = [m for m in w if m.startswith("oar-")]
        mass = lambda m: "" if w[m].get("irrelevant_mass") is None else (f", {w[m]['irrelevant_mass']:.0%} of its weight mass on the irrelevant tokens, effective share "
                                                                   f"{w[m]['effective_share']:.2f}")
        paras.append(
            f"**Does OAR find the removable noise?** On the same batches of the k = {pick['k']} world, the oracle's weighting "
            f"raised the gradient's SNR by {w[RELEVANT]['snr_gain']:+.0%}{mass(RELEVANT)}; "
            + "; ".join(f"{m} by {w[m]['snr_gain']:+.0%} ({w[m]['snr_recovered']:.0%} of the oracle's gain){mass(m)}"
                        for m in oar)
            + ("" if w["uniform"].get("irrelevant_mass") is None else
               f" (uniform credit: {w['uniform']['irrelevant_mass']:.0%}, the irrelevant tokens' share of the tokens)")
            + "."
            + ("" if learned is None else
               f" So OAR's weights bought most of the oracle's SNR gain on the summed gradient and, at best, "
               f"{learned:+.2f} of its gain in learning: the SNR of the summed gradient did not set the learning speed here."
               if learned < RECOVERED_CLAIM else "")
            + (" OAR's influence scores do see that the scratch words do not move the answer; what is missing is the "
               "oracle's own gain in learning, so there is none for OAR to recover."
               if c is not None and not c["gain_measured"] else ""))
    return "\n\n".join(paras)


def learning_findings(log: dict | None = None) -> dict:
    """The SmolLM2 runs' numbers (`oar_lite.lab.lora_learning`): GRPO's held-out gain (greedy and
    T = 1; over every seed and over the seeds the screen never saw), each OAR method's gain and
    its paired difference from GRPO, the step cost and how uniform its weights were."""
    log = lora_learning.load_log() if log is None else log
    methods = sorted({r["method"] for r in log["runs"]}, key=list(LIBRARY_METHODS).index)
    grpo_seeds = [r["seed"] for r in lora_learning.runs_of(log, PLAIN_GRPO)]
    screened = [s for s in grpo_seeds if s in log.get("screened_seeds", [])]
    out = {"name": log["name"], "grpo": {d: lora_learning.heldout_change(log, PLAIN_GRPO, decoding=d) for d in ("greedy", "t1")},
           "steps": lora_learning.runs_of(log, PLAIN_GRPO)[0]["settings"]["steps"], "screened_seeds": screened}
    fresh = [s for s in grpo_seeds if s not in screened]
    if screened and fresh:
        out["grpo_unscreened"] = {d: lora_learning.heldout_change(log, PLAIN_GRPO, decoding=d, seeds=fresh)
                                  for d in ("greedy", "t1")}
    out["methods"] = {}
    for m in methods[1:]:
        curves = {k: lora_learning.metric_curve(log, m, k)["mean"] for k in ("oar/effective_share", "oar/frac_at_floor",
                                                                              "oar/tau_mean")}
        mean = lambda xs: float(sum(xs) / len(xs))  # metric_curve raises when a metric was never logged
        cost = lora_learning.cost_ratio(log, m)
        out["methods"][m] = {"gain": lora_learning.heldout_change(log, m),
                             "gains": {d: lora_learning.heldout_change(log, m, decoding=d) for d in DECODINGS},
                             "paired": {d: lora_learning.heldout_change(log, m, decoding=d, against=PLAIN_GRPO)
                                        for d in ("greedy", "t1")},
                             "cost": cost and cost["mean"], "cost_clock": cost and cost["clock"],
                             "cost_seeds": sorted(cost["per_seed"]) if cost else [],
                             "effective_share": mean(curves["oar/effective_share"]),
                             "at_floor": mean(curves["oar/frac_at_floor"]), "tau_mean": mean(curves["oar/tau_mean"])}
    if all("answered" in h for r in log["runs"] for h in r["heldout"]):
        out["decomposition"] = {m: lora_learning.format_decomposition(log, m, decoding="t1") for m in methods}
    if all("split" in r.get("settings", {}) and "trl_config" in r for r in log["runs"]):
        out["clean"] = clean_findings(log, methods)
        if "decomposition" in out:
            out["decomposition_clean"] = {m: lora_learning.format_decomposition(log, m, decoding="t1",
                                                                                problems=out["clean"]["problems"])
                                          for m in methods}
    return out


def clean_findings(log: dict, methods) -> dict:
    """The gains on the held-out problems no run can have learned under another name (issue 38):
    `lora_learning.clean_heldout`'s counts, and per decoding GRPO's gain and each method's own
    and paired gain on the problems whose numbers no run trained on (``"grpo"``, ``"methods"``),
    GRPO's gain on the rest, twins of trained prompts (``"twins"``), and the stricter reading,
    problems without a twin anywhere in the pool (``"strict"``)."""
    def gains(problems):
        return {"grpo": {d: lora_learning.heldout_change(log, PLAIN_GRPO, decoding=d, problems=problems) for d in DECODINGS},
                "methods": {m: {"gain": {d: lora_learning.heldout_change(log, m, decoding=d, problems=problems)
                                         for d in DECODINGS},
                                "paired": {d: lora_learning.heldout_change(log, m, decoding=d, against=PLAIN_GRPO,
                                                                           problems=problems) for d in DECODINGS}}
                            for m in methods[1:]}}

    trained, strict = lora_learning.clean_heldout(log, "trained"), lora_learning.clean_heldout(log, "pool")
    twins = [i for i in range(trained["heldout"]) if i not in set(trained["problems"])]
    out = {**trained, **gains(trained["problems"]), "strict": {"problems": strict["problems"], **gains(strict["problems"])}}
    if len(twins) >= 2:
        out["twins"] = {d: lora_learning.heldout_change(log, PLAIN_GRPO, decoding=d, problems=twins) for d in DECODINGS}
    return out


def _includes_zero(change: dict) -> bool:
    return _reads(change) == INCLUDES


DECODINGS = ("greedy", "t1")
"""The held-out decodings of the SmolLM2 runs: greedy (the pre-registered primary outcome) and one sample at T = 1."""

CLOCKS = {"cpu": "CPU", "wall": "wall-clock"}
"""How a step cost's clock is named in the prose (`lora_learning.step_seconds`' ``clock``)."""


def _cost_sentence(e: dict) -> str:
    """What one method's step cost against GRPO's was, and on which clock (or why it is not read here)."""
    if e["cost"] is None:
        return ("Its step cost is not read from these runs: none of them ran beside a GRPO run of its seed, so their "
                "wall-clock step times compare with nothing (benchmarks/RESULTS.md measures it in interleaved rounds). ")
    return f"A step took {e['cost']:.2f}x GRPO's " + (
        f"{CLOCKS['cpu']} seconds. " if e["cost_clock"] == "cpu" else
        f"time (TRL's {CLOCKS['wall']} step time, read on the pairs of runs that shared the machine at the same time: "
        f"seed{'s' if len(e['cost_seeds']) != 1 else ''} {', '.join(map(str, e['cost_seeds']))}). ")


def learning_conclusion(f: dict | None = None, positive: dict | None = None) -> str:
    """`learning_findings` as paragraphs of markdown (notebook 07's conclusion); its last
    paragraph recalls the toy's positive control (``positive``: `positive_findings`, default
    the shipped one), pooled over every seed set run."""
    f = learning_findings() if f is None else f
    positive = positive_findings() if positive is None else positive
    g, g1 = f["grpo"]["greedy"], f["grpo"]["t1"]
    d = lora_learning.describe
    u = f.get("grpo_unscreened")
    unscreened = lambda dec: ("" if u is None else f" (on the seeds the learning rate was not chosen on, "
                                                   f"{u[dec]['seeds']}: {d(u[dec])}, {_side(u[dec])})")
    paras = [
        ("**The pre-registered primary outcome, held-out greedy accuracy, "
         + {ABOVE: "rose.** ", BELOW: "fell.** ", INCLUDES: "did not measurably change.** "}[_reads(g)]
         + f"Over {f['steps']} GRPO steps it went from {g['start_accuracy']:.3f} to {g['end_accuracy']:.3f}: {d(g)}, "
         + _side(g) + unscreened("greedy") + ". "
         + (f"So in {f['steps']} steps the plan's primary outcome shows no measurable learning."
            if _reads(g) != ABOVE else "The model measurably learned, greedily, on held-out questions.")),
        ("**The secondary outcome, one answer at the training temperature, "
         + {ABOVE: "rose", BELOW: "fell", INCLUDES: "did not measurably change"}[_reads(g1)] + ".** "
         + f"From {g1['start_accuracy']:.3f} to {g1['end_accuracy']:.3f}: {d(g1)}, {_side(g1)}{unscreened('t1')}. "
         + ("Both intervals lie above 0: the model measurably learned on questions it never trained on. "
            if _reads(g) == ABOVE and _reads(g1) == ABOVE else
            "The policy's own samples measurably improved; its greedy answers did not measurably. "
            if _reads(g1) == ABOVE else "")
         + _decomposition_sentences(f))]
    if "clean" in f:
        paras.append(_clean_paragraph(f))
    for m, e in f["methods"].items():
        name = display_name(m)
        p, p1 = e["paired"]["greedy"], e["paired"]["t1"]
        paras.append(
            f"**{name} against GRPO, seed by seed.** {name}'s own greedy gain: {d(e['gain'])}. Minus GRPO's on the same seed "
            f"(same adapter initialisation, same prompts): greedy {d(p)}, at T = 1 {d(p1)}. "
            + ("Both intervals include 0: with these seeds and problems the two cannot be told apart, and a difference "
               f"as large as {max(abs(p['low']), abs(p['high'])):.2f} in held-out accuracy could still hide in them. "
               if _includes_zero(p) and _includes_zero(p1) else
               "An interval excludes 0: " + "; ".join(
                   f"{'greedy' if q is p else 'at T = 1'}, {name} gained {'more' if _reads(q) == ABOVE else 'less'} than GRPO"
                   for q in (p, p1) if not _includes_zero(q))
               + (f" (on {len(p['seeds'])} seeds; a result to confirm on more). " if stats.is_screen(len(p["seeds"])) else ". "))
            + _method_clean_sentence(f, m)
            + _cost_sentence(e)
            + f"Its weights {'stayed close to' if e['effective_share'] >= 0.8 else 'were far from'} uniform: an effective "
            f"share of {e['effective_share']:.2f} of the tokens (1 is GRPO), {e['at_floor']:.1%} of the reasoning tokens "
            "at the floor.")
    paras.append(
        "**What the series found, in one breath.** Credit assignment changes the noise of the gradient, not its "
        "direction; it can only pay where much of that noise sits on tokens the reward does not depend on and where the "
        "method can find them. In these worlds little did (toy), or the method did not find it (OAR on SmolLM2 scores "
        "influence, not blame), and GRPO with uniform credit learned as fast as anything tried, a real model included."
        + ("" if not positive or positive.get("pooled") is None else _positive_recap(positive["pooled"])))
    return "\n\n".join(paras)


def _side(change: dict) -> str:
    """Where an interval lies: ``"above 0"``, ``"below 0"`` or ``"an interval that includes 0"``."""
    return {ABOVE: "above 0", BELOW: "below 0", INCLUDES: "an interval that includes 0"}[_reads(change)]


def _ci3(e: dict) -> str:
    """``"+0.048 (95% interval +0.023 to +0.076)"`` of a ``{"mean" or "change", "low", "high"}``."""
    value = e["mean"] if "mean" in e else e["change"]
    return f"{value:+.3f} (95% interval {e['low']:+.3f} to {e['high']:+.3f})"


def _change(e: dict) -> str:
    """``"change +0.170, 95% interval +0.094 to +0.253"``: a change and its interval, inside parentheses."""
    return f"change {e['change']:+.3f}, 95% interval {e['low']:+.3f} to {e['high']:+.3f}"


def _split_sentence(x: dict) -> str:
    """One decomposition (`lora_learning.format_decomposition`) in words: the two parts of the gain."""
    return (f"{_ci3(x['from_format'])} from stating an answer more often and {_ci3(x['from_accuracy'])} from "
            "getting the sum right when one was stated")


def _decomposition_sentences(f: dict) -> str:
    """The T = 1 gain of GRPO split into format and accuracy given format, on every held-out
    problem and on those whose numbers no run trained on; what it says. Empty without ``answered``."""
    x = f.get("decomposition", {}).get(PLAIN_GRPO)
    if x is None:
        return ""
    fr, gf = x["format"], x["given_format"]
    text = ("A sampled answer is right only when it is stated in the asked-for format (`The answer is N`, within the "
            "completion's token cap) and its sum "
            "is right, so accuracy is the format rate times the accuracy given format. Over GRPO's runs the format rate "
            f"went from {fr['start']:.3f} to {fr['end']:.3f} ({_change(fr)}) and the accuracy given format from "
            f"{gf['start']:.3f} to {gf['end']:.3f} ({_change(gf)}): of the {x['accuracy']['change']:+.3f}, "
            f"{_split_sentence(x)}. ")
    c = f.get("decomposition_clean", {}).get(PLAIN_GRPO)
    if c is not None:
        text += (f"On the {c['problems']} held-out problems whose numbers no run trained on (below) the gain is "
                 f"{c['accuracy']['change']:+.3f}: {_split_sentence(c)}. ")
    last = c if c is not None else x
    where = "on the problems no run trained on" if c is not None else "here"
    ff, fa = last["from_format"], last["from_accuracy"]
    if _reads(fa) == ABOVE and _reads(ff) == ABOVE:
        text += (f"Both parts lie above 0 {where}: the model learned to state an answer and, "
                 + ("more, " if fa["mean"] > ff["mean"] else "less, ") + "to get its sum right.")
    elif _reads(ff) == ABOVE:
        text += (f"Only the format part lies above 0 {where}: what measurably improved is stating an answer at all; "
                 "better sums are not shown.")
    elif _reads(fa) == ABOVE:
        text += f"Only the accuracy part lies above 0 {where}: the sums improved, the format not measurably."
    else:
        text += f"Neither part lies above 0 {where}."
    return text


def _clean_paragraph(f: dict) -> str:
    """Issue 38: the held-out problems that kept a twin in the pool, the ones no run trained on,
    and whether the gains change there."""
    c, d = f["clean"], lora_learning.describe
    full = [("GRPO's gain, greedy", f["grpo"]["greedy"], c["grpo"]["greedy"]),
            ("GRPO's gain at T = 1", f["grpo"]["t1"], c["grpo"]["t1"])]
    for m, e in f["methods"].items():
        name = display_name(m)
        full += [(f"{name} - GRPO, greedy", e["paired"]["greedy"], c["methods"][m]["paired"]["greedy"]),
                 (f"{name} - GRPO at T = 1", e["paired"]["t1"], c["methods"][m]["paired"]["t1"])]
    moved = [(label, a, b) for label, a, b in full if _side(a) != _side(b)]
    text = ("**Held out by its numbers too.** These runs removed the held-out questions from the training pool by their "
            f"text (`heldout_split(by=\"question\")`), so {c['twins_in_pool']} of the {c['heldout']} held-out problems "
            "kept a twin in the pool: the same template and numbers under another name, the same sum. Each run's "
            "training prompts follow from its seed (TRL's sampler, rebuilt by `lora_learning.trained_indices` and checked "
            f"against a real trainer in the tests): the runs drew {c['prompts_drawn']} distinct prompts, twins of "
            f"{c['twins_trained']} held-out problems. On the {len(c['problems'])} held-out problems whose numbers no run "
            f"trained on, GRPO's gain is {d(c['grpo']['greedy'])} greedy and {d(c['grpo']['t1'])} at T = 1 (on all "
            f"{c['heldout']}: {f['grpo']['greedy']['mean']:+.3f} and {f['grpo']['t1']['mean']:+.3f})")
    if "twins" in c:
        text += (f"; on the {c['heldout'] - len(c['problems'])} whose twin was trained on, "
                 f"{c['twins']['greedy']['mean']:+.3f} greedy and {c['twins']['t1']['mean']:+.3f} at T = 1")
    text += ". "
    shifts = [b["mean"] - a["mean"] for _, a, b in full[:2]]
    if moved:
        text += ("**The gains change:** " + "; ".join(f"{label} is {_side(a)} on all problems but {_side(b)} on these"
                                                      for label, a, b in moved) + ". ")
    elif max(abs(x) for x in shifts) >= 0.02:
        text += ("**The gains change in size, not in sign:** every interval lies on the same side of 0 as on all "
                 f"problems, but GRPO's gain moves by {shifts[0]:+.3f} greedy and {shifts[1]:+.3f} at T = 1; part of "
                 "the full-set gain was answers trained on under another name. ")
    else:
        text += "The gains do not change: every interval lies on the same side of 0 as on all problems. "
    st = c["strict"]
    text += (f"The strictest reading, the {len(st['problems'])} held-out problems with no twin anywhere in the pool "
             f"(every twin counted as trained on): GRPO {d(st['grpo']['greedy'])} greedy and {d(st['grpo']['t1'])} at "
             f"T = 1 ({_side(st['grpo']['t1'])}). Runs from now on use `heldout_split`'s default, `by=\"numbers\"`: no "
             "held-out problem shares its template and numbers with a problem the pool can draw.")
    return text


def _method_clean_sentence(f: dict, m: str) -> str:
    """A method's paired difference on the problems no run trained on, and its T = 1 gain split."""
    text = ""
    if "clean" in f:
        c = f["clean"]["methods"][m]["paired"]
        text += (f"On the {c['greedy']['problems']} held-out problems no run trained on: greedy {c['greedy']['mean']:+.3f} "
                 f"({c['greedy']['low']:+.3f} to {c['greedy']['high']:+.3f}), at T = 1 {c['t1']['mean']:+.3f} "
                 f"({c['t1']['low']:+.3f} to {c['t1']['high']:+.3f}). ")
    x = f.get("decomposition", {}).get(m)
    if x is not None:
        text += f"Its own T = 1 gain, {x['accuracy']['change']:+.3f}: {_split_sentence(x)}. "
    return text


def _cell(e: dict) -> str:
    """``"+0.056 (-0.062 to +0.167)"``."""
    value = e["mean"] if "mean" in e else e["change"]
    return f"{value:+.3f} ({e['low']:+.3f} to {e['high']:+.3f})"


def learning_tables(f: dict | None = None) -> str:
    """Two markdown tables from `learning_findings` (notebook 07, benchmarks/RESULTS.md): the
    held-out gains on every problem, on those whose numbers no run trained on and on those
    without a twin in the pool (issue 38); and each method's T = 1 gain split into format and
    accuracy given format (issue 36), on every problem and on those no run trained on. Empty
    for a log without the needed records."""
    f = learning_findings() if f is None else f
    c, out = f.get("clean"), []
    names = LIBRARY_METHODS
    if c is not None:
        n, st = len(c["problems"]), c["strict"]
        header = ["", "decoding", f"all {c['heldout']} held-out problems", f"the {n} whose numbers no run trained on",
                  f"the {len(st['problems'])} without a twin in the pool"]
        rows = [[f"{names[PLAIN_GRPO]} gain", dec, _cell(f["grpo"][dec]), _cell(c["grpo"][dec]), _cell(st["grpo"][dec])]
                for dec in DECODINGS]
        for m, e in f["methods"].items():
            rows += [[f"{names.get(m, m)} gain", dec, _cell(e["gains"][dec]), _cell(c["methods"][m]["gain"][dec]),
                      _cell(st["methods"][m]["gain"][dec])] for dec in DECODINGS]
            rows += [[f"{names.get(m, m)} - {names[PLAIN_GRPO]}, paired", dec, _cell(e["paired"][dec]),
                      _cell(c["methods"][m]["paired"][dec]), _cell(st["methods"][m]["paired"][dec])] for dec in DECODINGS]
        out += ["Held-out accuracy gain from step 0 to the last step (mean over seeds; 95% crossed-bootstrap interval "
                "over seeds and problems):", "", *markdown_table(header, rows), ""]
    parts = [("all", f.get("decomposition")), ("no run trained on", f.get("decomposition_clean"))]
    rows = [[names.get(m, m), which, f"{x['problems']}", _cell(x["accuracy"]),
             f"{x['format']['start']:.3f} -> {x['format']['end']:.3f}", _cell(x["format"]),
             f"{x['given_format']['start']:.3f} -> {x['given_format']['end']:.3f}", _cell(x["given_format"]),
             _cell(x["from_format"]), _cell(x["from_accuracy"])]
            for which, part in parts if part for m, x in part.items()]
    if rows:
        header = ["method", "problems", "n", "T = 1 gain", "format rate", "change", "accuracy given format", "change",
                  "from format", "from accuracy given format"]
        out += ["The T = 1 gain = format part + accuracy part: (f1 - f0)(a0 + a1)/2 + (a1 - a0)(f0 + f1)/2, f the share "
                "of answers stated in the asked-for format, a the share right among them "
                "(`lora_learning.format_decomposition`; 95% crossed-bootstrap intervals):", "",
                *markdown_table(header, rows)]
    return "\n".join(out).rstrip("\n")


def _positive_recap(p: dict) -> str:
    """One sentence on the positive control, pooled over every seed set (notebook 07's last paragraph)."""
    o = p["pooled"]["methods"][RELEVANT]
    rep = next((st["methods"][RELEVANT] for st in p["sets"] if st["label"] == "external replication"), None)
    return (f" Even in the toy world built for credit to pay (notebook 06, section 9: k = {p['k']} scratch words, most of "
            f"the gradient's noise removable), perfect credit's gain over GRPO, pooled over all {len(p['pooled']['seeds'])} "
            f"seeds run, was {o['diff']:+.3f} in mean held-out accuracy ({_ci(o['diff_ci'], '+.3f')})"
            + (": too small to measure with these seeds" if _reads(o["diff_ci"]) == INCLUDES else "")
            + ("; the gain its confirmatory run reported did not replicate on fresh seeds."
               if rep is not None and _reads(rep["diff_ci"]) != ABOVE else "."))


BATCH = "batch_size.json"
"""Issue 39's mechanism test: GRPO at 2, 4 and 8 prompts per step, one entry per world and optimizer."""
BATCH_STUDY = "batch-size study: oracle, OAR-P, OAR-G, seeds 300-309"
"""The credit methods at the smallest batch on the batch sweep's seeds (``regimes.json``; issue 39, item 4)."""


def batch_findings(batches: dict | None = None, regimes: dict | None = None,
                   control: dict | None = None) -> list[dict] | None:
    """The batch-size study, read by its pre-registered rule (benchmarks/RESULTS.md, "Issue 39").

    Each ``batch_size.json`` entry is GRPO at several prompts per step in one world; per batch
    size: mean held-out accuracy over the run minus the smallest batch's (paired by seed, 95%
    interval), steps to the target and the speed-up, and the same difference per completion
    sampled. The learner is *noise-limited* when a bigger batch's accuracy difference has an
    interval above 0. Credit methods measured at the smallest batch are placed on the same
    curve (`regime.batch_equivalent`: the batch size each is worth): in the plain toy the runs of
    `BATCH_STUDY` (same seeds, same prompts as the sweep), in the k = 64 world the oracle's gain
    pooled over every seed set (`positive_pooled`). None before any sweep is shipped.

    Returns:
        one dict per entry: ``{"name", "world", "optimizer", "learning_rate", "seeds", "target",
        "rows": {prompts: {"mean", "diff", "diff_ci", "steps", "reached", "speedup", "speedup_ci",
        "per_completion", "per_completion_ci"}}, "budget", "noise_limited", "marks": {method:
        {"diff", "diff_ci", "seeds", "worth"}}}``.
    """
    try:
        batches = _read(BATCH) if batches is None else batches
    except FileNotFoundError:
        return None
    regimes = _read("regimes.json") if regimes is None else regimes
    control = _read(POSITIVE) if control is None else control
    out = []
    for name, e in batches.items():
        t, s = e["table"], e["settings"]
        sizes = sorted(t["prompts"])
        rows = {}
        for p in sizes:
            label = f"{p} prompts"
            a, st, pc = t["area"]["methods"][label], t["steps"]["methods"][label], t["per_completion"]["rows"][label]
            rows[p] = {"mean": a["mean"], "diff": a["diff"], "diff_ci": list(a["diff_ci"]), "steps": st["mean"],
                       "reached": st["reached"], "speedup": st["speedup"], "speedup_ci": list(st["speedup_ci"]),
                       "per_completion": pc["diff"], "per_completion_ci": list(pc["diff_ci"])}
        model = Path(s["model"]).name
        k = int(model.removeprefix("scratch")) if model.startswith("scratch") else 0
        marks = {}
        if k and s.get("optimizer", "adamw") == "adamw":  # the positive control trained with AdamW
            pooled = positive_pooled(control, k)
            if pooled is not None:
                o = pooled["pooled"]["methods"][RELEVANT]
                marks["oracle"] = {"diff": o["diff"], "diff_ci": o["diff_ci"], "seeds": pooled["pooled"]["seeds"]}
        elif BATCH_STUDY in regimes and s.get("optimizer") == regimes[BATCH_STUDY]["settings"].get("optimizer", "adamw"):
            area = regimes[BATCH_STUDY]["area"]
            marks = {m: {"diff": a["diff"], "diff_ci": list(a["diff_ci"]), "seeds": list(area["seeds"])}
                     for m, a in area["methods"].items() if m != PLAIN_GRPO}
        diffs = {p: rows[p]["diff"] for p in sizes}
        for mark in marks.values():
            mark["worth"] = regime.batch_equivalent(diffs, mark["diff"])
        out.append({"name": name, "world": f"k = {k}" if k else "plain toy", "optimizer": s.get("optimizer", "adamw"),
                    "learning_rate": s.get("learning_rate"), "seeds": list(t["seeds"]), "target": t["steps"]["target"],
                    "rows": rows, "budget": t["per_completion"]["budget"],
                    "noise_limited": any(_reads(rows[p]["diff_ci"]) == ABOVE for p in sizes[1:]), "marks": marks})
    return out or None


BATCH_LABELS = {"oracle": "the oracle", "oracle-relevant": "the oracle", "oar-p:answer_mean": "OAR-P",
                "oar-g:answer_mean": "OAR-G"}


def _worth(x: float) -> str:
    return "more than the largest batch measured" if x == float("inf") else f"{x:.1f} prompts per step"


def batch_table(f: list[dict]) -> str:
    """`batch_findings` as one markdown table: a row per world and batch size."""
    rows = []
    for b in f:
        ref = min(b["rows"])
        for p, r in b["rows"].items():
            rows.append([b["world"], b["optimizer"], len(b["seeds"]), p, f"{r['steps']:.1f}", f"{r['reached']}/{len(b['seeds'])}",
                         f"{r['speedup']:.2f}x ({_ci(r['speedup_ci'], '.2f')})", f"{r['mean']:.3f}",
                         "-" if p == ref else f"{r['diff']:+.3f} ({_ci(r['diff_ci'], '+.3f')})",
                         "-" if p == ref else f"{r['per_completion']:+.3f} ({_ci(r['per_completion_ci'], '+.3f')})"])
    return "\n".join(markdown_table(
        ["world", "optimizer", "seeds", "prompts per step", "steps to target", "reached", "speed-up per step (95% CI)",
         "mean acc.", "- smallest batch, per step (95% CI)", "- smallest batch, per completion (95% CI)"], rows))


def batch_conclusion(f: list[dict] | None = None) -> str:
    """The batch-size study in words, for a teacher to read aloud: is the learner noise-limited,
    and what batch size is perfect (and OAR's) credit worth? Each method's worth is read at its
    mean gain and at the ends of its interval (`regime.batch_equivalent`)."""
    f = batch_findings() if f is None else f
    if not f:
        return "The batch-size study (issue 39) is pre-registered in benchmarks/RESULTS.md and not yet run."
    out, priced = [], []
    for b in f:
        sizes = sorted(b["rows"])
        ref, two, big = sizes[0], sizes[1], sizes[-1]
        r2, rb = b["rows"][two], b["rows"][big]
        text = (f"**{b['world'].capitalize()}, {b['optimizer']}** ({len(b['seeds'])} seeds): going from {ref} to {two} prompts "
                f"per step changed mean held-out accuracy over the run by {r2['diff']:+.3f} ({_ci(r2['diff_ci'], '+.3f')}) "
                f"and reached {b['target']:g} {r2['speedup']:.2f}x as fast ({_ci(r2['speedup_ci'], '.2f')}); {big} prompts "
                f"changed it by {rb['diff']:+.3f} ({_ci(rb['diff_ci'], '+.3f')}). ")
        if b["noise_limited"]:
            text += ("So this learner **is noise-limited**: less gradient noise per step, which is all credit can give, "
                     "makes it learn faster. ")
        else:
            text += ("Neither interval is above 0, so this learner **is not noise-limited** at this scale: a bigger batch "
                     "removes more noise than any credit method can, and it did not measurably help. ")
        diffs = {p: b["rows"][p]["diff"] for p in sizes}
        marks = []
        for m, mark in b["marks"].items():
            low, high = (regime.batch_equivalent(diffs, x) for x in mark["diff_ci"])
            span = "" if low == high else f" (interval {_worth(low).removesuffix(' prompts per step')} to {_worth(high)})"
            marks.append(f"{BATCH_LABELS.get(m, m)} {mark['diff']:+.3f} ({_ci(mark['diff_ci'], '+.3f')}, {len(mark['seeds'])} "
                         f"seeds), " + ("worse than GRPO at the same batch" if _reads(mark["diff_ci"]) == BELOW else
                                       f"worth GRPO at {_worth(mark['worth'])}{span}"))
            if b["noise_limited"]:
                priced.append((b, high))
        if marks:
            text += f"At {ref} prompts per step credit changed mean accuracy by: " + "; ".join(marks) + "."
        out.append(text.rstrip())
    if priced:
        most = max(high for _, high in priced)
        worlds = sorted({b["world"] for b, _ in priced})
        out.append(
            f"**What it means.** Where the learner is noise-limited ({', '.join(worlds)}), a bigger batch buys learning, "
            f"yet the credit methods measured there are worth at most {_worth(most)} by the ends of their intervals. "
            + ("So the nulls of this notebook are not because the learner cannot use a cleaner gradient: the noise that "
               "slows it is not the noise credit removes. Credit removes only the variance of the tokens the reward does "
               "not depend on"
               + ("; where that share is small (the plain toy, section 8) there is little to remove" if any(
                   b["world"] == "plain toy" for b, _ in priced) else "")
               + ("; where it is most of the summed gradient's variance (the scratch-word world, section 9), it sits mostly "
                  "in the tied embedding, and an optimiser like Adam steps each parameter by its own noise: per parameter "
                  "the share is far smaller (benchmarks/RESULTS.md, \"The share at k = 64\")" if any(
                   b["world"] != "plain toy" for b, _ in priced) else "")
               + ". The rest, which problems and completions were drawn and how the reward fell on the tokens that decide "
               "it, only more samples remove."
               if most < min(sorted(b["rows"])[1] for b, _ in priced) else
               "Credit buys part of what a bigger batch buys here; the interval says how much."))
    return "\n\n".join(out)


def batch_sentence(f: list[dict] | None = None) -> str | None:
    """The batch-size study in one sentence (the README): the first noise-limited world with credit
    runs on its curve, or None when there is none."""
    f = batch_findings() if f is None else f
    b = next((b for b in f or [] if b["noise_limited"] and b["marks"]), None)
    if b is None:
        return None
    sizes = sorted(b["rows"])
    r = b["rows"][sizes[1]]
    diffs = {p: b["rows"][p]["diff"] for p in sizes}
    oracle = next((m for m in b["marks"] if m.startswith("oracle")), None)
    most = {m: regime.batch_equivalent(diffs, mark["diff_ci"][1]) for m, mark in b["marks"].items()}
    return (f"in the {b['world']} ({b['optimizer']}, {len(b['seeds'])} seeds) a bigger batch made GRPO learn faster ({sizes[0]} to "
            f"{sizes[1]} prompts per step: mean accuracy {r['diff']:+.3f}, {_ci(r['diff_ci'], '+.3f')}; {b['target']:g} "
            f"reached {r['speedup']:.2f}x as fast), while "
            + (f"perfect credit at {sizes[0]} prompts was worth at most {_worth(most[oracle])} and " if oracle else "")
            + f"the best credit method measured at most {_worth(max(most.values()))} (the ends of their intervals): "
            + ("the learner is limited by gradient noise, but not by the part credit can remove" if max(most.values()) < sizes[1]
               else "credit buys part of what a bigger batch buys") + " (notebook 06, section 10).")


def readme_summary(credit: dict | None = None, learning: dict | None = None) -> str:
    """The README's "What we measured" bullets, from `credit_findings` and `learning_findings`."""
    f = credit_findings() if credit is None else credit
    c, a = f["confirm"], f["auc"]
    inv = f["controls"]["inverted:oracle"]
    lines = [
        f"- **Does credit make GRPO learn faster? Not here, not even perfect credit** (toy world, notebook 06): "
        f"in the confirmatory run ({c['seeds']} seeds, 2 prompts x 4) the oracle reached {c['target']:g} held-out accuracy "
        f"{c['speedup']:.2f}x faster than GRPO (95% interval {_ci(c['speedup_ci'], '.2f')}), mean accuracy "
        f"{c['accuracy_diff']:+.3f} ({_ci(c['accuracy_diff_ci'], '+.3f')}); {f['regimes_tried']} regimes tried, "
        f"{len(f['regimes_paid'])} met the bar. "
        + (f"The inverted oracle hurt ({inv['diff']:+.3f}, {_ci(inv['diff_ci'], '+.3f')}), so the setup can see an effect."
           if _reads(inv["diff_ci"]) == BELOW else f"The inverted oracle did not measurably hurt ({inv['diff']:+.3f}, "
           f"{_ci(inv['diff_ci'], '+.3f')}): this setup may not see an effect of that size."),
        f"- **Why:** credit only removes the noise of tokens the reward does not depend on, "
        f"{f['noise_share_toy'][0]:.0%}-{f['noise_share_toy'][1]:.0%} of a toy batch gradient's variance; in the "
        f"learning regime's batches the oracle's SNR gain is {f['snr_regime'][ORACLE]:+.0%} "
        f"({_ci(f['snr_regime_ci'][ORACLE], '+.0%')}); at 8 x 8 it is {f['snr_8x8'][ORACLE]:+.0%}.",
        f"- **OAR measures influence, not blame:** on wrong answers OAR-P/OAR-G put "
        f"{f['blame']['OAR-P answer_mean']:.1%}/{f['blame']['OAR-G answer_mean']:.1%} of the advantage on the wrong tokens "
        f"(uniform {f['blame']['uniform']:.1%}, oracle {f['blame'][ORACLE]:.1%}); against SmolLM2's Monte-Carlo ground "
        f"truth OAR-P's AUC is {a['oar-p:last']['mean']:.2f} ± {a['oar-p:last']['ci95']:.2f}, entropy's "
        f"{a['entropy']['mean']:.2f} ± {a['entropy']['ci95']:.2f} (n = {a['entropy']['n']}).",
    ]
    if f.get("positive") is not None:
        lines.append("- **A world where credit must pay?** " + positive_sentence(f["positive"]))
    batch = batch_sentence()
    if batch is not None:
        lines.append("- **Is the learner noise-limited at all?** Yes: " + batch)
    try:
        lf = learning_findings() if learning is None else learning
    except FileNotFoundError:
        lf = None
    if lf is not None:
        g = lf["grpo"]["greedy"]
        g1 = lf["grpo"]["t1"]
        title = ("A real model learns" if _reads(g) == ABOVE else
                 "A real model: greedy answers did not measurably improve, sampled ones did" if _reads(g1) == ABOVE else
                 "A real model: no measurable learning in this budget")
        line = (f"- **{title}** (SmolLM2-135M-Instruct + LoRA through TRL, 2 CPU cores, notebook 07): in {lf['steps']} "
                f"GRPO steps held-out greedy accuracy, the pre-registered primary outcome, changed by "
                f"{lora_learning.describe(g)}; at the training temperature by {lora_learning.describe(g1)}")
        x = lf.get("decomposition", {}).get(PLAIN_GRPO)
        line += "." if x is None else (f", {x['from_format']['mean']:+.3f} of it from stating an answer at all and "
                                       f"{x['from_accuracy']['mean']:+.3f} from the sum when one was stated.")
        c = lf.get("clean")
        if c is not None:
            cx = lf.get("decomposition_clean", {}).get(PLAIN_GRPO)
            line += (f" On the {len(c['problems'])} of {c['heldout']} held-out problems whose numbers no run trained on: "
                     f"greedy {lora_learning.describe(c['grpo']['greedy'])}, T = 1 {lora_learning.describe(c['grpo']['t1'])}"
                     + ("." if cx is None else
                        f", {cx['from_format']['mean']:+.3f} of it from stating an answer and "
                        f"{cx['from_accuracy']['mean']:+.3f} (95% interval {cx['from_accuracy']['low']:+.3f} to "
                        f"{cx['from_accuracy']['high']:+.3f}) from the sums."))
        for m, e in lf["methods"].items():
            line += (f" {display_name(m)} - GRPO, paired by seed: "
                     f"{lora_learning.describe(e['paired']['greedy'])}"
                     + (f", at {e['cost']:.2f}x GRPO's {CLOCKS[e['cost_clock']]} "
                        "time per step." if e["cost"] is not None else
                        " (its step cost: benchmarks/RESULTS.md; these runs did not run beside GRPO's)."))
        lines.append(line)
    return "\n".join(lines)


def check_readme(path: Path) -> str | None:
    """None when the README's findings block equals `readme_summary`, else what differs."""
    text = path.read_text()
    start, end = README_MARKERS
    m = re.search(re.escape(start) + r"\n(.*?)\n" + re.escape(end), text, re.S)
    if m is None:
        return f"{path} has no block between {start} and {end}"
    want = readme_summary()
    return None if m.group(1) == want else f"README block:\n{m.group(1)}\n\nshipped data says:\n{want}"


def write_readme(path: Path) -> None:
    """Rewrite the README's findings block from the shipped data."""
    text = path.read_text()
    start, end = README_MARKERS
    if start not in text or end not in text:
        raise ValueError(f"{path} has no block between {start} and {end}")
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    path.write_text(f"{head}{start}\n{readme_summary()}\n{end}{tail}")


def main(argv=None) -> None:
    ap = parser("What the series found, from the shipped data.")
    ap.add_argument("--write-readme", type=Path, metavar="README", help="rewrite that README's findings block")
    ap.add_argument("--learning-tables", action="store_true",
                    help="print the SmolLM2 runs' tables (benchmarks/RESULTS.md, notebook 07)")
    args = ap.parse_args(argv)
    if args.learning_tables:
        print(learning_tables())
    elif args.write_readme:
        write_readme(args.write_readme)
        print(f"wrote the findings block of {args.write_readme}")
    else:
        print(credit_conclusion())
        print()
        print(readme_summary())


if __name__ == "__main__":
    main()
