"""Run by tests/test_isolation.py in a pytest session of its own (not collected by the suites:
its name is not test_*.py): tests that touch a folder made outside the session's allowed roots
(``OUTSIDE``), and one that stays inside them, under tests/isolation.py's audit hook."""
import os
import shutil
from pathlib import Path

import pytest

OUTSIDE = Path(os.environ["OUTSIDE"])


def test_opens_a_file_outside():
    with open(OUTSIDE / "data.txt") as f:
        f.read()


def test_finds_an_adapter_outside():
    """The check that made issue 45: a folder only the machine that trained it has."""
    assert not (OUTSIDE / "checkpoint-12" / "adapter_config.json").is_file()


def test_swallows_the_refusal():
    try:
        os.listdir(OUTSIDE)
    except OSError:
        pass


@pytest.fixture
def written_outside():
    (OUTSIDE / "made-by-a-fixture").mkdir()


def test_with_a_fixture_writing_outside(written_outside):
    pass


def test_stays_inside(tmp_path):
    (tmp_path / "mine.txt").write_text("kept")
    assert (tmp_path / "mine.txt").read_text() == "kept"
    assert "def test_stays_inside" in Path(__file__).read_text()  # the checkout
    assert os.listdir(Path(os.__file__).parent)  # the interpreter's standard library


def test_finds_a_program_on_the_path():
    """``OUTSIDE/bin`` is on PATH: finding a program there (a stat) is allowed; reading it is refused
    and fails the test, naming only the open."""
    found = shutil.which("tool")
    assert found == str(OUTSIDE / "bin" / "tool")
    with pytest.raises(PermissionError):
        open(found).close()
