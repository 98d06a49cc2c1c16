"""Command line: ``python -m oar_lite compare`` (the main job) and ``python -m oar_lite demo``.

    python -m oar_lite compare                        # GRPO vs OAR-G vs OAR-P, 3 seeds (time: benchmarks/RESULTS.md)
    python -m oar_lite compare --quick                # one seed, fewer steps
    python -m oar_lite compare --methods uniform oar-g --seeds 0 1 --steps 20 --out results/mine
    python -m oar_lite compare --methods uniform oar-g:answer_mean oar-p:answer_mean --digits 4 --target 0.5
    python -m oar_lite demo                           # the quick comparison, then its table
"""
from __future__ import annotations

import argparse
import os
import shlex
import sys


def _parser() -> argparse.ArgumentParser:
    from .compare import COMPARED_TRAINING_METHODS

    parser = argparse.ArgumentParser(prog="python -m oar_lite", description="OAR for GRPO: train and compare.")
    sub = parser.add_subparsers(dest="command", required=True)

    def common(p):
        p.add_argument("--methods", nargs="+", default=list(COMPARED_TRAINING_METHODS),
                       help="credit assignment methods (uniform = plain GRPO; oar-g, oar-p, entropy, random; "
                            "a P_final mode after a colon: oar-p:answer_joint)")
        p.add_argument("--seeds", nargs="+", type=int, default=None, help="seeds (default: 0 1 2; --quick: 0)")
        p.add_argument("--steps", type=int, default=None, help="training steps per run (default 30; --quick: 10)")
        p.add_argument("--out", default="results", help="output folder (default: results)")
        p.add_argument("--target", type=float, default=None,
                       help="held-out accuracy to reach (default 0.85; --quick: 0.7)")
        p.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1),
                       help="runs trained at the same time, one process each (default: 2)")
        p.add_argument("--threads", type=int, default=1, help="torch threads per run (default 1)")
        p.add_argument("--model", default=None, help="toy model folder (default: the shipped oar_lite/data/toy-model)")
        p.add_argument("--lr", type=float, default=None, help="learning rate")
        p.add_argument("--quantile", type=float, default=None, help="OAR suppression quantile q")
        p.add_argument("--boost", type=float, default=None, help="OAR boost (the paper's beta)")
        p.add_argument("--floor", type=float, default=None, help="OAR weight floor")
        p.add_argument("--prompts", type=int, default=None, help="prompts per step")
        p.add_argument("--group-size", type=int, default=None, help="completions per prompt")
        p.add_argument("--iterations", type=int, default=None, help="optimizer steps per batch (num_iterations)")
        p.add_argument("--beta", type=float, default=None, help="KL coefficient to the initial model")
        p.add_argument("--noise-std", type=float, default=None, help="OAR-G embedding noise std (default 1e-3)")
        p.add_argument("--digits", type=int, nargs="+", default=None, metavar="D",
                       help="digits of the problems, one number or a low high range (default 2 4); other than "
                            "2-4, the held-out set is 200 fresh problems with those digits")
        p.add_argument("--eval-every", type=int, default=None, help="evaluate every N steps (default 5)")
        p.add_argument("--eval-size", type=int, default=None,
                       help="held-out problems evaluated (default all 200; --quick: 100)")
        p.add_argument("--quiet", action="store_true", help="no progress bars")
        p.add_argument("--verbose", action="store_true",
                       help="show the libraries' warnings, logs and weight-loading bars (hidden by default)")
        p.add_argument("--profile", default="default", choices=("default", "quick", "credit"),
                       help="budget and batch settings (oar_lite.compare.PROFILES); 'credit': the regime of notebook 06")
        p.add_argument("--tiny", action="store_true", help=argparse.SUPPRESS)  # test size

    compare = sub.add_parser("compare", help="train GRPO, OAR-G and OAR-P on the toy task and compare them")
    common(compare)
    compare.add_argument("--quick", action="store_true", help="one seed, fewer steps: for trying it")
    demo = sub.add_parser("demo", help="the quick comparison, then its table")
    common(demo)
    demo.add_argument("--quick", action="store_true", help="accepted for symmetry with compare: the demo is always quick")
    return parser


