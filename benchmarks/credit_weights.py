"""Where credit puts the advantage in a toy world: per method, how far from uniform its token
weights are (`oar_lite.lab.uniformity.weight_uniformity`), the share of a completion's weight mass
on the tokens the reward does not depend on (`oar_lite.lab.gradient_quality.irrelevant_mask`; uniform credit
gives their share of the tokens, the relevance oracle at boost 9 about a tenth of it), and
how well its scores separate the relevant tokens from the others (AUC). Results:
benchmarks/RESULTS.md, "When credit must pay" (OAR in the positive control); notebook 06
reads the JSON.

Batches as training draws them (`oar_lite.train.pick_problems` from the training pool,
temperature 1); only the completions with a non-zero advantage, which are the ones reshaped::

    python -m benchmarks.credit_weights --name "weights, k=16" --model $RUNS/pos/worlds/scratch16 --scratch 16

Each run adds (or replaces) its ``--name`` entry in ``--json`` (default ``positive_control.json``
of `oar_lite.lab.regime.RESULTS_DIR`, beside the sweep's entries).
"""
from __future__ import annotations

import time

from benchmarks import common
from oar_lite.lab.regime import RESULTS_DIR

OUT = RESULTS_DIR / "positive_control.json"
METHODS = ("uniform", "oracle-relevant", "oar-p:last", "oar-g:answer_mean")


def render(entry: dict) -> str:
    from oar_lite.lab.report import markdown_table

    rows = [[m, f"{e['irrelevant_mass']:.3f}", f"{e['auc_relevant']:.2f}" if e["auc_relevant"] is not None else "-",
             f"{e['tau']:.3f}", f"{e['at_floor']:.3f}", f"{e['weight_std']:.3f}", f"{e['effective_share']:.3f}"]
            for m, e in entry["methods"].items()]
    return "\n".join([
        f"{entry['name']}: {entry['rows']} scored completions of {entry['settings']['batches']} batches "
        f"({entry['settings']['prompts']} x {entry['settings']['group_size']}), {entry['irrelevant_tokens']:.0%} of "
        f"their reasoning tokens irrelevant, {entry['cpu_s']:.0f} CPU s", "",
        *markdown_table(["method", "weight mass on irrelevant tokens", "AUC relevant vs irrelevant", "tau",
                         "share at the floor", "weight std", "effective share"], rows)])


def main(argv=None) -> dict:
    import numpy as np
    import torch

    from oar_lite.lab import compare, gradient_quality
    from oar_lite.course import oracle, toy
    from oar_lite.attribution import token_weights
    from oar_lite.lab.compare import for_methods
    from oar_lite.lab.credit import roc_auc
    from oar_lite.lab.uniformity import weight_uniformity
    from oar_lite.grpo import group_advantages
    from oar_lite.reward import math_reward
    from oar_lite.rollout import sample_completions
    from oar_lite.seeding import derive_seed, pick_problems

    ap = common.parser(__doc__, OUT, timing=False, out_flag="--json")
    ap.add_argument("--name", required=True)
    ap.add_argument("--model", default=None, help="toy model folder (default: the shipped one)")
    ap.add_argument("--scratch", type=int, default=0, help="the model's scratch words (room for them when sampling)")
    ap.add_argument("--batches", type=int, default=20)
    ap.add_argument("--prompts", type=int, default=2)
    ap.add_argument("--group-size", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1000, help="batches drawn as training step b of a run seeded so")
    ap.add_argument("--boost", type=float, default=oracle.ORACLE_BOOST,
                    help="the reshaping's boost, for the methods that reshape (default: the oracle's, 0.1 elsewhere)")
    ap.add_argument("--methods", nargs="+", default=list(METHODS))
    args = ap.parse_args(argv)
    common.require_toy_model(ap, args.model)
    _, report = common.start(args, "credit_weights", argv, name=args.name, settings={
        "model": common.portable(args.model) if args.model else "shipped", "scratch": args.scratch, "batches": args.batches, "prompts": args.prompts,
        "group_size": args.group_size, "seed": args.seed, "boost": args.boost})
    model, tok = toy.load_model(args.model)
    task = compare.toy_task()
    cap = toy.max_new_tokens(4, scratch=args.scratch)
    credit = for_methods(args.methods, {"boost": args.boost})
    found = {m: {"scores": [], "weights": [], "irrelevant": []} for m in args.methods}
    t0 = time.process_time()
    for b in range(args.batches):
        problems = pick_problems(task.train_problems, args.prompts, seed=args.seed, step=b + 1)
        ro = sample_completions(model, tok, [p["prompt"] for p in problems], group_size=args.group_size,
                                max_new_tokens=cap, temperature=1.0, formats=toy.FORMATS,
                                seed=derive_seed(0, b, args.seed))  # the shipped runs' draws (key 2 counts 7,919 per seed)
        rows = [p for p in problems for _ in range(args.group_size)]
        adv = group_advantages(torch.tensor([math_reward(c, p["answer"], formats=toy.FORMATS)
                                             for c, p in zip(ro.completions, rows)]), args.group_size)
        reasoning, answer = ro.masks()
        answer = answer & (adv != 0)[:, None]
        irrelevant = gradient_quality.irrelevant_mask(ro, tok)
        for m in args.methods:
            w, scores = token_weights(model, ro.input_ids, ro.attention_mask, reasoning, answer, credit=credit[m],
                                      pad_token_id=tok.pad_token_id, return_scores=True)
            for i, s in enumerate(scores):
                if s is None:
                    continue
                found[m]["scores"].append(s.detach().float())
                found[m]["weights"].append(w[i][reasoning[i]].detach())
                found[m]["irrelevant"].append(irrelevant[i][reasoning[i]])
        if not args.no_progress:
            print(f"batch {b + 1}/{args.batches}", flush=True)
    out = {}
    for m, f in found.items():
        uniformity = weight_uniformity(f["scores"], f["weights"], quantile=credit[m].quantile, floor=credit[m].floor)
        mass = [oracle.blame_share(w.float(), irr) for w, irr in zip(f["weights"], f["irrelevant"]) if irr.any()]
        aucs = [roc_auc(s, ~irr) for s, irr in zip(f["scores"], f["irrelevant"]) if 0 < int(irr.sum()) < irr.numel()]
        out[m] = {"irrelevant_mass": float(np.mean(mass)), "auc_relevant": float(np.mean(aucs)) if aucs else None,
                  "auc_n": len(aucs), **{k: float(np.mean([r[k] for r in uniformity]))
                                         for k in ("tau", "at_floor", "suppressed", "boosted", "weight_std",
                                                   "effective_share")}}
    first = found[args.methods[0]]
    report.update(methods=out, rows=len(first["scores"]),
                  irrelevant_tokens=float(np.mean([float(irr.float().mean()) for irr in first["irrelevant"]])),
                  cpu_s=time.process_time() - t0)
    report["machine"]["loadavg_end"] = common.loadavg()
    common.write_entry(args.out, args.name, report)
    print(common.machine_line(report["machine"]))
    print(render(report))
    return report


if __name__ == "__main__":
    main()
