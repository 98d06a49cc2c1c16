"""The share of a batch gradient's noise that credit can remove: how much of its variance comes
from the prompts drawn, from the completions sampled, and from the tokens the reward does not
depend on (`oar_lite.lab.gradient_quality.variance_components`). Results: benchmarks/RESULTS.md,
"When credit must pay"; notebook 06 reads the JSON.

Toy world: ``--prompt-sets`` N sets of P prompts, ``--draws`` M completion batches of each
(temperature 1) at a toy model, each batch's gradient under uniform credit (GRPO) and with the
toy's irrelevant tokens (`oar_lite.lab.gradient_quality.irrelevant_mask`: filler and scratch words,
separators) weighted 0; 95% intervals by resampling the prompt sets. ``--weightings`` adds
credit weightings of the same batches, whose SNR against uniform's (`gradient_stats`) checks
the prediction ``SNR ratio <= 1 / (1 - share)`` for credit that only removes that noise::

    python -m benchmarks.noise_share --name "2x4" --prompts 2 --group-size 4 --digits 2 4

SmolLM2 (``--smollm2``): the completions of the Monte-Carlo ground truth
(`oar_lite.lab.credit.GROUND_TRUTH_PATH`), their reasoning tokens with ``|delta P|`` below
``--threshold`` called irrelevant, their advantages those of their sampled groups of 8;
`completion_noise_shares` (a share of the completion noise; prompts and signal are not
separable from one completion per draw)::

    python -m benchmarks.noise_share --name smollm2 --smollm2

Each run adds (or replaces) its ``--name`` entry in ``noise_share.json`` of
`oar_lite.lab.regime.RESULTS_DIR`; ``--render`` prints the table of every entry.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from benchmarks import common
from oar_lite.course.oracle import ORACLE_BOOST
from oar_lite.lab.regime import RESULTS_DIR

OUT = RESULTS_DIR / "noise_share.json"

# Credit weightings of the same batches (``--weightings``), as benchmarks/gradient_quality.py
# names them; boost 9 is the regime's "0.1 elsewhere".
WEIGHTINGS = {
    "oracle-relevant": ("oracle-relevant", {"boost": ORACLE_BOOST}),
    "oracle": ("oracle", {"boost": ORACLE_BOOST}),
    "inverted:oracle-relevant": ("inverted:oracle-relevant", {"boost": ORACLE_BOOST}),
    "oar-p:last": ("oar-p:last", {"boost": ORACLE_BOOST}),
    "oar-g:answer_mean": ("oar-g:answer_mean", {"boost": ORACLE_BOOST}),
}


def _pct(x: float) -> str:
    return f"{x:.0%}" if x == x else "-"


def render(data: dict) -> str:
    """The share table: one row per entry."""
    from oar_lite.lab.report import markdown_table

    rows = []
    for name, e in data.items():
        if e["kind"] == "toy":
            c, s = e["components"], e["settings"]
            lo, hi = c["shares_ci"]["irrelevant"]
            checks = "; ".join(f"{k} {v:+.0%}" for k, v in e.get("snr_vs_uniform", {}).items())
            rows.append([name, f"toy, {s['model_label']}", f"{s['prompts']}x{s['group_size']}, "
                         f"{s['digits'][0]}-{s['digits'][1]} digits", f"{c['prompt_sets']} x {c['draws']}",
                         _pct(c["shares"]["prompts"]), _pct(c["shares"]["completions"]),
                         f"{c['shares']['irrelevant']:.1%} ({lo:.1%}-{hi:.1%})",
                         f"{1 / (1 - c['shares']['irrelevant']) - 1:+.0%}",
                         f"{e['coordinates']['mean']:.1%}" if "coordinates" in e else "-",
                         f"{c['irrelevant_mean_share']:.3f}", checks or "-"])
        else:
            c = e["completion"]
            lo, hi = c["share_ci"]
            rows.append([name, "SmolLM2-135M-Instruct", f"{c['n']} completions of {c['units']} problems",
                         f"abs(delta P) < {e['settings']['threshold']:g}", "-", "-",
                         f"{c['share']:.1%} ({lo:.1%}-{hi:.1%})", f"{1 / (1 - c['share']) - 1:+.0%}", "-", "-", "-"])
    return "\n".join(markdown_table(
        ["setting", "model", "batch", "batches (sets x draws) / irrelevant", "prompts", "completions",
         "irrelevant tokens (95% CI)", "SNR bound of ideal credit", "per parameter, averaged", "irrelevant mean share",
         "measured SNR vs uniform"], rows))


def toy_entry(args, report: dict) -> dict:
    from oar_lite.lab import gradient_quality as gq
    from oar_lite.course import toy

    model, tok = toy.load_model(args.model)
    lo, hi = args.digits
    problems = toy.make_problems(2000, seed=777, digits=(lo, hi), exclude=toy.load_eval_set())
    cap = args.max_new_tokens or toy.max_new_tokens(hi, scratch=args.scratch)
    weightings = {"uniform": "uniform", "relevant": lambda ro: (~gq.irrelevant_mask(ro, tok)).float()}
    weightings.update({k: WEIGHTINGS[k] for k in args.weightings})
    batches = args.prompt_sets * args.draws
    t0 = time.process_time()
    grads, info = gq.batch_gradients(model, tok, problems, weightings, batches=batches, prompts=args.prompts,
                                     group_size=args.group_size, draws=args.draws, seed=args.seed, max_new_tokens=cap,
                                     on_batch=None if args.no_progress else
                                     lambda b, i: print(f"batch {b + 1}/{batches}", flush=True))
    components = gq.variance_components(grads["uniform"], grads["relevant"], draws=args.draws)
    # The same share parameter by parameter (what Adam, which scales each parameter's step, sees).
    coordinates = gq.coordinate_shares(grads["uniform"], grads["relevant"], draws=args.draws,
                                       groups=gq.parameter_groups(model))
    stats = gq.gradient_stats(grads)
    base = stats["uniform"]["snr"]
    report["weight_mass"] = gq.weight_mass_on(info, "relevant")  # how much of each weighting's mass the irrelevant get
    lengths = [len(r["completion_ids"]) for r in info["rows"]]
    report.update(kind="toy", components=components, coordinates=coordinates,
                  snr_vs_uniform={k: stats[k]["snr"] / base - 1 for k in grads if k != "uniform"},
                  stats=stats, mean_reward=sum(info["rewards"]) / len(info["rewards"]),
                  mixed=sum(info["mixed"]) / len(info["mixed"]),
                  mean_scored_length=sum(lengths) / max(len(lengths), 1), cpu_s=time.process_time() - t0)
    return report


def smollm2_entry(args, report: dict) -> dict:
    import torch

    from oar_lite.lab import credit, gradient_quality as gq
    from oar_lite.course import models
    from oar_lite.grpo import group_advantages
    from oar_lite.lab.ground_truth import rebuilt_sequence

    data = credit.load_ground_truth()
    s = data["settings"]
    model, tok = models.load_smollm2()
    sequences, groups, skipped = [], [], []
    for i, rec in enumerate(data["completions"]):
        c = rec["group_correct"]
        rewards = torch.tensor([1.0] * c + [0.0] * (s["group_size"] - c))
        advantage = float(group_advantages(rewards, s["group_size"])[0 if rec["correct"] else -1])
        if advantage == 0:
            skipped.append(i)  # its group was all right or all wrong: no gradient at all
            continue
        delta, _ = credit.probability_jumps(rec)
        ids, P, reasoning, _ = rebuilt_sequence(rec, tok)  # ValueError if the prompt no longer rebuilds
        irrelevant = torch.zeros(len(ids), dtype=torch.bool)
        irrelevant[reasoning] = delta.abs() < args.threshold - 1e-9
        sequences.append({"input_ids": ids, "completion": slice(P, len(ids)), "irrelevant": irrelevant,
                          "advantage": advantage})
        groups.append(rec["problem_index"])
    t0 = time.process_time()
    out = gq.completion_noise_shares(model, sequences, groups=groups)
    report.update(kind="smollm2", completion=out, skipped=skipped, cpu_s=time.process_time() - t0,
                  tokens={"completion": sum(r["tokens"] for r in out["per_completion"]),
                          "irrelevant": sum(r["irrelevant_tokens"] for r in out["per_completion"])})
    return report


def main(argv=None) -> dict:
    ap = common.parser(__doc__, OUT, timing=False, out_flag="--json")
    ap.add_argument("--name", required=True, help="the entry in the JSON")
    ap.add_argument("--smollm2", action="store_true", help="SmolLM2's Monte-Carlo ground truth instead of the toy")
    ap.add_argument("--threshold", type=float, default=0.2, help="SmolLM2: |delta P| below it is irrelevant")
    ap.add_argument("--prompts", type=int, default=2)
    ap.add_argument("--group-size", type=int, default=4)
    ap.add_argument("--prompt-sets", type=int, default=40)
    ap.add_argument("--draws", type=int, default=2)
    ap.add_argument("--digits", type=int, nargs=2, default=(2, 4))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--model", default=None, help="toy model folder (default: the shipped one)")
    ap.add_argument("--model-label", default=None, help="how the table names the model (default: shipped / folder)")
    ap.add_argument("--scratch", type=int, default=0, help="the model's scratch words (room for them when sampling)")
    ap.add_argument("--max-new-tokens", type=int, default=None)
    ap.add_argument("--weightings", nargs="*", default=[], choices=sorted(WEIGHTINGS),
                    help="credit weightings whose SNR against uniform's is reported beside the share")
    args = ap.parse_args(argv)
    common.require_toy_model(ap, args.model)
    settings = {"threshold": args.threshold} if args.smollm2 else {
        "prompts": args.prompts, "group_size": args.group_size, "prompt_sets": args.prompt_sets, "draws": args.draws,
        "digits": list(args.digits), "seed": args.seed, "model": common.portable(args.model) if args.model else "shipped", "scratch": args.scratch,
        "model_label": args.model_label or ("shipped model" if args.model is None else Path(args.model).name),
        "weightings": args.weightings}
    _, report = common.start(args, "noise_share", argv, name=args.name, settings=settings)
    report = smollm2_entry(args, report) if args.smollm2 else toy_entry(args, report)
    report["machine"]["loadavg_end"] = common.loadavg()
    common.write_entry(args.out, args.name, report)
    print(common.machine_line(report["machine"]))
    print(render({args.name: report}))
    return report


if __name__ == "__main__":
    if sys.argv[1:2] == ["--render"]:
        print(render(json.loads(OUT.read_text())))
    else:
        main()
