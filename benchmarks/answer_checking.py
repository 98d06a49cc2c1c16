"""Answer checking on long completions: `oar_lite.math_reward` and `completion_offsets`
grow linearly with the completion's length.

The completions are adversarial for extraction: the right ``\\boxed{}`` early, then
thousands of ``\\boxed{`` that never close and a long ``####`` line with nothing after it
(what made the earlier extraction quadratic). Each size is timed in interleaved rounds
(CPU seconds, median of the rounds), so the ratio between sizes is measured side by side;
linear time means doubling the length about doubles the time. `completion_offsets` is timed
on the toy tokenizer, the same text tokenized.

Run (offline, from the repository root)::

    .venv/bin/python -m benchmarks.answer_checking

Prints a markdown table.
"""
from __future__ import annotations

import statistics
import time

from oar_lite import math_reward
from oar_lite.segment import completion_offsets

SIZES = (25_000, 50_000, 100_000)


def completion(chars: int) -> str:
    """About ``chars`` characters: the answer ``\\dfrac{3}{4}`` boxed first, then noise."""
    unit = chars // 100
    return ("Work: \\boxed{\\dfrac{3}{4}} " + "\\boxed{ " * (unit * 2) + "The answer is " * (unit // 2)
            + "x" * (unit * 50) + "\n####" + " \t" * (unit * 17))


def cpu_seconds(fn) -> float:
    t0 = time.process_time()
    fn()
    return time.process_time() - t0


def main(rounds: int = 3) -> None:
    from oar_lite import toy

    _, tokenizer = toy.load_model()
    texts = {n: completion(n) for n in SIZES}
    ids = {n: tokenizer(texts[n], add_special_tokens=False)["input_ids"] for n in SIZES}
    for n in SIZES:  # right answers first: a fast wrong answer is no result
        assert math_reward(texts[n], "0.75") == 1.0
    reward: dict[int, list[float]] = {n: [] for n in SIZES}
    offsets: dict[int, list[float]] = {n: [] for n in SIZES}
    for _ in range(rounds):
        for n in SIZES:
            reward[n].append(cpu_seconds(lambda: math_reward(texts[n], "0.75")))
            offsets[n].append(cpu_seconds(lambda: completion_offsets(tokenizer, ids[n])))
    print("| completion chars | tokens | math_reward CPU s | vs smallest | completion_offsets CPU s | vs smallest |")
    print("|---|---|---|---|---|---|")
    r0, o0 = statistics.median(reward[SIZES[0]]), statistics.median(offsets[SIZES[0]])
    for n in SIZES:
        r, o = statistics.median(reward[n]), statistics.median(offsets[n])
        print(f"| {len(texts[n])} | {len(ids[n])} | {r:.4f} | {r / r0:.2f}x | {o:.3f} | {o / o0:.2f}x |")


if __name__ == "__main__":
    main()
