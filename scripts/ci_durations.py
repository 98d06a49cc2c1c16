"""The slowest tests and each notebook's time, from the JUnit XML files the CI's pytest runs
wrote (``make JUNIT=build/ci ...``: one file per make target). ``.ci/run`` prints this last::

    python scripts/ci_durations.py build/ci          # the 20 slowest tests, then every notebook
    python scripts/ci_durations.py build/ci --top 50

A test's time is what pytest's JUnit report gives it (setup, call and teardown). A notebook under
nbval is one pytest item per cell; its time here is the sum of its cells, listed once per target
that ran it (``make test`` runs the heavy notebooks at test size, ``make test-slow`` at full size).
"""
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

NOTEBOOK_SUFFIX = ".ipynb"


def read_cases(folder: Path) -> list[dict]:
    """Every ``<testcase>`` of every ``*.xml`` in ``folder``: ``{"suite", "name", "seconds", "notebook"}``.
    ``suite`` is the file's stem (the make target); ``notebook`` the notebook's path for an nbval
    cell, else None. Raises ValueError on a file that is not a JUnit report."""
    cases = []
    for path in sorted(Path(folder).glob("*.xml")):
        try:
            root = ET.parse(path).getroot()
        except ET.ParseError as err:
            raise ValueError(f"{path} is not readable XML ({err}); expected a pytest --junitxml report") from err
        if root.tag not in ("testsuites", "testsuite"):
            raise ValueError(f"{path} holds <{root.tag}>; expected a pytest --junitxml report (<testsuites>)")
        for case in root.iter("testcase"):
            classname, name = case.get("classname", ""), case.get("name", "")
            notebook = None
            if NOTEBOOK_SUFFIX in classname:  # nbval: classname "notebooks.05_training_on_cpu.ipynb", name "Cell 12"
                stem = classname[: classname.index(NOTEBOOK_SUFFIX)]
                head, _, last = stem.rpartition(".")
                notebook = (head.replace(".", "/") + "/" if head else "") + last + NOTEBOOK_SUFFIX
            cases.append({"suite": path.stem, "name": f"{classname}::{name}" if classname else name,
                          "seconds": float(case.get("time") or 0.0), "notebook": notebook})
    return cases


def slowest_tests(cases: list[dict], top: int = 20) -> list[dict]:
    """The ``top`` slowest test cases that are not notebook cells, slowest first."""
    return sorted((c for c in cases if c["notebook"] is None), key=lambda c: -c["seconds"])[:top]


def notebook_times(cases: list[dict]) -> list[tuple[str, str, float, int]]:
    """``(suite, notebook, seconds, cells)`` for each notebook each suite ran, the sum of its cells,
    in the order suite, notebook."""
    total, cells = defaultdict(float), defaultdict(int)
    for c in cases:
        if c["notebook"] is not None:
            total[c["suite"], c["notebook"]] += c["seconds"]
            cells[c["suite"], c["notebook"]] += 1
    return [(suite, nb, total[suite, nb], cells[suite, nb]) for suite, nb in sorted(total)]


def report(folder: Path, top: int = 20) -> str:
    cases = read_cases(folder)
    if not cases:
        return f"durations: no JUnit reports in {folder} (no pytest run got that far)"
    lines = [f"durations, from the JUnit reports in {folder} ({len(cases)} items):",
             f"the {top} slowest tests (setup + call + teardown):"]
    lines += [f"  {c['seconds']:8.1f} s  {c['name']}  [{c['suite']}]" for c in slowest_tests(cases, top)]
    lines.append("notebooks (the sum of their cells):")
    lines += [f"  {seconds:8.1f} s  {nb}, {n} cells  [{suite}]" for suite, nb, seconds, n in notebook_times(cases)]
    by_suite = defaultdict(float)
    for c in cases:
        by_suite[c["suite"]] += c["seconds"]
    lines.append("per make target (the sum of its items): "
                 + ", ".join(f"{suite} {seconds:.0f} s" for suite, seconds in sorted(by_suite.items())))
    return "\n".join(lines)


def main(argv=None) -> int:
    from oar_lite.settings import parser as command_line

    parser = command_line(__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, help="where the --junitxml reports are (build/ci in CI)")
    parser.add_argument("--top", type=int, default=20, help="how many of the slowest tests to list (default 20)")
    args = parser.parse_args(argv)
    if args.top < 1:
        parser.error(f"--top={args.top}: expected a positive number of tests")
    print(report(args.folder, args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
