"""How concentrated token weights are, in ARCA's terms (Lafuente-Mercado 2026, arXiv 2606.00257:
under LoRA, token-credit signals can degenerate after within-trajectory normalisation,
either towards uniform weights or onto a few task-agnostic tokens, measured by the weights'
Gini and an effective-token ratio), next to this project's effective share
(`oar_lite.reshape.effective_share`), computed on what the project ships (notebooks 06, 07).

- `gini`: the Gini coefficient of one completion's weights: 0 uniform, (R - 1) / R when one
  token carries everything.
- `effective_token_ratio`: exp(entropy of w / sum w) / R, the entropy form of "the effective
  number of tokens over R". Its inverse-Simpson form, (sum w)^2 / (R sum w^2), is exactly
  our effective share; which of the two ARCA's paper uses was not read here (only its
  abstract), so both are reported.
- `answer_mass`: the share of the weight mass on the answer-relevant (pivotal) tokens.
- `concentration_markdown`, `concentration_reading`: the table and its reading, for the
  notebooks and benchmarks/RESULTS.md (``python -m oar_lite.lab.concentration``).
- `ground_truth_concentration`: per method, all of these on the shipped SmolLM2 completions
  of `oar_lite.lab.ground_truth` (their stored per-token scores, reshaped by the library).
- `shipped_concentration`: what the shipped training runs allow: their logs and
  `weight_uniformity.json` hold per-completion summaries (effective share, weight std), not
  per-token weights, so the Gini cannot be computed from them; it says so.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Sequence

import torch

from ..attribution import WEIGHTINGS, CreditConfig
from ..reshape import effective_share
from .stats import ci95, mean
from . import scorers  # noqa: F401  (registers the lab's methods, which it runs by name)

ENTROPY_TOP_QUANTILE = 0.8
"""The ``quantile`` (share below the threshold) at which ``"entropy-top"`` is compared: TRL's
recommended ``top_entropy_quantile`` rho = 0.2 (the "Beyond the 80/20 rule" paper's), q = 1 - rho."""

METHODS = {"uniform": ("uniform", None), "oar-p:last": ("oar-p:last", "oar-p:last"),
           "oar-p:answer_mean": ("oar-p:answer_mean", "oar-p:answer_mean"),
           "oar-g:answer_mean": ("oar-g:answer_mean", "oar-g:answer_mean"),
           "entropy": ("entropy", "entropy"), "entropy-top": ("entropy-top", "entropy"),
           "random": ("random", "random"), "grail": ("grail", "grail")}
"""Methods compared on the ground-truth completions: ``{row name: (method, the stored scores it
reshapes)}`` (``None``: uniform, all ones). ``entropy-top`` reshapes the stored entropy scores
with TRL's mask (`oar_lite.lab.baselines.top_quantile_weights`), no re-scoring; ``grail``'s
stored saliencies go through GRAIL's own weighting (`oar_lite.lab.grail.saliency_weights`)."""


def _weights(weights) -> torch.Tensor:
    w = torch.as_tensor(weights, dtype=torch.float64)
    if w.dim() != 1 or w.numel() == 0:
        raise ValueError(f"weights must be a non-empty 1-D [R] sequence, got shape {tuple(w.shape)}")
    if not torch.isfinite(w).all() or (w < 0).any():
        raise ValueError("weights must be finite and >= 0")
    return w


def gini(weights) -> float:
    """Gini coefficient of one completion's ``[R]`` weights (>= 0): the mean absolute difference
    of all pairs over twice the mean, sum_ij |w_i - w_j| / (2 R^2 mean w). 0 for uniform
    weights (GRPO) and for all-zero ones, (R - 1) / R when one token carries all the weight."""
    w = _weights(weights)
    total = float(w.sum())
    if total == 0:
        return 0.0
    R = w.numel()
    ordered = torch.sort(w).values
    ranks = torch.arange(1, R + 1, dtype=torch.float64)
    return float((2 * (ranks * ordered).sum()) / (R * total) - (R + 1) / R)


def effective_token_ratio(weights) -> float:
    """exp(H(p)) / R with p = w / sum w (H in nats): the effective number of tokens, by the
    entropy of the weight distribution, over R. 1 for uniform weights, 1/R when one token
    carries everything, k/R for weight spread evenly over k tokens; 1 for all-zero weights."""
    w = _weights(weights)
    total = float(w.sum())
    if total == 0:
        return 1.0
    p = w / total
    p = p[p > 0]
    return float(torch.exp(-(p * p.log()).sum())) / w.numel()


def answer_mass(weights, relevant) -> float:
    """Share of the weight mass on the ``relevant`` tokens (``[R]`` bools): sum_{relevant} w /
    sum w (their share of the tokens for uniform weights); NaN when all weights are 0."""
    w = _weights(weights)
    mask = torch.as_tensor(relevant, dtype=torch.bool)
    if mask.shape != w.shape:
        raise ValueError(f"relevant must be [R] = {tuple(w.shape)} bools, got shape {tuple(mask.shape)}")
    total = float(w.sum())
    return float(w[mask].sum()) / total if total > 0 else math.nan


def concentration_row(weights, relevant=None) -> dict:
    """One completion's weights in every measure: ``effective_share`` (ours), ``gini`` and
    ``effective_token_ratio`` (ARCA's), ``zero_share`` (tokens with weight 0) and, given the
    relevant tokens, ``answer_mass``."""
    w = _weights(weights)
    row = {"tokens": int(w.numel()), "effective_share": effective_share(w), "gini": gini(w),
           "effective_token_ratio": effective_token_ratio(w), "zero_share": float((w == 0).double().mean())}
    if relevant is not None:
        row["answer_mass"] = answer_mass(w, relevant)
    return row


def ground_truth_concentration(data=None, *, methods: Sequence[str] | None = None,
                               threshold: float | None = None,
                               entropy_top_quantile: float = ENTROPY_TOP_QUANTILE) -> dict:
    """Per method, the mean over the shipped SmolLM2 ground-truth completions of
    `concentration_row`, their weights being the library's reshaping (`CreditConfig`'s
    defaults; ``entropy-top`` at ``quantile=entropy_top_quantile``) of the per-token scores
    the file stores, and the relevant tokens the pivotal ones (``|delta P| >= threshold``,
    default `oar_lite.lab.ground_truth.PIVOT_THRESHOLD`).

    Returns ``{"completions", "tokens", "pivotal_share" (the pivotal tokens' share of the
    reasoning tokens), "methods": {name: {"effective_share", "gini", "effective_token_ratio",
    "zero_share", "answer_mass", "answer_mass_ci95", "answer_mass_n", "n"}}}``; ``answer_mass``
    is averaged over the completions with a pivotal token (``answer_mass_n`` of them; its
    ``ci95`` the half-width 1.96 std / sqrt(n)). ValueError: a method
    not in `METHODS` or whose scores the file lacks.
    """
    from . import ground_truth

    if not isinstance(data, dict):
        data = ground_truth.load_ground_truth(data)
    threshold = ground_truth.PIVOT_THRESHOLD if threshold is None else threshold
    names = list(METHODS) if methods is None else list(methods)
    unknown = [m for m in names if m not in METHODS]
    if unknown:
        raise ValueError(f"unknown method(s) {unknown}; expected some of {list(METHODS)}")
    completions = data["completions"]
    out = {"completions": len(completions), "threshold": threshold, "entropy_top_quantile": entropy_top_quantile,
           "methods": {}}
    pivots = []
    for rec in completions:
        delta, _ = ground_truth.probability_jumps(rec)
        pivots.append(delta.abs() >= threshold - 1e-9)
    out["tokens"] = sum(p.numel() for p in pivots)
    out["pivotal_share"] = sum(int(p.sum()) for p in pivots) / out["tokens"]
    for name in names:
        method, stored = METHODS[name]
        config = CreditConfig(method=method, **({"quantile": entropy_top_quantile} if method == "entropy-top" else {}))
        rows = []
        for rec, pivotal in zip(completions, pivots):
            if stored is None:
                w = torch.ones(pivotal.numel(), dtype=torch.float64)
            elif stored in rec["scores"]:
                scores = torch.tensor(rec["scores"][stored], dtype=torch.float64)
                w = config.reshape(scores)  # the bi-level reshaping, or the method's own weighting (entropy-top's mask)
            else:
                continue
            rows.append(concentration_row(w, pivotal if pivotal.any() else None))
        if not rows:
            raise ValueError(f"method {name!r}: the file stores no {stored!r} scores")
        with_mass = [r["answer_mass"] for r in rows if "answer_mass" in r]
        out["methods"][name] = {**{k: mean([r[k] for r in rows]) for k in
                                   ("effective_share", "gini", "effective_token_ratio", "zero_share")},
                                "answer_mass": mean(with_mass), "answer_mass_ci95": ci95(with_mass),
                                "answer_mass_n": len(with_mass), "n": len(rows)}
    return out


def shipped_concentration(log: dict | None = None, uniformity: dict | None = None) -> dict:
    """What the shipped training runs say about concentration: per method, the mean over
    steps and seeds of the logged ``oar/effective_share`` of the SmolLM2 runs (`lora_learning`'s
    log) and the toy runs' effective share (`weight_uniformity.json`): the inverse-Simpson
    effective-token ratio. ``not_computable`` names what the stored summaries cannot give
    (the Gini and the entropy-form ratio need per-token weights, which neither stores)."""
    from . import lora_learning
    from .findings.conclusion import UNIFORMITY_PATH

    log = lora_learning.load_log() if log is None else log
    if uniformity is None:
        uniformity = json.loads(Path(UNIFORMITY_PATH).read_text())
    smollm2 = {}
    for run in log["runs"]:
        values = [e["oar/effective_share"] for e in run["log"] if "oar/effective_share" in e]
        if values:
            smollm2.setdefault(run["method"], []).append(mean(values))
    return {"smollm2": {m: {"effective_share": mean(v), "runs": len(v)} for m, v in smollm2.items()},
            "toy": {f"{setting}, {m}": {"effective_share": r["effective_share"], "completions": r["completions"]}
                    for setting, methods in uniformity["results"].items() for m, r in methods.items()},
            "not_computable": ["gini", "effective_token_ratio (entropy form)"],
            "why": "the SmolLM2 training logs and weight_uniformity.json store per-step or per-setting means of "
                   "the effective share and the weight std, not per-token weights; the Gini and the entropy-form "
                   "ratio need the weights themselves"}


def concentration_markdown(table: dict, shipped: dict | None = None) -> str:
    """`ground_truth_concentration`'s table (and `shipped_concentration`'s line) as markdown."""
    from .report import markdown_table

    rows = [[m, f"{e['effective_share']:.2f}", f"{e['effective_token_ratio']:.2f}", f"{e['gini']:.2f}",
             f"{e['zero_share']:.2f}", f"{e['answer_mass']:.2f} ± {e['answer_mass_ci95']:.2f}"]
            for m, e in table["methods"].items()]
    lines = [f"{table['completions']} SmolLM2 completions, {table['tokens']} reasoning tokens, "
             f"{table['pivotal_share']:.0%} of them pivotal (|delta P| >= {table['threshold']}); the mass on pivotal "
             f"tokens is averaged over the {next(iter(table['methods'].values()))['answer_mass_n']} completions that "
             f"have one (uniform weights: the pivotal tokens' share of each); entropy-top at TRL's rho = "
             f"{1 - table['entropy_top_quantile']:.1f}:", "",
             *markdown_table(["method", "effective share (ours)", "effective-token ratio (ARCA, entropy form)",
                              "weight Gini (ARCA)", "share of weights 0", "weight mass on pivotal tokens (95% interval)"], rows)]
    if shipped is not None:
        runs = "; ".join(f"{m} {e['effective_share']:.2f} ({e['runs']} runs)" for m, e in shipped["smollm2"].items())
        lines += ["", f"In the shipped SmolLM2 training runs, the logged effective share (the inverse-Simpson "
                      f"effective-token ratio): {runs}. Not computable from them: {', '.join(shipped['not_computable'])} "
                      f"({shipped['why']})."]
    return "\n".join(lines)


def concentration_reading(table: dict) -> str:
    """`ground_truth_concentration`'s table read in words, every number from it: how
    concentrated the bilevel methods' weights are next to random scores reshaped the same
    way, whether any moves the mass on the pivotal tokens beyond uniform's interval, and
    what TRL's entropy-top does."""
    m = table["methods"]
    needed = {"uniform", "random", "entropy-top"}
    if not needed <= set(m):
        raise ValueError(f"the reading needs the methods {sorted(needed)}; the table has {sorted(m)}")
    own = [k for k in m if k not in needed and k in METHODS and METHODS[k][0] in WEIGHTINGS]  # grail
    bilevel = [k for k in m if k not in needed and k not in own]
    if not bilevel:
        raise ValueError("the reading needs at least one bilevel method (oar-p, oar-g, entropy) besides the baselines")
    shares = [m[k]["effective_share"] for k in bilevel]
    ginis = [m[k]["gini"] for k in bilevel]
    r = m["random"]
    like_random = min(shares) - 0.05 <= r["effective_share"] <= max(shares) + 0.05
    u = m["uniform"]

    def beyond_uniform(e):
        return e["answer_mass"] - e["answer_mass_ci95"] > u["answer_mass"] + u["answer_mass_ci95"]

    movers = [k for k in bilevel if beyond_uniform(m[k])]
    top = m["entropy-top"]
    rho = 1 - table["entropy_top_quantile"]
    return " ".join([
        f"With the default reshaping the bilevel methods ({', '.join(bilevel)}) reach effective shares of "
        f"{min(shares):.2f}-{max(shares):.2f} and a weight Gini of {min(ginis):.2f}-{max(ginis):.2f}; random scores "
        f"reshaped the same way reach {r['effective_share']:.2f} and {r['gini']:.2f}"
        + (": the reshaping (boost, floor, mass preservation), not the signal, sets how concentrated the weights are, "
           "so these diagnostics alone cannot tell a signal from noise." if like_random else
           ": the signals concentrate the weights differently from noise."),
        f"Where the mass goes is what could separate them: uniform weights put {u['answer_mass']:.2f} of it on the pivotal "
        f"tokens, and " + (f"{', '.join(movers)} put{'s' if len(movers) == 1 else ''} more, beyond both intervals."
                           if movers else "no bilevel method puts more beyond both intervals "
                           f"({min(m[k]['answer_mass'] for k in bilevel):.2f}-{max(m[k]['answer_mass'] for k in bilevel):.2f})."),
        f"TRL's entropy-top at rho = {rho:.1f} is the concentrated one (effective share {top['effective_share']:.2f}, "
        f"Gini {top['gini']:.2f}, {top['zero_share']:.0%} of the tokens at weight 0) and puts {top['answer_mass']:.2f} "
        f"± {top['answer_mass_ci95']:.2f} of its mass on the pivotal tokens"
        + (", beyond uniform's interval." if beyond_uniform(top) else ", an interval that overlaps uniform's."),
        *(f"{k}, with its own weighting (not the bi-level reshaping), keeps an effective share of "
          f"{m[k]['effective_share']:.2f} (Gini {m[k]['gini']:.2f}) and puts {m[k]['answer_mass']:.2f} "
          f"± {m[k]['answer_mass_ci95']:.2f} of its mass on the pivotal tokens"
          + (", beyond uniform's interval." if beyond_uniform(m[k]) else ", an interval that overlaps uniform's.")
          for k in own)])


def main(argv=None) -> str:
    """``python -m oar_lite.lab.concentration``: print `concentration_markdown` of the shipped
    data (benchmarks/RESULTS.md, "Concentration in ARCA's measures")."""
    from ..settings import parser

    ap = parser(__doc__.split("\n\n")[0])
    ap.add_argument("--rho", type=float, default=1 - ENTROPY_TOP_QUANTILE,
                    help="TRL's top_entropy_quantile for entropy-top (default 0.2, TRL's recommended)")
    args = ap.parse_args(argv)
    if not 0 <= args.rho <= 1:
        ap.error(f"--rho must lie in [0, 1] (TRL's top_entropy_quantile), got {args.rho}")
    table = ground_truth_concentration(entropy_top_quantile=1 - args.rho)
    text = concentration_markdown(table, shipped_concentration()) + "\n\n" + concentration_reading(table)
    print(text)
    return text


if __name__ == "__main__":
    main()
