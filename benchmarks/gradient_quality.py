"""How well does one batch's policy gradient point at the true one under each credit
weighting, and how much of a wrong completion's negative advantage lands on its wrong
tokens ("influence vs blame")? Results: benchmarks/RESULTS.md, "When credit matters";
notebooks 05 and 07 read the JSON.

`oar_lite.lab.gradient_quality.batch_gradients` draws independent batches of P prompts x G
completions (temperature 1) of fresh problems (none held out) and differentiates every
weighting on the same rollouts; `gradient_stats` compares each batch gradient with the mean
uniform one (cosine, bias cosine, SNR across batches with a bootstrap interval of its ratio
to uniform's); `oar_lite.lab.gradient_quality.blame_shares` gives each weighting's blame share (uniform
credit's is the share of wrong tokens)::

    python -m benchmarks.gradient_quality --batches 60 --prompts 8 --group-size 8

Writes ``gradient_quality.json`` in `oar_lite.lab.regime.RESULTS_DIR` (``--json``) and a figure next to it.
"""
from __future__ import annotations

import time
from pathlib import Path

from benchmarks import common
from oar_lite.course.oracle import ORACLE_BOOST
from oar_lite.lab.regime import RESULTS_DIR

# Weightings of the same rollouts. The oracle's binary scores become weights 1 + boost
# on its tokens against 1 elsewhere (before the mass is rescaled): boost 9 is "0.1 elsewhere".
WEIGHTINGS = {
    "uniform": "uniform",
    "oracle": "oracle",
    "oracle (0.1 elsewhere)": ("oracle", {"boost": ORACLE_BOOST}),
    "oracle (only wrong tokens)": ("oracle", {"boost": 1e6}),
    "shuffled oracle (0.1 elsewhere)": ("shuffled:oracle", {"boost": ORACLE_BOOST}),
    "inverted oracle (0.1 elsewhere)": ("inverted:oracle", {"boost": ORACLE_BOOST}),
    "oracle-pivotal (0.1 elsewhere)": ("oracle-pivotal", {"boost": ORACLE_BOOST}),
    "OAR-P answer_mean": "oar-p:answer_mean",
    "OAR-G answer_mean": "oar-g:answer_mean",
    "entropy": "entropy",
}
OUT = RESULTS_DIR / "gradient_quality.json"


def _ci(ci) -> str:
    """`` (-10% to +40%)``: an SNR-ratio interval as changes against uniform ('' for none, or uniform's own)."""
    return "" if ci is None or ci[0] == ci[1] == 1.0 else f" ({ci[0] - 1:+.0%} to {ci[1] - 1:+.0%})"


def render(report: dict) -> str:
    from oar_lite.lab.report import markdown_table

    s = report["settings"]
    base = report["stats"]["uniform"]["snr"]
    cis = report.get("snr_vs_uniform_ci", {})
    rows = [[label, f"{st['cosine']:.3f}", f"{st['bias_cosine']:.3f}", f"{st['snr']:.3f}",
             f"{(st['snr'] / base - 1) if base else float('nan'):+.0%}{_ci(cis.get(label))}", f"{st['scale']:.2f}",
             f"{report['blame'][label]['share']:.3f}"] for label, st in report["stats"].items()]
    return "\n".join([
        f"{s['batches']} batches of {s['prompts']} prompts x {s['group_size']} completions, "
        f"{s['digits'][0]}-{s['digits'][1]}-digit problems, mean reward {report['mean_reward']:.3f}, "
        f"{report['cpu_s']:.0f} CPU s.", "",
        *markdown_table(["weighting", "mean cosine to the true gradient", "bias cosine", "SNR", "SNR vs uniform (95% CI)",
                         "step scale", "blame share"], rows), "",
        f"Blame share over {report['blame']['uniform']['n']} wrong completions with a wrong reasoning token "
        f"(uniform credit gives the share of wrong tokens, {report['blame']['_tokens']['share']:.3f})."])


def save_figure(report: dict, path: Path) -> Path:
    from matplotlib.figure import Figure

    labels = list(report["stats"])
    fig = Figure(figsize=(11, 4))
    axes = fig.subplots(1, 3)
    for ax, key, title in ((axes[0], "cosine", "mean cosine to the true gradient"), (axes[1], "snr", "SNR across batches")):
        vals = [report["stats"][k][key] for k in labels]
        ax.barh(labels, vals, color=["tab:gray" if k == "uniform" else "tab:blue" for k in labels])
        ax.axvline(report["stats"]["uniform"][key], color="k", lw=0.8, ls="--")
        ax.set_title(title)
        ax.invert_yaxis()
    axes[1].set_yticklabels([])
    vals = [report["blame"][k]["share"] for k in labels]
    axes[2].barh(labels, vals, color="tab:red")
    axes[2].set_title("share of a wrong answer's advantage\non its wrong tokens")
    axes[2].set_yticklabels([])
    axes[2].invert_yaxis()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return path


def main(argv=None) -> dict:
    from oar_lite.lab import gradient_quality as gq, stats
    from oar_lite.course import toy

    ap = common.parser(__doc__, OUT, timing=False, out_flag="--json")
    ap.add_argument("--batches", type=int, default=60)
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--group-size", type=int, default=8)
    ap.add_argument("--digits", type=int, nargs=2, default=(3, 4))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--model", default=None, help="toy model folder (default: the shipped one)")
    ap.add_argument("--boost", type=float, default=None,
                    help="reshaping boost for every weighting (default: bilevel's 1, the oracle rows their own)")
    args = ap.parse_args(argv)
    common.require_toy_model(ap, args.model)
    _, report = common.start(args, "gradient_quality", argv, settings={
        "batches": args.batches, "prompts": args.prompts, "group_size": args.group_size, "digits": list(args.digits),
        "seed": args.seed, "model": common.portable(args.model) if args.model else "shipped", "boost": args.boost,
        "weightings": {k: list(v) if isinstance(v, tuple) else v for k, v in WEIGHTINGS.items()}})
    model, tok = toy.load_model(args.model)
    problems = toy.make_problems(2000, seed=777, digits=tuple(args.digits), exclude=toy.load_eval_set())
    t0 = time.process_time()
    grads, info = gq.batch_gradients(model, tok, problems, WEIGHTINGS, batches=args.batches, prompts=args.prompts,
                                     group_size=args.group_size, seed=args.seed,
                                     reshape=None if args.boost is None else {"boost": args.boost},
                                     on_batch=None if args.no_progress else
                                     lambda b, i: print(f"batch {b + 1}/{args.batches}", flush=True))
    report.update(stats=gq.gradient_stats(grads), snr_vs_uniform_ci=gq.snr_ratio_intervals(grads),
                  blame=gq.blame_shares(info["rows"], info["weights"]),
                  mean_reward=stats.mean(info["rewards"]), mixed=stats.mean(info["mixed"]), cpu_s=time.process_time() - t0)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    save_figure(report, args.out.with_suffix(".png"))
    return common.finish(report, args.out, render)


if __name__ == "__main__":
    main()
