"""ARCA's adapter residual against the SmolLM2 ground truth and on an adapter's own completions.

Loads SmolLM2-135M-Instruct with a LoRA adapter trained by the SmolLM2 recipe (a TRL
checkpoint folder of `benchmarks/smollm2_learning.py run`, e.g. its ``checkpoint-12``), scores
the 20 shipped Monte-Carlo ground-truth completions with ARCA's signal and with OAR-P, OAR-G,
entropy and GRAIL, all with the adapter on, then samples a training step's batch of the laptop recipe
(4 training prompts x 8 completions at T = 1, 64 tokens) from the adapted model and scores those the same way
(`oar_lite.lab.adapter_signal`). The tables: AUC and Spearman against the labels, and the
concentration of each method's reshaped weights; and how far the scores are from the shipped
measurement's (`adapter_signal.agreement`: zero when the adapter and the scoring reproduce).
The run that trained the adapter (its ``run.json`` and ``heldout.jsonl``, next to the checkpoint
folder) is recorded as ``settings.adapter_run``; with ``RUNS`` set, paths under it are written
``$RUNS/...``::

    python -m benchmarks.adapter_residual --adapter $RUNS/uniform-seed1-lr0.0003/checkpoint-12 --ship
"""
from __future__ import annotations

import json
import random
import shlex
import time
from pathlib import Path

import torch

from oar_lite.lab import provenance

from . import common


def main(argv=None) -> dict:
    from oar_lite.lab import adapter_signal
    from oar_lite.lab.recipes import RECIPES

    laptop = RECIPES["laptop"]  # the batch a training step of the SmolLM2 recipe samples
    ap = common.parser(__doc__, "adapter_residual.json", timing=False)
    ap.add_argument("--adapter", type=Path, required=True, help="a peft adapter folder (TRL's checkpoint-N)")
    ap.add_argument("--prompts", type=int, default=laptop["prompts_per_step"],
                    help="training prompts sampled from the adapted model (default: the laptop recipe's)")
    ap.add_argument("--group-size", type=int, default=laptop["num_generations"],
                    help="completions per prompt (default: the laptop recipe's)")
    ap.add_argument("--max-new-tokens", type=int, default=laptop["max_completion_length"],
                    help="(default: the laptop recipe's completion length)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--methods", nargs="+", default=list(adapter_signal.METHODS))
    ap.add_argument("--ship", action="store_true", help=f"also write {adapter_signal.RESULT_PATH}")
    ap.add_argument("--note", default="", help="a note on the adapter run, kept with it (e.g. the code it ran)")
    args = ap.parse_args(argv)
    common.require_inputs(ap, "--adapter", [args.adapter], "adapter_config.json",
                          "a peft adapter folder such as a TRL run's checkpoint-12")
    from peft import PeftModel

    from oar_lite.course.models import load_smollm2
    from oar_lite.course.problems import format_prompt, heldout_split
    from oar_lite.lab import ground_truth

    from .smollm2_learning import SHOTS, SPLIT

    _, report = common.start(args, "adapter_residual", argv)
    base, tokenizer = load_smollm2()
    model = PeftModel.from_pretrained(base, str(args.adapter)).eval()
    data = ground_truth.load_ground_truth()
    t0 = time.process_time()
    rows = adapter_signal.score_ground_truth(model, tokenizer, data, args.methods, seed=args.seed)
    train, _ = heldout_split(**SPLIT)
    problems = random.Random(args.seed).sample(train, args.prompts)
    completions = adapter_signal.adapter_completions(
        model, tokenizer, [format_prompt(p, tokenizer, shots=SHOTS) for p in problems], group_size=args.group_size,
        max_new_tokens=args.max_new_tokens, seed=args.seed, methods=args.methods)
    report.update(settings={"adapter": common.portable(args.adapter), "methods": args.methods,
                            "prompts": args.prompts, "group_size": args.group_size,
                            "max_new_tokens": args.max_new_tokens, "seed": args.seed,
                            "questions": [p.question for p in problems], "cpu_seconds": round(time.process_time() - t0, 1),
                            "adapter_run": adapter_run(args.adapter, args.note)},
                  ground_truth=rows, adapter_completions=completions)
    if adapter_signal.RESULT_PATH.exists():
        report["agreement_with_shipped"] = adapter_signal.agreement(
            json.loads(adapter_signal.RESULT_PATH.read_text()), report)
    if args.ship:
        common.write_json(report, adapter_signal.RESULT_PATH)
    return common.finish(report, args.out, render)


def adapter_run(adapter: Path, note: str = "") -> dict:
    """What the run that trained ``adapter`` (a ``checkpoint-N`` folder) recorded next to it: its
    command, method, seed and split (``run.json``), the step N, and the held-out accuracy it measured
    at that step (``heldout.jsonl``, by decoding); ``{}`` when there is no ``run.json``."""
    from oar_lite.attribution import PLAIN_GRPO
    from oar_lite.checkpoint import read_jsonl

    run_file = adapter.parent / "run.json"
    if not run_file.is_file():
        return {}
    run = json.loads(run_file.read_text())
    step = int(adapter.name.rsplit("-", 1)[-1]) if adapter.name.startswith("checkpoint-") else None
    heldout = adapter.parent / "heldout.jsonl"
    accuracy = {r["decoding"]: r["accuracy"] for r in (read_jsonl(heldout) if heldout.is_file() else [])
                if r["step"] == step}
    settings = run.get("settings", {})
    method = settings.get("method")
    return {"command": provenance.command_line(shlex.split(run["command"])),
            "method": f"{method} (GRPO)" if method == PLAIN_GRPO else method, "seed": settings.get("seed"),
            "steps": step, "split": settings.get("split"), f"heldout_accuracy_step{step}": accuracy,
            **({"note": note} if note else {})}


def render(report: dict) -> str:
    from oar_lite.lab.adapter_signal import result_tables
    from oar_lite.lab.ground_truth import ground_truth_markdown
    from oar_lite.lab.report import markdown_table

    tables = result_tables(report)
    concentration = markdown_table(
        ["method", "completions", "effective share (95% interval)", "weight Gini", "effective-token ratio"],
        [[f"`{m}`", r["n"], f"{r['effective_share']:.2f} ± {r['effective_share_ci95']:.2f}", f"{r['gini']:.2f}",
          f"{r['effective_token_ratio']:.2f}"] for m, r in tables["concentration"].items()])
    agreement = report.get("agreement_with_shipped")
    compared = "" if not agreement else "\n\nAgainst the shipped measurement (largest absolute difference of the scores):\n\n" + "\n".join(
        markdown_table(["method", "ground-truth completions", "same sampled texts", "sampled completions"],
                       [[f"`{m}`", f"{a['ground_truth_max_abs']:.3g} (relative {a['ground_truth_max_rel']:.3g})",
                         f"{a['completions_same_text']}/{a['completions']}", f"{a['completions_max_abs']:.3g}"]
                        for m, a in agreement.items()]))
    return ("Against the Monte-Carlo labels (the shipped completions, the adapter on):\n\n"
            + ground_truth_markdown(tables["ground_truth"])
            + "\n\nOn the adapted model's own completions (each method's weights, `CreditConfig` defaults):\n\n"
            + "\n".join(concentration) + compared)


if __name__ == "__main__":
    torch.set_num_threads(1)
    main()
