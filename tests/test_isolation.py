"""The test sessions' isolation (tests/isolation.py): a test that touches a path outside the
checkout, the interpreter, installed packages and the temporary folder fails, naming the path
and itself; the session's HOME and caches are temporary."""
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import isolation

ROOT = Path(__file__).resolve().parents[1]


def test_a_test_touching_a_folder_outside_the_allowed_roots_fails_naming_it(tmp_path):
    """In a pytest session of its own whose temporary folder is ``tmp_path/temp``, so that
    ``tmp_path/outside`` is outside every allowed root."""
    (tmp_path / "temp").mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "data.txt").write_text("one machine's file")
    (outside / "bin").mkdir()
    (outside / "bin" / "tool").write_text("#!/bin/sh\n")
    (outside / "bin" / "tool").chmod(0o755)
    env = {**os.environ, "TMPDIR": str(tmp_path / "temp"), "OUTSIDE": str(outside),
           "PATH": os.pathsep.join([str(outside / "bin"), os.environ.get("PATH", "")])}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                           "tests/helpers/reads_outside.py"], cwd=ROOT, env=env, capture_output=True, text=True)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "4 failed, 1 passed, 1 error" in out, out  # the fixture's is an error at setup
    for test, when, path, event in (("test_opens_a_file_outside", "call", outside / "data.txt", "open"),
                                    ("test_finds_an_adapter_outside", "call", outside / "checkpoint-12" / "adapter_config.json", "os.stat"),
                                    ("test_swallows_the_refusal", "call", outside, "os.listdir"),
                                    ("test_with_a_fixture_writing_outside", "setup", outside / "made-by-a-fixture", "os.mkdir"),
                                    ("test_finds_a_program_on_the_path", "call", outside / "bin" / "tool", "open")):
        assert f"tests/helpers/reads_outside.py::{test} touched 1 path(s) outside" in out and f"during its {when}" in out, out
        assert f"    {path}  ({event})" in out, out
    assert not (outside / "made-by-a-fixture").exists()  # refused, not only reported


def test_the_session_runs_with_a_home_and_caches_of_its_own():
    assert Path.home().name.startswith("oar-lite-test-home-") and Path.home().parent == Path(tempfile.gettempdir())
    assert os.environ["OAR_LITE_CACHE"] == str(ROOT / "build" / "cache" / "oar-lite")
    assert not [name for name in isolation.DEVELOPER_VARIABLES if name in os.environ]
