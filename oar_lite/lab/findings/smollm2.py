"""The finale on a real model (notebook 07, the README): SmolLM2-135M-Instruct + LoRA through TRL,
GRPO against OAR on held-out word problems (`oar_lite.lab.lora_learning` reads the logs of
``benchmarks/smollm2_learning.py``). Two shipped studies: the pre-registered one on the split held
out by numbers (``clean.json``, issue 48; 8 seeds planned) and the earlier one on the old split
(``main.json``: problems held out by their wording, many with a same-numbers twin in the pool).
The results lead with the primary outcome of the study on the clean split once its log is
shipped, else with the old-split study's, labelled as such. The words are ``smollm2.md.j2``'s.
"""
from __future__ import annotations

from ...attribution import PLAIN_GRPO
from ...attribution import LIBRARY_METHODS, display_name
from .. import lora_learning, stats
from . import positive, prose

CLEAN = "clean"
"""The shipped log of the pre-registered study on the split held out by numbers (benchmarks/RESULTS.md,
"The finale with power ... pre-registration")."""
OLD = "main"
"""The shipped log of the study on the old split (held out by question text only)."""
PLANNED_SEEDS = 8
"""Seeds the pre-registration plans for the clean study (10-17)."""
MIN_SEEDS = 6
"""Below this many finished GRPO seeds the pre-registration does not read the primary outcome."""
AIMED_HALF_WIDTH = 0.10
"""The half-width of the primary outcome's 95% interval the pre-registration chose its seeds for."""
DECODINGS = ("greedy", "t1")
"""Greedy (the pre-registered primary outcome) and one sample at T = 1."""
CLOCKS = {"cpu": "CPU", "wall": "wall-clock"}
TEMPLATE = "smollm2.md.j2"


def split_of(log: dict) -> str:
    """``"numbers"`` when the runs held problems out by their numbers, else ``"question"`` (the old split)."""
    splits = {r.get("settings", {}).get("split", {}).get("by", "question") for r in log["runs"]}
    if len(splits) != 1:
        raise ValueError(f"the runs of log {log.get('name')!r} were split {len(splits)} ways: {sorted(splits)}")
    return splits.pop()


def study(log: dict) -> dict:
    """One study's numbers: GRPO's held-out gain (greedy and T = 1; over every seed and over the seeds
    the screen never saw), each OAR method's gain and its paired difference from GRPO, the step
    cost and how uniform its weights were, the T = 1 gain split into format and accuracy and, on
    the old split, the readings on the problems no run can have learned under another name (`twins`)."""
    methods = sorted({r["method"] for r in log["runs"]}, key=list(LIBRARY_METHODS).index)
    runs = lora_learning.runs_of(log, PLAIN_GRPO)
    screened = [r["seed"] for r in runs if r["seed"] in log.get("screened_seeds", [])]
    fresh = [r["seed"] for r in runs if r["seed"] not in screened]
    out = {"name": log["name"], "split": split_of(log), "steps": runs[0]["settings"]["steps"],
           "grpo": {d: lora_learning.heldout_change(log, PLAIN_GRPO, decoding=d) for d in DECODINGS},
           "screened_seeds": screened, "grpo_unscreened": None, "planned_seeds": PLANNED_SEEDS, "min_seeds": MIN_SEEDS,
           "aimed_half_width": AIMED_HALF_WIDTH}
    if screened and fresh:
        out["grpo_unscreened"] = {d: lora_learning.heldout_change(log, PLAIN_GRPO, decoding=d, seeds=fresh)
                                  for d in DECODINGS}
    out["methods"] = {}
    for m in methods[1:]:
        curves = {k: lora_learning.metric_curve(log, m, k)["mean"]
                  for k in ("oar/effective_share", "oar/frac_at_floor")}
        mean = lambda xs: float(sum(xs) / len(xs))
        cost = lora_learning.cost_ratio(log, m)
        out["methods"][m] = {"name": display_name(m),
                             "gains": {d: lora_learning.heldout_change(log, m, decoding=d) for d in DECODINGS},
                             "paired": {d: lora_learning.heldout_change(log, m, decoding=d, against=PLAIN_GRPO)
                                        for d in DECODINGS},
                             "cost": cost and cost["mean"], "clock": cost and CLOCKS[cost["clock"]],
                             "cost_seeds": sorted(cost["per_seed"]) if cost else [],
                             "effective_share": mean(curves["oar/effective_share"]),
                             "at_floor": mean(curves["oar/frac_at_floor"])}
        out["methods"][m]["screen"] = stats.is_screen(len(out["methods"][m]["paired"]["greedy"]["seeds"]))
    out["decomposition"] = ({m: lora_learning.format_decomposition(log, m, decoding="t1") for m in methods}
                            if all("answered" in h for r in log["runs"] for h in r["heldout"]) else None)
    out["twins"] = None
    if out["split"] == "question" and all("split" in r.get("settings", {}) and "trl_config" in r for r in log["runs"]):
        out["twins"] = twins(log, methods)
        if out["decomposition"] is not None:
            out["twins"]["decomposition"] = {m: lora_learning.format_decomposition(
                log, m, decoding="t1", problems=out["twins"]["problems"]) for m in methods}
    return out


