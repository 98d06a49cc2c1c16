"""Which reasoning tokens does each credit method credit, against the toy world's ground
truth (`oar_lite.course.toy`: pivotal, support and neutral tokens)? Results: benchmarks/RESULTS.md,
"Credit-assignment benchmark (toy world)".

The shipped toy model samples one completion (temperature 1) per held-out problem and every
method scores its reasoning tokens (`oar_lite.lab.credit.credit_benchmark`). Tables: per
method, ROC-AUC and precision@k of the pivotal tokens (`credit.results_table`; 0.5 and the
base rate are chance) and the mean normalised score per label; then how alike OAR-G ranks
the tokens to OAR-P in each P_final mode (mean Spearman correlation, 1 = same order)::

    python -m benchmarks.credit_toy --n 200
"""
from __future__ import annotations

from benchmarks import common
from oar_lite.lab import credit
from oar_lite.lab.report import markdown_table


def render(report: dict) -> str:
    means, agreement = report["label_means"], report["rank_agreement"]
    return "\n".join([
        credit.results_table(report["results"]), "",
        f"{report['scored']} of {report['n']} sampled completions scored, {report['correct']} with the right answer.",
        "", "Mean score per label, each completion's scores divided by their sum:", "",
        *markdown_table(["method", *next(iter(means.values()))],
                        [[m, *(f"{v:.4f}" for v in by_label.values())] for m, by_label in means.items()]),
        "", "Rank agreement of OAR-G with OAR-P:", "",
        *markdown_table(["P_final mode", "mean Spearman", "completions"],
                        [[mode, f"{a['mean']:.3f}", a["n"]] for mode, a in agreement.items()])])


def main(argv=None) -> dict:
    ap = common.parser(__doc__, "credit_toy.json", timing=False, threads=2)
    ap.add_argument("--methods", nargs="+", default=list(credit.SCORED_CREDIT_METHODS))
    ap.add_argument("--n", type=int, default=200, help="held-out problems, one sampled completion each")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    _, report = common.start(args, "credit_toy", argv, n=args.n, seed=args.seed, methods=args.methods)
    results, records = credit.credit_benchmark(args.methods, n=args.n, seed=args.seed, return_records=True,
                                               progress=not args.no_progress)
    report.update(results=results, scored=len(records), correct=sum(r["correct"] for r in records),
                  label_means={m: credit.label_means(records, m) for m in args.methods},
                  rank_agreement=credit.mode_agreement(records, args.methods))
    return common.finish(report, args.out, render)


if __name__ == "__main__":
    main()
