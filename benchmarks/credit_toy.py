"""Credit-assignment benchmark (toy world): which tokens does each method credit, against
the ground truth of `oar_lite.toy`? Numbers go to benchmarks/RESULTS.md, "Credit-assignment
benchmark (toy world)".

Samples one completion (temperature 1) of the shipped toy model for each of the 200
held-out problems, scores each reasoning token with every method through
`oar_lite.attribution.token_scores`, and prints `oar_lite.credit.results_table`, the rank
agreement of OAR-G with OAR-P per P_final mode, and each method's mean normalised score
on pivotal / support / neutral tokens.

Run (offline, from the repository root; about 10 minutes on 2 cores)::

    HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 .venv/bin/python -m benchmarks.credit_toy --n 200

Writes ``results/credit_toy.json``.
"""
from __future__ import annotations

import argparse
import json
import math
import os
from pathlib import Path

import torch

from oar_lite import credit


def main(argv=None) -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    ap = argparse.ArgumentParser(description="Credit-assignment benchmark (toy world)")
    ap.add_argument("--methods", nargs="+", default=list(credit.SCORED_CREDIT_METHODS))
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", type=Path, default=Path("results/credit_toy.json"))
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    results, records = credit.credit_benchmark(args.methods, n=args.n, seed=args.seed, return_records=True)
    print(credit.results_table(results))
    print(f"\n{len(records)} of {args.n} sampled completions scored; "
          f"{sum(r['correct'] for r in records)} of them with the right answer.")
    for mode in ("last", "answer_mean", "answer_joint"):
        p, g = f"oar-p:{mode}", f"oar-g:{mode}"
        if p in args.methods and g in args.methods:
            rho = [credit.rank_agreement(r["scores"][p], r["scores"][g]) for r in records]
            rho = [x for x in rho if not math.isnan(x)]
            print(f"Spearman(OAR-P, OAR-G) with {mode}: {sum(rho) / len(rho):.3f} over {len(rho)} completions")
    print("\nmean normalised score per label:")
    for m in args.methods:
        print(f"  {m}: " + ", ".join(f"{k} {v:.4f}" for k, v in credit.label_means(records, m).items()))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