def check_flags(args: argparse.Namespace, names: dict[str, str]) -> None:
    """Range-check the numeric flags with the ranges of the settings they set (``names``: flag
    to `TrainConfig` or `CreditConfig` field; `oar_lite.compare.RUN_RANGES`); ValueError names the flag."""
    from .attribution import CREDIT_RANGES
    from .checks import check_number
    from .compare import RUN_RANGES
    from .train import NUMERIC_RANGES

    ranges = {**NUMERIC_RANGES, **CREDIT_RANGES}

    def flag(name: str) -> str:
        return "--" + name.replace("_", "-")

    for name, field in names.items():
        check_number("", flag(name), getattr(args, name), **{**ranges[field], "optional": True})
    check_number("", "--steps", args.steps, **{**NUMERIC_RANGES["steps"], "optional": True})
    for seed in args.seeds or ():
        check_number("", "--seeds", seed, **NUMERIC_RANGES["seed"])
    for name in ("target", "jobs", "threads"):
        check_number("", flag(name), getattr(args, name), **{**RUN_RANGES[name], "optional": True})


LIBRARIES = ("torch", "transformers", "trl", "peft", "accelerate", "datasets", "huggingface_hub", "tokenizers")
"""Libraries whose warnings the command line hides unless ``--verbose``."""


def quiet_libraries() -> None:
    """Hide what a command-line user cannot act on: the `LIBRARIES`' Future-, Deprecation- and
    UserWarnings, transformers' info logs and weight-loading bars; set in the environment too,
    so that compare's worker processes start quiet. oar_lite's own warnings stay visible."""
    import warnings

    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # transformers' tqdm follows huggingface_hub's switch
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    # resource_tracker: multiprocessing's note at exit about a semaphore it cleans up itself
    os.environ.setdefault("PYTHONWARNINGS", "ignore::FutureWarning,ignore::DeprecationWarning,"
                                            "ignore:resource_tracker:UserWarning")
    libraries = rf"({'|'.join(LIBRARIES)})(\.|$)"
    for category in (FutureWarning, DeprecationWarning, UserWarning):
        warnings.filterwarnings("ignore", category=category, module=libraries)


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m oar_lite`` and the ``oar-lite`` script."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = _parser()
    args = parser.parse_args(argv)
    if not args.verbose:
        quiet_libraries()

    from .compare import compare

    quick = args.command == "demo" or getattr(args, "quick", False)
    profile = "tiny" if args.tiny else "quick" if quick else args.profile
    names = {"lr": "learning_rate", "quantile": "quantile", "boost": "boost", "floor": "floor",
             "prompts": "prompts_per_step", "group_size": "group_size", "iterations": "num_iterations", "beta": "beta",
             "noise_std": "noise_std", "eval_every": "eval_every", "eval_size": "eval_size"}
    overrides = {field: getattr(args, flag) for flag, field in names.items() if getattr(args, flag) is not None}
    try:
        check_flags(args, names)
    except ValueError as err:
        parser.error(str(err))  # exit status 2 with the usage line, no traceback
    if args.digits is not None and len(args.digits) not in (1, 2):
        raise ValueError(f"--digits takes one number or a low high pair, got {args.digits}")
    digits = None if args.digits is None else args.digits[0] if len(args.digits) == 1 else args.digits
    summary = compare(args.methods, args.seeds, steps=args.steps, out=args.out, profile=profile, target=args.target,
                      jobs=args.jobs, threads=args.threads, model_dir=args.model, overrides=overrides, digits=digits,
                      progress=not args.quiet, command="python -m oar_lite " + shlex.join(argv))
    from .report import terminal_summary, verdict

    print(terminal_summary(summary) if args.command == "demo" else "\n".join(verdict(summary)))
    print(f"wrote {args.out}/compare.md (full tables), compare.png, compare.jsonl")
    return 0


if __name__ == "__main__":
    sys.exit(main())
