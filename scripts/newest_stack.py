"""The newest release of each dependency ``pyproject.toml`` allows, for ``make test-newest``.

    python scripts/newest_stack.py requirements           # pyproject's dependencies and trl extra, torch aside
    python scripts/newest_stack.py install FOLDER         # their newest releases into FOLDER
    python scripts/newest_stack.py check FOLDER           # with FOLDER first on PYTHONPATH: what is used

``make test-newest`` runs ``install`` into a temporary FOLDER, puts it first on the path, runs
``check``, then the TRL and package tests. ``install`` puts the ``requirements`` lines (pip picks
the newest release each range admits) into FOLDER without their dependencies, then, in rounds,
the newest release of each requirement those releases have that the path (FOLDER, then the
project's venv) does not meet; a requirement the venv meets keeps the venv's version. torch is
left out: its CPU build is pinned (Makefile), and a ``--target`` install would pull the CUDA build.

``check`` prints, per dependency, the version in use, where it is loaded from and the version
constraints.txt pins, and fails (exit 1) when a dependency is not loaded from FOLDER or when a
requirement of an installed release is not met by what is on the path (a ``--no-deps`` install
could leave one unmet: the tests would then fail for a reason that is not oar_lite's).
"""
from __future__ import annotations

import sys
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent
LEFT_OUT = {"torch"}  # its CPU build is pinned by the Makefile


EXTRAS = ("trl",)
"""The extras tested with the newest releases beside the dependencies: TRL's stack (the TRL and
package tests run against it)."""


def requirements(pyproject: Path = ROOT / "pyproject.toml") -> list[Requirement]:
    """``[project] dependencies`` of ``pyproject`` and its `EXTRAS`, torch aside."""
    project = tomllib.loads(pyproject.read_text())["project"]
    deps = project["dependencies"] + [d for extra in EXTRAS for d in project["optional-dependencies"][extra]]
    return [r for r in map(Requirement, deps) if r.name.lower() not in LEFT_OUT]


def pins(path: Path = ROOT / "constraints.txt") -> dict[str, str]:
    """``{name (lower case, '-' for '_'): version}`` of constraints.txt."""
    lines = [line for line in path.read_text().splitlines() if "==" in line and not line.startswith("#")]
    return {name.lower().replace("_", "-"): version for name, version in (line.split("==") for line in lines)}


def _unmet_requirements(dist: metadata.Distribution) -> list[tuple[Requirement, str | None]]:
    """The requirements of ``dist`` (extras and other platforms aside) that the path does not
    meet, each with the version found (None: not installed)."""
    environment = {**default_environment(), "extra": ""}
    unmet = []
    for line in dist.requires or []:
        requirement = Requirement(line)
        if requirement.marker is not None and not requirement.marker.evaluate(environment):
            continue
        try:
            found = metadata.version(requirement.name)
        except metadata.PackageNotFoundError:
            unmet.append((requirement, None))
            continue
        if not requirement.specifier.contains(found, prereleases=True):
            unmet.append((requirement, found))
    return unmet


def _unmet(dist: metadata.Distribution) -> list[str]:
    return [f"{r} ({'not installed' if found is None else f'found {found}'})" for r, found in _unmet_requirements(dist)]


def install(folder: Path, rounds: int = 5) -> int:
    """pip-install the newest allowed release of each dependency into ``folder`` (no
    dependencies), then of each unmet requirement of what is in ``folder``, until all are met."""
    import importlib
    import subprocess

    folder = folder.resolve()
    sys.path.insert(0, str(folder))
    wanted = [str(r) for r in requirements()]
    for _ in range(rounds):
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--upgrade", "--target",
                        str(folder), *wanted], check=True)
        importlib.invalidate_caches()
        unmet = {}
        for dist in metadata.distributions(path=[str(folder)]):
            for requirement, _found in _unmet_requirements(dist):
                if requirement.name.lower() not in LEFT_OUT:
                    requirement.marker = None
                    unmet[str(requirement)] = dist.metadata["Name"]
        if not unmet:
            return 0
        print("newest_stack: also installing", ", ".join(f"{r} (for {by})" for r, by in unmet.items()))
        wanted = list(unmet)
    print("newest_stack: requirements still unmet after", rounds, "rounds:", ", ".join(unmet), file=sys.stderr)
    return 1


def check(folder: Path) -> int:
    folder = folder.resolve()
    pinned = pins()
    failures = []
    print(f"{'dependency':<14} {'range':<16} {'in use':<10} {'constraints.txt':<16} from")
    for requirement in requirements():
        dist = metadata.distribution(requirement.name)
        location = Path(dist.locate_file("")).resolve()
        key = requirement.name.lower().replace("_", "-")
        newer = "  (newer)" if pinned.get(key) not in (None, dist.version) else ""
        print(f"{requirement.name:<14} {str(requirement.specifier):<16} {dist.version:<10} "
              f"{pinned.get(key, '-'):<16} {'the newest folder' if location == folder else location}{newer}")
        if location != folder:
            failures.append(f"{requirement.name} is loaded from {location}, not from {folder}")
        failures += [f"{requirement.name} {dist.version} requires {unmet}" for unmet in _unmet(dist)]
    direct = {r.name.lower().replace("_", "-") for r in requirements()}
    added = sorted(f"{d.metadata['Name']} {d.version}" for d in metadata.distributions(path=[str(folder)])
                   if d.metadata["Name"].lower().replace("_", "-") not in direct)
    if added:
        print("also in the newest folder (their requirements):", ", ".join(added))
    for failure in failures:
        print("FAIL:", failure)
    return 1 if failures else 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["requirements"] and len(argv) == 1:
        print("\n".join(map(str, requirements())))
        return 0
    if argv[:1] == ["install"] and len(argv) == 2:
        return install(Path(argv[1]))
    if argv[:1] == ["check"] and len(argv) == 2:
        return check(Path(argv[1]))
    raise SystemExit("usage: newest_stack.py requirements | install FOLDER | check FOLDER")


if __name__ == "__main__":
    raise SystemExit(main())
