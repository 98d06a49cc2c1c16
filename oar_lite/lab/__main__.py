"""The lab's command line: ``python -m oar_lite.lab compare`` (the main job) and ``demo``; the
``oar-lite`` console script is the same (``pip install 'oar-lite[lab]'``).

    python -m oar_lite.lab compare                    # GRPO vs OAR-G vs OAR-P, 3 seeds (time: benchmarks/RESULTS.md)
    python -m oar_lite.lab compare --quick            # one seed, fewer steps
    python -m oar_lite.lab compare --methods uniform oar-g --seeds 0 1 --steps 20 --out results/mine
    python -m oar_lite.lab compare --methods uniform oar-g:answer_mean oar-p:answer_mean --digits 4 --target 0.5
    python -m oar_lite.lab demo                       # the quick comparison, then its table

Every setting of a run has its flag, named, typed, range-checked and explained by its
declaration (`oar_lite.settings`); flags are never abbreviated, contradictory ones are refused,
and a bad value is a usage error (exit 2). ``--methods`` takes the library's methods and the
course's and the lab's methods (`oar_lite.lab.scorers`, which `compare` imports).
"""
from __future__ import annotations

import argparse
import os
from dataclasses import asdict
import shlex
import sys

from ..attribution import CreditConfig
from ..settings import checked, parser, settings_of
from ..train import TrainConfig

LAB_EXTRA_MODULES = ("matplotlib", "jinja2", "trl", "peft", "accelerate", "datasets", "gguf")
"""What the lab's runs import, some only when they draw or report (the figure at a comparison's end):
checked before anything runs, so that a missing one stops the command at once, not after training."""


def _missing_extra() -> str | None:
    """The first module of `LAB_EXTRA_MODULES` that is not installed, or None."""
    import importlib.util

    return next((name for name in LAB_EXTRA_MODULES if importlib.util.find_spec(name) is None), None)


_MISSING = _missing_extra()
try:  # the course and the lab need their extras (matplotlib, TRL, ...): without them, say what to install
    if _MISSING is not None:
        raise ModuleNotFoundError(f"No module named {_MISSING!r}", name=_MISSING)
    from ..course import toy
    from . import compare
    from .report import terminal_summary, verdict
except ModuleNotFoundError as err:
    raise SystemExit(f"python -m oar_lite.lab (the oar-lite command) needs the lab's extra, and {err.name} is not "
                     "installed: pip install 'oar-lite[lab]'") from err


def profile_defaults() -> dict[str, str]:
    """How each flag's default reads in the help: the profiles' values."""
    def said(get):
        values = {p: get(compare.PROFILES[p]) for p in ("default", "quick", "credit")}
        return ", ".join(f"{p} {v}" for p, v in values.items()) if len(set(values.values())) > 1 else values["default"]

    def value(profile, name):
        if name in settings_of(TrainConfig):
            return getattr(profile.config, name)
        return {**asdict(CreditConfig()), **profile.credit}[name]

    out = {name: said(lambda p, name=name: value(p, name)) for name in compare.run_settings()}
    return {**out, "target": said(lambda p: p.target), "jobs": f"{compare.CLI_JOBS} (one per core, at most 2)"}


def _parser() -> argparse.ArgumentParser:
    top = parser("OAR for GRPO: train and compare.", prog="python -m oar_lite.lab")
    sub = top.add_subparsers(dest="command", required=True)
    defaults = profile_defaults()

    def common(p):
        p.add_argument("--methods", nargs="+", type=compare.method_name, default=list(compare.COMPARED_TRAINING_METHODS),
                       help="credit assignment methods (uniform = plain GRPO; oar-g, oar-p, entropy, random, oracle; "
                            "a P_final mode after a colon: oar-p:answer_joint)")
        p.add_argument("--seeds", nargs="+", type=checked("seeds", settings_of(TrainConfig)["seed"].range),
                       default=None, help=f"seeds (default: "
                                          f"{', '.join(f'{k} {list(v.seeds)}' for k, v in compare.PROFILES.items())})")
        p.add_argument("--out", default="results", help="output folder (default: results)")
        p.add_argument("--model", default=None, help="toy model folder (default: the shipped oar_lite/course/data/toy-model)")
        p.add_argument("--digits", type=int, nargs="+", default=None, metavar="D",
                       help="digits of the problems, one number or a low high range (default 2 4); other than "
                            "2-4, the held-out set is 200 fresh problems with those digits")
        p.add_argument("--quiet", action="store_true", help="no progress bars")
        p.add_argument("--verbose", action="store_true",
                       help="show the libraries' warnings, logs and weight-loading bars (hidden by default)")
        p.add_argument("--profile", default=None, choices=("default", "quick", "credit"),
                       help="budget and batch settings (oar_lite.lab.compare.PROFILES; default: default); "
                            "'credit': the regime of notebook 06")
        p.add_argument("--tiny", action="store_true", help=argparse.SUPPRESS)  # test size
        compare.add_run_flags(p, compare.RUN_OPTIONS, defaults)

    compare_ = sub.add_parser("compare", help="train GRPO, OAR-G and OAR-P on the toy task and compare them")
    compare_.add_argument("--quick", action="store_true", help="one seed, fewer steps (--profile quick): for trying it")
    common(compare_)
    demo = sub.add_parser("demo", help="the quick comparison, then its table")
    demo.add_argument("--quick", action="store_true", help="accepted for symmetry with compare: the demo is always quick")
    common(demo)
    return top


def chosen_profile(parser: argparse.ArgumentParser, args: argparse.Namespace) -> str:
    """The profile the flags ask for (the hidden ``--tiny``, for tests, shrinks any of them);
    contradictory flags (``--quick`` or ``demo`` with another ``--profile``) are a usage error."""
    if args.tiny:
        return "tiny"
    asked = {"--profile": args.profile, "--quick": "quick" if args.quick else None,
             "demo": "quick" if args.command == "demo" else None}
    given = {k: v for k, v in asked.items() if v is not None}
    if len(set(given.values())) > 1:
        parser.error(f"{' and '.join(given)} ask for different profiles ({', '.join(dict.fromkeys(given.values()))}); "
                     "give one")
    return next(iter(given.values()), "default")


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
    """Entry point of ``python -m oar_lite.lab`` and the ``oar-lite`` script."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    argv = sys.argv[1:] if argv is None else list(argv)
    command_line = _parser()
    args = command_line.parse_args(argv)
    if not args.verbose:
        quiet_libraries()
    profile = chosen_profile(command_line, args)
    digits = args.digits
    if digits is not None:
        try:
            if len(digits) > 2:
                raise ValueError("expected one number or a low high pair")
            digits = toy.digit_range(digits[0] if len(digits) == 1 else tuple(digits))
        except ValueError as err:
            command_line.error(f"--digits {' '.join(map(str, args.digits))}: {err}")
    overrides = compare.run_overrides(command_line, args, args.methods)  # a flag without effect: a usage error
    summary = compare.compare(args.methods, args.seeds, steps=args.steps, out=args.out, profile=profile, target=args.target,
                      jobs=compare.CLI_JOBS if args.jobs is None else args.jobs,
                      threads=compare.RUN_OPTIONS["threads"].default if args.threads is None else args.threads, model_dir=args.model, overrides=overrides,
                      digits=digits, progress=not args.quiet, command="python -m oar_lite.lab " + shlex.join(argv))
    print(terminal_summary(summary) if args.command == "demo" else "\n".join(verdict(summary)))
    print(f"wrote {args.out}/compare.md (full tables), compare.png, compare.jsonl")
    return 0


if __name__ == "__main__":
    sys.exit(main())
