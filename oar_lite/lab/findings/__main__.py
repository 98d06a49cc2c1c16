"""``python -m oar_lite.lab.findings``: what the series found, from the shipped data."""
from __future__ import annotations

from pathlib import Path

from ...settings import parser
from . import batch, conclusion, readme, smollm2


def main(argv=None) -> None:
    ap = parser("What the series found, from the shipped data.")
    ap.add_argument("--write-readme", type=Path, metavar="README", help="rewrite that README's findings block")
    ap.add_argument("--learning-tables", action="store_true",
                    help="print the SmolLM2 studies' lead sentence and tables (benchmarks/RESULTS.md, notebook 07)")
    ap.add_argument("--batch", action="store_true",
                    help="print the batch-size study pooled over every seed set: its table, the credit methods on "
                         "GRPO's curve and its reading (notebook 06, section 10; benchmarks/RESULTS.md)")
    args = ap.parse_args(argv)
    if args.batch:
        found = batch.worlds()
        print(batch.table(found))
        print()
        print(batch.prose.render(batch.TEMPLATE, "marks", worlds=found))
        print()
        print(batch.conclusion(found))
    elif args.learning_tables:
        found = smollm2.finale()
        print(smollm2.text("lead", found))
        print()
        print(smollm2.text("tables", found))
    elif args.write_readme:
        readme.write(args.write_readme)
        print(f"wrote the findings block of {args.write_readme}")
    else:
        print(conclusion.text("conclusion"))
        print()
        print(readme.block())


if __name__ == "__main__":
    main()
