"""The split of the tests into `make test` (fast) and `make test-slow` (issue 38): the `slow`
marker is registered (and unknown markers are errors), `make test` deselects it, `make test-slow`
selects it, and between them every notebook runs at full size. Read from ``make -n``, the
commands make would run. Also `scripts/ci_durations.py`, which prints the slowest at the end of CI."""
import json
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import torch
from conftest import covered, load_script

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "notebooks").glob("*.ipynb"))
SIZE, TEST = "OAR_LITE_SIZE", "test"
"""`make test` sets OAR_LITE_SIZE=test (`make grade` sets it to grading); a notebook that shrinks for it
reads `run_size() == "test"` (`oar_lite.course.sizes`, the one reader of the variable)."""
READS_TEST_SIZE = f'run_size() == "{TEST}"'
durations = load_script("ci_durations")


def pytest_runs(target: str) -> list[tuple[dict, list[str]]]:
    """``(environment assignments, pytest arguments)`` of each pytest command `make <target>` runs."""
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    out = subprocess.run(["make", "-n", "-s", "VENV=.venv", "-o", ".venv/.oar-lite-installed", target], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    runs = []
    for line in out.stdout.splitlines():
        words = shlex.split(line)
        env = {}
        while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[0]):
            name, _, value = words.pop(0).partition("=")
            env[name] = value
        if len(words) >= 3 and words[1:3] == ["-m", "pytest"]:
            runs.append((env, words[3:]))
    return runs


def marker_expression(args: list[str]):
    return args[args.index("-m") + 1] if "-m" in args else None


def test_the_slow_marker_is_registered_and_unknown_markers_are_errors(pytestconfig):
    assert any(line.split(":")[0].strip() == "slow" for line in pytestconfig.getini("markers"))
    assert pytestconfig.getoption("strict_markers") or "--strict-markers" in pytestconfig.getini("addopts")


def test_make_test_deselects_slow_and_make_test_slow_selects_it():
    fast = [(env, args) for env, args in pytest_runs("test") if "tests" in args]
    slow = [(env, args) for env, args in pytest_runs("test-slow") if "tests" in args]
    assert len(fast) == 1 and marker_expression(fast[0][1]) == "not slow", fast
    assert len(slow) == 1 and marker_expression(slow[0][1]) == "slow", slow


def test_every_notebook_runs_at_full_size_in_one_of_the_suites():
    """`make test` may run a notebook at test size (OAR_LITE_SIZE=test, which its parameters
    cell reads) or not at all; then `make test-slow` runs it at full size."""
    def notebooks(target):
        return [(env, [a for a in args if a.endswith(".ipynb")]) for env, args in pytest_runs(target)
                if any(a.endswith(".ipynb") for a in args)]

    fast, slow = notebooks("test"), notebooks("test-slow")
    assert fast and all("--nbval-lax" in args for _, args in pytest_runs("test") + pytest_runs("test-slow")
                        if any(a.endswith(".ipynb") for a in args))
    reads_it = {nb for nb in NOTEBOOKS if READS_TEST_SIZE in "".join(
        "".join(c["source"]) for c in json.loads((ROOT / nb).read_text())["cells"] if c["cell_type"] == "code")}
    at_test_size = {nb for env, nbs in fast if env.get(SIZE) == TEST for nb in nbs}
    full = {nb for env, nbs in fast + slow if env.get(SIZE) != TEST for nb in nbs} | (at_test_size - reads_it)
    missing = set(NOTEBOOKS) - full
    assert not missing, f"notebooks that no suite runs at full size: {sorted(missing)}"
    assert reads_it <= at_test_size, f"{sorted(reads_it - at_test_size)} read {SIZE}={TEST} but make test does not set it"


def test_covered_keeps_every_value_of_every_axis_in_the_fast_suite():
    params = covered([("a", torch.float64), ("b", torch.float32), ("c", torch.float64)], ["x", "y"], [1, 2, 3, 4])
    assert len(params) == 3 * 2 * 4 and len({p.values for p in params}) == 24
    fast = [p.values for p in params if not p.marks]
    assert all(m.name == "slow" for p in params for m in p.marks)
    assert len(fast) == 4  # the longest axis
    for position, axis in ((0, "abc"), (2, "xy"), (3, (1, 2, 3, 4))):
        assert {v[position] for v in fast} == set(axis)
    assert params[0].id == "a-float64-x-1"


# ------------------------------------------------------------------ scripts/ci_durations.py

def _junit(path: Path, cases: list[tuple[str, str, float]]) -> None:
    body = "".join(f'<testcase classname="{c}" name="{n}" time="{t}" />' for c, n, t in cases)
    path.write_text(f'<?xml version="1.0" encoding="utf-8"?><testsuites name="pytest tests"><testsuite name="pytest">'
                    f"{body}</testsuite></testsuites>")


def test_durations_list_the_slowest_tests_and_sum_each_notebook(tmp_path):
    _junit(tmp_path / "test-fast.xml", [("tests.test_a", "test_quick", 0.5), ("tests.test_a", "test_slowest", 9.0),
                                        ("tests.attribution.test_b", "test_mid[3]", 2.0)])
    _junit(tmp_path / "test-notebooks.xml", [("notebooks.00_tour.ipynb", "Cell 0", 1.5),
                                             ("notebooks.00_tour.ipynb", "Cell 1", 30.0),
                                             ("notebooks.07_lora_grpo_on_gpu.ipynb", "Cell 0", 4.0)])
    _junit(tmp_path / "test-slow-notebooks.xml", [("notebooks.07_lora_grpo_on_gpu.ipynb", "Cell 0", 200.0)])
    cases = durations.read_cases(tmp_path)
    top = durations.slowest_tests(cases, top=2)
    assert [c["name"] for c in top] == ["tests.test_a::test_slowest", "tests.attribution.test_b::test_mid[3]"]
    assert durations.notebook_times(cases) == [
        ("test-notebooks", "notebooks/00_tour.ipynb", 31.5, 2), ("test-notebooks", "notebooks/07_lora_grpo_on_gpu.ipynb", 4.0, 1),
        ("test-slow-notebooks", "notebooks/07_lora_grpo_on_gpu.ipynb", 200.0, 1)]
    text = durations.report(tmp_path, top=2)
    assert "test_quick" not in text and "Cell 1" not in text  # a notebook's cells are summed, not listed as tests
    assert "31.5 s  notebooks/00_tour.ipynb, 2 cells  [test-notebooks]" in text
    # CI reads pytest's closing line: the summary must not look like one
    assert not re.search(r"\d+ (passed|failed)", text)


def test_durations_without_reports_or_of_a_file_that_is_not_one(tmp_path):
    assert "no JUnit reports" in durations.report(tmp_path)
    (tmp_path / "other.xml").write_text("<html></html>")
    with pytest.raises(ValueError, match="other.xml holds <html>; expected a pytest --junitxml"):
        durations.read_cases(tmp_path)
    (tmp_path / "other.xml").write_text("not xml")
    with pytest.raises(ValueError, match="other.xml is not readable XML"):
        durations.read_cases(tmp_path)
