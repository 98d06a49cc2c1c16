"""The positive control's sweep (issue 28): per scratch-word world k, the share of a batch
gradient's variance that reward-irrelevant tokens carry beside the screen's learning result
(GRPO against the oracle that knows which tokens matter, and its inverted and shuffled
controls), the world the pre-registered follow-up rule picks for the confirmatory run, and
that run. It trains nothing: the runs are ``benchmarks/credit_regime.py`` entries of
``positive_control.json`` and ``benchmarks/noise_share.py`` entries of ``noise_share.json``
(commands in benchmarks/RESULTS.md, "When credit must pay"); the reading is
`oar_lite.lab.findings.positive.findings`::

    python -m benchmarks.positive_control            # the sweep, the pick and the conclusion
    python -m benchmarks.positive_control --pick     # only the k the follow-up rule picks
    python -m benchmarks.positive_control --pooled   # the picked world's seed sets, pooled first (issue 39)
"""
from __future__ import annotations

import json
from pathlib import Path

from oar_lite import settings
from oar_lite.lab.findings import positive


def main(argv=None) -> dict | None:
    ap = settings.parser(__doc__.split("\n\n")[0])
    ap.add_argument("--pick", action="store_true", help="print only the k the follow-up rule picks")
    ap.add_argument("--pooled", action="store_true",
                    help="print the picked world's seed sets (screen, confirmatory, external replication) pooled")
    ap.add_argument("--control", type=Path, default=None, help="positive_control.json (default: the shipped one)")
    ap.add_argument("--shares", type=Path, default=None, help="noise_share.json (default: the shipped one)")
    args = ap.parse_args(argv)
    read = lambda p: None if p is None else json.loads(p.read_text())
    f = positive.findings(read(args.control), read(args.shares))
    if f is None:
        ap.exit(1, "no screened world yet: run the screens (benchmarks/RESULTS.md, 'When credit must pay')\n")
    if args.pick:
        print(f["pick"]["k"])
        return f
    if args.pooled:
        if f["pooled"] is None:
            ap.exit(1, f"fewer than 2 seed sets with per-seed readings in the k = {f['pick']['k']} world\n")
        print(positive.pooled_table(f["pooled"]))
        print()
        print(positive.pooled_sentence(f["pooled"]))
        return f
    print(positive.table(f["sweep"]))
    print()
    print(positive.conclusion(f))
    return f


if __name__ == "__main__":
    main()
