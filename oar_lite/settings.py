"""The settings system: each setting declared once (`Setting`: default, meaning, range), its
range check, one helper so every config says the same (e.g. ``TrainConfig.max_grad_norm=0 is
out of range: expected a finite number > 0``), and its command-line flag.

Flags: a setting's flag is its name with dashes (``--group-size``), generated from its
declaration (`add_setting_flags`: type, range, help), so a bad value is a usage error (exit 2)
that names the flag and the range. `parser` builds every command line of the repository (the
lab's, the benchmarks', the scripts'; tests/test_silent_cases.py finds them by reading the
tree): none takes an abbreviated flag.
"""
from __future__ import annotations

import argparse
import dataclasses
import math
import numbers
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Setting:
    """One setting, declared once: its default, what it means (``help``: command-line flags,
    `oar_lite.trl.OARConfig` and the docs reuse it), a short ``label`` for reports (default:
    the name), its allowed range (`check_number`'s keywords; empty: not a number) and, for
    `oar_lite.train.TrainConfig`, what a resumed run may change (``resume``: ``"more"``, a
    run may be given more; ``"bookkeeping"``, never changes a result; ``"evaluation"``,
    changes the evaluations from where it changes)."""

    default: Any
    help: str
    range: dict = field(default_factory=dict)
    label: str | None = None
    resume: str | None = None

    def field(self):
        """A dataclass field with this default that carries the setting in its metadata."""
        return dataclasses.field(default=self.default, metadata={"setting": self, "help": self.help})


def setting(default, help: str, *, label: str | None = None, resume: str | None = None, **allowed):
    """A dataclass field declared with `Setting` (``allowed``: `check_number`'s range keywords)."""
    return Setting(default, help, allowed, label, resume).field()


def settings_of(config) -> dict[str, Setting]:
    """``{name: Setting}`` of a dataclass (or instance) declared with `setting`, in field order."""
    return {f.name: f.metadata["setting"] for f in dataclasses.fields(config) if "setting" in f.metadata}


def check_settings(config, owner: str) -> None:
    """Range-check every numeric `Setting` of the dataclass instance ``config`` (ValueError)."""
    for name, declared in settings_of(config).items():
        if declared.range:
            check_number(owner, name, getattr(config, name), **declared.range)


def describe_range(*, integer: bool = False, low=None, high=None, low_open: bool = False, high_open: bool = False,
                   optional: bool = False) -> str:
    """The allowed range in words, e.g. ``"an integer >= 1"`` or ``"a finite number in (0, 1]"``."""
    kind = "an integer" if integer else "a finite number"
    if low is not None and high is not None:
        text = f"{kind} in {'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
    elif low is not None:
        text = f"{kind} {'>' if low_open else '>='} {low:g}"
    elif high is not None:
        text = f"{kind} {'<' if high_open else '<='} {high:g}"
    else:
        text = kind
    return text + (" or None" if optional else "")


def check_number(owner: str, name: str, value, *, integer: bool = False, low=None, high=None,
                 low_open: bool = False, high_open: bool = False, optional: bool = False):
    """``value`` if it is a real number (an integer if ``integer``; finite otherwise; never a
    bool) in range, else a ValueError naming ``owner.name`` (``name`` alone when ``owner`` is
    empty), the value and the range. ``optional`` lets ``None`` through."""
    if value is None and optional:
        return value
    expected = describe_range(integer=integer, low=low, high=high, low_open=low_open, high_open=high_open,
                              optional=optional)
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
    if ok and integer:
        ok = isinstance(value, numbers.Integral)
    if ok and not integer:
        try:
            ok = math.isfinite(value)
        except OverflowError:  # an int too large for a float
            ok = False
    if ok and low is not None:
        ok = value > low if low_open else value >= low
    if ok and high is not None:
        ok = value < high if high_open else value <= high
    if not ok:
        raise ValueError(f"{owner + '.' if owner else ''}{name}={value!r} is out of range: expected {expected}")
    return value


# ----------------------------------------------------------------------------- flags

class Parser(argparse.ArgumentParser):
    """`argparse.ArgumentParser` that never takes an abbreviated flag (``--ste`` is not
    ``--steps``); its subcommands' parsers are of this class too (``add_subparsers`` makes
    them of the parser's own class). ``allow_abbrev=True`` is refused (ValueError)."""

    def __init__(self, *args, allow_abbrev: bool = False, **kwargs):
        if allow_abbrev:
            raise ValueError("allow_abbrev=True: the repository's command lines take no abbreviated flags")
        super().__init__(*args, allow_abbrev=False, **kwargs)


def parser(description: str | None = None, *, dataclass_types=(), **kwargs) -> argparse.ArgumentParser:
    """The one builder of the repository's command lines: a `Parser` (``kwargs``: argparse's),
    or, given ``dataclass_types``, transformers' ``HfArgumentParser`` over them (one flag per
    field, as ``scripts/train_trl.py`` reads `oar_lite.trl.OARConfig`), both without abbreviations."""
    if kwargs.pop("allow_abbrev", False):
        raise ValueError("allow_abbrev=True: the repository's command lines take no abbreviated flags")
    if dataclass_types:
        from transformers import HfArgumentParser

        return HfArgumentParser(dataclass_types, description=description, allow_abbrev=False, **kwargs)
    return Parser(description=description, **kwargs)


def flag(name: str) -> str:
    """A setting's flag: its name with dashes."""
    return "--" + name.replace("_", "-")


def checked(name: str, allowed: dict):
    """An argparse ``type`` that reads a number and checks it against ``allowed``
    (`check_number`'s range keywords), naming the flag and the range when it is refused."""
    allowed = {**allowed, "optional": False}

    def parse(text: str):
        try:
            return check_number("", flag(name), (int if allowed.get("integer") else float)(text), **allowed)
        except ValueError as err:
            raise argparse.ArgumentTypeError(str(err) if "out of range" in str(err) else
                                             f"{flag(name)}={text!r}: expected {describe_range(**allowed)}") from None
    return parse


def add_setting_flags(p: argparse.ArgumentParser, settings: dict, defaults: dict[str, str] | None = None, *,
                      short: dict[str, str] | None = None) -> None:
    """One flag per `Setting` in ``settings`` (``{name: Setting}``), default None (unchanged);
    its help is the setting's, with ``defaults[name]`` (how the default reads) after it;
    ``short``: a second, shorter flag of some (``{"learning_rate": "--lr"}``)."""
    for name, declared in settings.items():
        p.add_argument(flag(name), *([short[name]] if name in (short or {}) else []), dest=name, default=None,
                       type=checked(name, declared.range), metavar=name.upper(),
                       help=f"{declared.help} Default: {(defaults or {}).get(name, declared.default)}.")


def changed_settings(args: argparse.Namespace, settings: dict) -> dict:
    """``{name: value}`` of the `add_setting_flags` flags given on the command line."""
    return {name: getattr(args, name) for name in settings if getattr(args, name) is not None}
