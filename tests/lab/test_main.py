"""`python -m oar_lite.lab` (`oar_lite.lab.__main__`; its flags from `oar_lite.settings`): flags from the settings' declarations,
no abbreviations, contradictions refused, bad values a usage error."""
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import oar_lite.lab.compare
from oar_lite.lab.__main__ import main
from oar_lite.train import TrainConfig

ROOT = Path(__file__).resolve().parent.parent.parent
QUIET_PROBE = """
import sys, warnings
if sys.argv[1] == "quiet":
    from oar_lite.lab.__main__ import quiet_libraries
    quiet_libraries()
from oar_lite.course import toy
toy.load_model()
warnings.warn_explicit("library-api-change", FutureWarning, "lib.py", 1, module="transformers.modeling_utils")
warnings.warn_explicit("library-user-warning", UserWarning, "lib.py", 1, module="torch.utils.data")
warnings.warn_explicit("oar-lite-own-warning", UserWarning, "own.py", 1, module="oar_lite.lab.compare")
"""


class _Reached(Exception):
    pass


@pytest.fixture
def no_compare(monkeypatch):
    def fake(*args, **kwargs):
        raise _Reached(kwargs)

    monkeypatch.setattr(oar_lite.lab.compare, "compare", fake)


@pytest.mark.parametrize("flag, value", [
    ("--lr", "nan"), ("--lr", "0"), ("--lr", "inf"), ("--quantile", "1.5"), ("--boost", "-1"), ("--boost", "nan"),
    ("--floor", "inf"), ("--prompts", "0"), ("--group-size", "1"), ("--iterations", "0"), ("--beta", "-0.1"),
    ("--noise-std", "nan"), ("--eval-every", "-1"), ("--eval-size", "-5"), ("--steps", "0"), ("--seeds", "-1"),
    ("--target", "nan"), ("--target", "0"), ("--jobs", "0"), ("--threads", "0"),
])
def test_cli_refuses_bad_flags(flag, value, no_compare, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["compare", f"{flag}={value}", "--out", "/tmp/never-written"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {flag}" in err or f"/{flag}:" in err  # argparse names the flag (and its other name)
    assert "is out of range: expected" in err


@settings(max_examples=100, deadline=None)
@given(value=st.floats(allow_nan=True, allow_infinity=True))
def test_cli_lr_property(value):
    """--lr: refused naming the flag, or passed on as a learning rate TrainConfig accepts."""
    import contextlib
    import io

    original = oar_lite.lab.compare.compare
    oar_lite.lab.compare.compare = lambda *a, **kw: (_ for _ in ()).throw(_Reached(kw))
    try:
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr):
            try:
                main(["compare", f"--lr={value!r}", "--out", "/tmp/never-written"])
            except SystemExit as exit_info:
                assert exit_info.code == 2 and "--learning-rate/--lr: --learning-rate=" in stderr.getvalue()
                return
            except _Reached as reached:
                assert TrainConfig(learning_rate=reached.args[0]["overrides"]["learning_rate"])
                return
        raise AssertionError("main neither refused the flag nor reached compare")
    finally:
        oar_lite.lab.compare.compare = original


@pytest.mark.parametrize("mode", ["quiet", pytest.param("verbose", marks=pytest.mark.slow)])  # one subprocess in the fast suite
def test_cli_hides_library_noise_unless_verbose(mode, tmp_path):
    import os
    import subprocess

    env = {k: v for k, v in os.environ.items()
           if k not in ("HF_HUB_DISABLE_PROGRESS_BARS", "TRANSFORMERS_VERBOSITY", "PYTHONWARNINGS")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    proc = subprocess.run([sys.executable, "-c", QUIET_PROBE, mode], env=env, cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "oar-lite-own-warning" in proc.stderr  # ours always show
    noise = ("Loading weights" in proc.stderr, "library-api-change" in proc.stderr, "library-user-warning" in proc.stderr)
    assert noise == ((False,) * 3 if mode == "quiet" else (True,) * 3), proc.stderr[-3000:]


def test_verbose_flag_reaches_main():
    from oar_lite.lab.__main__ import _parser

    assert _parser().parse_args(["demo", "--verbose"]).verbose
    assert not _parser().parse_args(["compare", "--quick"]).verbose
    assert _parser().parse_args(["demo", "--quick"]).command == "demo"


def test_compare_cli_trains_a_control(tmp_path):
    from oar_lite.lab.__main__ import main
    assert main(["compare", "--tiny", "--methods", "uniform", "inverted:oracle", "--out", str(tmp_path),
                 "--quiet", "--jobs", "1"]) == 0
    from oar_lite.checkpoint import read_jsonl
    records = [r for r in read_jsonl(tmp_path / "compare.jsonl") if r["type"] == "train"]
    assert {r["method"] for r in records} == {"uniform", "inverted:oracle"}
    assert (tmp_path / "runs" / "inverted-oracle-seed0" / "checkpoint.pt").exists()
    from oar_lite.lab import compare
    from oar_lite.course.oracle import ORACLE_BOOST
    assert compare.PROFILES["credit"].credit == {"boost": ORACLE_BOOST} and len(compare.PROFILES["credit"].seeds) >= 5


def test_the_lab_command_names_its_extra_before_running_when_a_module_is_missing(monkeypatch):
    """Its extra is checked before any run: a bare install stopped only at the figure, after training
    (tests_install's bare wheel found it: matplotlib is imported only where the figure is drawn)."""
    import oar_lite.lab.__main__ as lab_main

    assert lab_main._missing_extra() is None  # this environment has the lab's extra
    monkeypatch.setattr(lab_main, "LAB_EXTRA_MODULES", ("matplotlib", "no_such_module_for_oar_lite"))
    assert lab_main._missing_extra() == "no_such_module_for_oar_lite"
    code = ("import importlib.util, runpy\n"
            "real = importlib.util.find_spec\n"
            "importlib.util.find_spec = lambda name, *a: None if name == 'matplotlib' else real(name, *a)\n"
            "runpy.run_module('oar_lite.lab', run_name='__main__')\n")
    proc = subprocess.run([sys.executable, "-c", code, "demo", "--tiny"], capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0 and "matplotlib is not installed: pip install 'oar-lite[lab]'" in proc.stderr, proc.stderr
    assert "step" not in proc.stderr  # nothing trained


def test_the_lab_commands_extra_modules_are_what_the_lab_extra_installs():
    """`LAB_EXTRA_MODULES` names only packages that ``pip install 'oar-lite[lab]'`` installs (through
    the extras it includes), so the command's advice installs what it found missing."""
    import re
    import tomllib

    import oar_lite.lab.__main__ as lab_main

    extras = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())["project"]["optional-dependencies"]

    def packages(extra: str) -> set[str]:
        found = set()
        for requirement in extras[extra]:
            included = re.match(r"oar-lite\[([\w-]+)\]", requirement)
            found |= packages(included.group(1)) if included else {re.split(r"[<>=!~\[; ]", requirement)[0].lower()}
        return found

    assert set(lab_main.LAB_EXTRA_MODULES) <= packages("lab"), set(lab_main.LAB_EXTRA_MODULES) - packages("lab")
