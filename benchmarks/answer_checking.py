"""Does answer checking stay linear in the completion's length? Times `oar_lite.math_reward`
and `completion_offsets` (toy tokenizer) on completions built to be hard for extraction: the
right ``\\boxed{}`` first, then thousands of ``\\boxed{`` that never close and a long ``####``
line with nothing after it. Every size runs once per round, rounds interleaved, and the
"vs smallest" ratios are taken within each round: linear time means doubling the length
about doubles the time. Results: benchmarks/RESULTS.md::

    python -m benchmarks.answer_checking
"""
from __future__ import annotations

from benchmarks import common
from oar_lite import math_reward
from oar_lite.lab import report as tables
from oar_lite.segment import completion_offsets

SIZES = (25_000, 50_000, 100_000)


def completion(chars: int) -> str:
    """About ``chars`` characters: the answer ``\\dfrac{3}{4}`` boxed first, then noise."""
    unit = chars // 100
    return ("Work: \\boxed{\\dfrac{3}{4}} " + "\\boxed{ " * (unit * 2) + "The answer is " * (unit // 2)
            + "x" * (unit * 50) + "\n####" + " \t" * (unit * 17))


def render(report: dict) -> str:
    rows = [[r["chars"], r["tokens"], common.fmt(r["math_reward"], "", 4), common.fmt(r["reward_vs_smallest"], "x"),
             common.fmt(r["completion_offsets"], "", 3), common.fmt(r["offsets_vs_smallest"], "x")]
            for r in report["sizes"]]
    return "\n".join([f"{common.rounds(report)}, CPU seconds, median [min-max]; ratios paired by round:", "",
                      *tables.markdown_table(["completion chars", "tokens", "math_reward s", "vs smallest",
                                              "completion_offsets s", "vs smallest"], rows)]) + "\n"


def main(argv=None) -> dict:
    ap = common.parser(__doc__, "answer_checking.json", warmup=0, repeats=3)
    args = ap.parse_args(argv)
    _, report = common.start(args, "answer_checking", argv)
    from oar_lite.course import toy

    _, tokenizer = toy.load_model()
    texts = {n: completion(n) for n in SIZES}
    ids = {n: tokenizer(texts[n], add_special_tokens=False)["input_ids"] for n in SIZES}
    for n in SIZES:  # right answers first: a fast wrong answer is no result
        assert math_reward(texts[n], "0.75") == 1.0
    calls = {**{("reward", n): (lambda r, n=n: math_reward(texts[n], "0.75")) for n in SIZES},
             **{("offsets", n): (lambda r, n=n: completion_offsets(tokenizer, ids[n])) for n in SIZES}}
    runs = common.interleaved(calls, warmup=args.warmup, repeats=args.repeats, progress=not args.no_progress)
    times = {k: [t for t, _ in v] for k, v in runs.items()}
    ratios = {kind: common.paired_ratios({n: times[kind, n] for n in SIZES}, SIZES[0]) for kind in ("reward", "offsets")}
    report["sizes"] = [{"chars": len(texts[n]), "tokens": len(ids[n]), "math_reward": common.spread(times["reward", n]),
                        "reward_vs_smallest": ratios["reward"][n], "offsets_vs_smallest": ratios["offsets"][n],
                        "completion_offsets": common.spread(times["offsets", n])} for n in SIZES]
    return common.finish(report, args.out, render)


if __name__ == "__main__":
    main()
