"""The command-line convention of ``python -m oar_lite`` and the benchmarks: a setting's flag
is its field's name with dashes (``--group-size``, ``--noise-std``), generated from its
declaration (`oar_lite.settings.Setting`: type, range, help), so a bad value is a usage error
(exit 2) that names the flag and the range. Parsers never take abbreviations.
"""
from __future__ import annotations

import argparse

from ..attribution import CreditConfig, parse_method
from ..settings import check_number, describe_range, settings_of
from ..train import TrainConfig

SHORT_FLAGS = {"learning_rate": "--lr", "prompts_per_step": "--prompts", "num_iterations": "--iterations"}
"""Shorter second names of some flags."""


def flag(name: str) -> str:
    """A setting's flag: its name with dashes."""
    return "--" + name.replace("_", "-")


def run_settings() -> dict:
    """``{name: Setting}``: every numeric setting of a run (`TrainConfig`, its `CreditConfig`),
    but the seed (runs take seeds by ``--seeds``)."""
    return {name: s for name, s in {**settings_of(TrainConfig), **settings_of(CreditConfig)}.items()
            if s.range and name != "seed"}


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


def method_name(text: str) -> str:
    """An argparse ``type`` for methods: a name `parse_method` knows (its error lists them)."""
    try:
        parse_method(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return text


def parser(description: str, **kwargs) -> argparse.ArgumentParser:
    """An `argparse.ArgumentParser` that takes no abbreviated flags."""
    return argparse.ArgumentParser(description=description, allow_abbrev=False, **kwargs)


def add_setting_flags(p: argparse.ArgumentParser, settings: dict, defaults: dict[str, str] | None = None) -> None:
    """One flag per `Setting` in ``settings`` (``{name: Setting}``), default None (unchanged);
    its help is the setting's, with ``defaults[name]`` (how the default reads) after it."""
    for name, declared in settings.items():
        p.add_argument(flag(name), *([SHORT_FLAGS[name]] if name in SHORT_FLAGS else []), dest=name, default=None,
                       type=checked(name, declared.range), metavar=name.upper(),
                       help=f"{declared.help} Default: {(defaults or {}).get(name, declared.default)}.")


def changed_settings(args: argparse.Namespace, settings: dict) -> dict:
    """``{name: value}`` of the `add_setting_flags` flags given on the command line."""
    return {name: getattr(args, name) for name in settings if getattr(args, name) is not None}