def twins(log: dict, methods) -> dict:
    """The old split's held-out problems read apart (issue 38): `lora_learning.clean_heldout`'s
    counts and, per decoding, GRPO's gain and each method's own and paired gain on the problems
    whose numbers no run trained on, GRPO's gain on the rest (``"trained"``), and the strictest
    reading, problems without a twin anywhere in the pool (``"strict"``)."""
    def gains(problems):
        return {"grpo": {d: lora_learning.heldout_change(log, PLAIN_GRPO, decoding=d, problems=problems) for d in DECODINGS},
                "methods": {m: {"gains": {d: lora_learning.heldout_change(log, m, decoding=d, problems=problems)
                                          for d in DECODINGS},
                                "paired": {d: lora_learning.heldout_change(log, m, decoding=d, against=PLAIN_GRPO,
                                                                           problems=problems) for d in DECODINGS}}
                            for m in methods[1:]}}

    trained, strict = lora_learning.clean_heldout(log, "trained"), lora_learning.clean_heldout(log, "pool")
    others = [i for i in range(trained["heldout"]) if i not in set(trained["problems"])]
    out = {**trained, **gains(trained["problems"]), "strict": {"problems": strict["problems"], **gains(strict["problems"])}}
    out["trained"] = ({d: lora_learning.heldout_change(log, PLAIN_GRPO, decoding=d, problems=others) for d in DECODINGS}
                      if len(others) >= 2 else None)
    return out


def _load(name: str) -> dict | None:
    try:
        return lora_learning.load_log(name)
    except FileNotFoundError:
        return None


def logs() -> list[dict]:
    """The shipped studies' logs, the one the results lead with first: the clean split's (once
    shipped), then the old split's."""
    return [log for log in (_load(CLEAN), lora_learning.load_log(OLD)) if log is not None]


def finale(clean: dict | None = None, old: dict | None = None, control: dict | None = None) -> dict:
    """Both studies (the clean one only once shipped) and the toy's positive control pooled (the
    last paragraph): ``{"clean": study or None, "old": study, "lead": the study the results lead
    with, "positive": positive.pooled}``. ``clean`` / ``old``: logs (default: the shipped ones)."""
    clean = _load(CLEAN) if clean is None else clean
    old = lora_learning.load_log(OLD) if old is None else old
    return combine(study(old), None if clean is None else study(clean), positive.pooled(control))


def combine(old: dict, clean: dict | None = None, pooled: dict | None = None) -> dict:
    """`finale`'s dict from studies already read: the results lead with ``clean`` when there is one."""
    if clean is not None and clean["split"] != "numbers":
        raise ValueError(f"the clean study {clean['name']!r} was not split by numbers ({clean['split']!r})")
    return {"clean": clean, "old": old, "lead": old if clean is None else clean, "positive": pooled}


def text(piece: str, found: dict | None = None) -> str:
    """Notebook 07 in words: ``"results"`` (section 2: the lead, each study, the series in one
    breath), ``"tables"`` (the same numbers as tables, benchmarks/RESULTS.md), ``"takeaways"``,
    ``"readme"`` (the README's bullet), from `finale`."""
    return prose.render(TEMPLATE, piece, f=finale() if found is None else found)


def runs_table(log: dict) -> str:
    """One study's runs and settings (notebook 07, section 2)."""
    methods = sorted({r["method"] for r in log["runs"]}, key=list(LIBRARY_METHODS).index)
    seeds = {display_name(m): [r["seed"] for r in lora_learning.runs_of(log, m)] for m in methods}
    return prose.render(TEMPLATE, "runs", log=log, seeds=seeds, split=split_of(log))
