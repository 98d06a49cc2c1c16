"""This session's isolation, as every test session's (tests/isolation.py): a HOME of its own, and a
test that touches a path outside the checkout, the interpreter, installed packages and the
temporary folder fails, naming it."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import isolation  # noqa: E402

isolation.install()
from isolation import pytest_make_collect_report, pytest_runtest_call, pytest_runtest_setup, pytest_runtest_teardown  # noqa: E402,F401
