"""The import graph of `oar_lite` (every import, at the top of a module or inside a function):
the core never imports the toy world or training, no module takes part in an import circle,
and no module or benchmark imports another one's private name; and every public function is
exercised by some test."""
import ast
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "oar_lite"
LAYERS = [
    {"settings", "seeding", "grpo", "reshape", "rollout", "segment", "reward", "attribution"},  # the algorithm
    {"evaluate", "train", "checkpoint", "trl"},  # training: with the algorithm, the library
    {"course"},  # the course: the toy world, problems, models, viz, exercises
    {"lab"},  # the lab: experiments, statistics, shipped results, and its command line (lab/__main__.py)
]
"""The layers of the README's "Layout": a module imports from its own layer or the ones before it.
`oar_lite.course.*` and `oar_lite.lab.*` are one layer each; the library is the first two."""
CORE = {f"oar_lite.{name}" for name in LAYERS[0]}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports(path: Path, known: dict) -> list[tuple[str, str, int]]:
    """``(imported module, name, line)`` for every import of an ``oar_lite`` module in ``path``,
    wherever it stands; ``name`` is the name taken from it (``""`` for a whole module)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [(a.name, "", node.lineno) for a in node.names if a.name.split(".")[0] == "oar_lite"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "oar_lite":
                continue
            for a in node.names:
                whole = f"{target}.{a.name}"
                out.append((whole, "", node.lineno) if whole in known else (target, a.name, node.lineno))
    return out


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: {target for target, _, _ in imports(path, known) if target != name} for name, path in known.items()}


def in_core(name: str) -> bool:
    return any(name == c or name.startswith(c + ".") for c in CORE)


def test_the_core_imports_only_the_core():
    edges = graph()
    outside = {(m, t) for m, targets in edges.items() if in_core(m) for t in targets if not in_core(t)}
    assert not outside, f"core modules import modules above them: {sorted(outside)}"
    assert "oar_lite.course.toy" in edges and "oar_lite.attribution.registry" in edges  # the graph is read at all


def layer(name: str) -> int:
    top = name.split(".")[1]
    return next(i for i, names in enumerate(LAYERS) if top in names)


def test_every_module_imports_only_its_layer_and_the_ones_before():
    edges = {m: t for m, t in graph().items() if m != "oar_lite"}
    assert {m.split(".")[1] for m in edges} == set().union(*LAYERS)  # every module has its layer
    upward = sorted((m, t) for m, targets in edges.items() for t in targets if layer(t) > layer(m))
    assert not upward, f"imports of a later layer: {upward}"


def test_no_import_circles_counting_imports_inside_functions():
    edges = {m: t for m, t in graph().items() if m != "oar_lite"}  # the package's __init__ imports all
    assert not [m for m, t in edges.items() if "oar_lite" in t], "a module imports the package's __init__"
    circles, state = [], {}

    def visit(node, path):
        state[node] = "open"
        for nxt in sorted(edges.get(node, set())):
            if state.get(nxt) == "open":
                circles.append(path[path.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = "done"

    for node in sorted(edges):
        if node not in state:
            visit(node, [node])
    assert not circles, f"import circles: {circles}"


def test_the_graph_sees_a_circle_hidden_in_a_function(tmp_path, monkeypatch):
    """The circle check can fail: two modules that import each other, one inside a function."""
    (tmp_path / "oar_lite").mkdir()
    (tmp_path / "oar_lite" / "a.py").write_text("from . import b\n")
    (tmp_path / "oar_lite" / "b.py").write_text("def f():\n    from .a import g\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", tmp_path / "oar_lite")
    assert graph() == {"oar_lite.a": {"oar_lite.b"}, "oar_lite.b": {"oar_lite.a"}}


@pytest.mark.parametrize("folder", ["oar_lite", "benchmarks", "scripts"])
def test_no_private_name_is_imported_from_another_module(folder):
    known = modules()
    private = [f"{path.relative_to(ROOT)}:{line} takes {name} from {target}"
               for path in sorted((ROOT / folder).rglob("*.py"))
               for target, name, line in imports(path, known) if name.startswith("_") and not name.startswith("__")]
    assert not private, private


@pytest.mark.parametrize("folder", ["oar_lite", "benchmarks", "scripts", "tests"])
def test_every_imported_name_exists(folder):
    """An import inside a function runs only when that code path does (a benchmark's last line,
    say): a name that moved to another module must fail here, not at the end of a long run."""
    import importlib

    known = modules()
    missing = []
    for path in sorted((ROOT / folder).rglob("*.py")):
        for target, name, line in imports(path, known):
            if name and not hasattr(importlib.import_module(target), name):
                missing.append(f"{path.relative_to(ROOT)}:{line} takes {name} from {target}, which has no such name")
    assert not missing, missing


def test_tests_are_laid_out_by_module():
    """Each module ``oar_lite/[sub/]name.py`` has its unit tests in ``tests/[sub/]test_name.py``
    (the package's ``__init__`` and ``__main__`` are tested through what they export and run);
    that they exercise its functions is `test_every_public_function_is_exercised_by_a_test`."""
    missing = [str(p.relative_to(ROOT)) for p in sorted(PACKAGE.rglob("*.py"))
               if p.stem not in ("__init__", "__main__")
               and not (ROOT / "tests" / p.parent.relative_to(PACKAGE) / f"test_{p.stem}.py").is_file()]
    assert not missing, f"modules without a tests/.../test_<module>.py: {missing}"


UNEXERCISED_ALLOWED: dict[str, str] = {}
"""``"oar_lite/path.py:function"`` -> why no test exercises it. Keep it short: write the test instead."""


def _names(node) -> set[str]:
    return ({n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
            | {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)})


def unexercised_functions(package: Path, tests: Path) -> list[str]:
    """The public functions (no leading underscore, defined at a module's top level) of the
    modules under ``package`` that no test exercises: none of the files under ``tests`` names
    them, nor any function or class they reach by name, nor a module's own top-level code
    (which runs on import; imports and ``__all__`` do not count)."""
    named = set(re.findall(r"\w+", "\n".join(p.read_text() for p in sorted(tests.rglob("*.py")))))
    calls: dict[str, set[str]] = {}  # a function or class -> the names its body uses
    public: list[tuple[str, str]] = []
    on_import: set[str] = set()
    for path in sorted(package.rglob("*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                calls.setdefault(node.name, set()).update(_names(node))
                if not isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                    public.append((f"{path.relative_to(package.parent)}:{node.name}", node.name))
            elif not isinstance(node, (ast.Import, ast.ImportFrom)) and not (
                    isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "__all__" for t in node.targets)):
                on_import |= _names(node)
    reached, todo = set(), [n for n in calls if n in named or n in on_import]
    while todo:
        name = todo.pop()
        if name not in reached:
            reached.add(name)
            todo += [n for n in calls[name] if n in calls and n not in reached]
    return [where for where, name in public if name not in reached]


def test_every_public_function_is_exercised_by_a_test():
    missing = [f for f in unexercised_functions(PACKAGE, ROOT / "tests") if f not in UNEXERCISED_ALLOWED]
    assert not missing, f"public functions no test names or reaches (test them, or allow them with a reason): {missing}"
    stale = sorted(set(UNEXERCISED_ALLOWED) - set(unexercised_functions(PACKAGE, ROOT / "tests")))
    assert not stale, f"allowed as untested but tested or gone: {stale}"


def test_the_exercise_check_sees_a_function_no_test_reaches(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text("X = helper_on_import()\n__all__ = ['orphan']\n"
                                           "def helper_on_import():\n    return inner()\n"
                                           "def inner():\n    return 1\n"
                                           "def tested():\n    return reached()\n"
                                           "def reached():\n    return 2\n"
                                           "def orphan():\n    return 3\n"
                                           "def _private():\n    return 4\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_m.py").write_text("from pkg.m import tested\n")
    assert unexercised_functions(tmp_path / "pkg", tmp_path / "tests") == ["pkg/m.py:orphan"]


LIBRARY = LAYERS[0] | LAYERS[1]


def test_import_oar_lite_loads_the_library_alone():
    """`import oar_lite` (and its TRL trainer) load neither the course nor the lab, and the method
    registry holds the library's methods (plain GRPO, OAR-P, OAR-G); importing the course or the
    lab packages adds nothing: their methods join with the modules that register them
    (tests/attribution/test_registry.py)."""
    import subprocess

    code = (
        "import sys, oar_lite, oar_lite.grpo, oar_lite.train\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('oar_lite'))\n"
        "print(sorted(oar_lite.SCORERS))\n"
        "print([m for m in loaded if m != 'oar_lite' and m.split('.')[1] not in " + repr(sorted(LIBRARY)) + "])\n"
        "import oar_lite.course, oar_lite.lab\n"
        "print(sorted(oar_lite.SCORERS))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    before, outside, packages = out.strip().split("\n")
    assert outside == "[]", f"import oar_lite loaded modules outside the library: {outside}"
    assert before == packages == "['oar-g', 'oar-p', 'uniform']", (before, packages)


def test_the_trl_trainer_loads_neither_the_readable_trainer_nor_what_it_brings():
    """Issue 47 item 1: `oar_lite.trl` shares the update's settings (`oar_lite.grpo.UPDATE`,
    `oar_lite.rollout.SAMPLING_SETTINGS`) with `oar_lite.train` without importing it."""
    import subprocess

    code = "import sys, oar_lite.trl\nprint(sorted(m for m in sys.modules if m.startswith('oar_lite')))\n"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert "'oar_lite.trl'" in loaded
    for trainer in ("oar_lite.train", "oar_lite.checkpoint", "oar_lite.evaluate"):
        assert f"'{trainer}'" not in loaded, loaded
    assert "oar_lite.train" not in {t for t, _, _ in imports(PACKAGE / "trl.py", modules())}


def test_the_library_imports_neither_the_course_nor_the_lab():
    edges = graph()
    library = {m for m in edges if m != "oar_lite" and m.split(".")[1] in LIBRARY}
    above = sorted((m, t) for m in library for t in edges[m] if t.split(".")[1] in ("course", "lab"))
    assert not above, f"library modules import the course or the lab: {above}"
    course = {m for m in edges if m.split(".")[1:2] == ["course"]}
    assert not sorted((m, t) for m in course for t in edges[m] if t.split(".")[1] == "lab"), "the course imports the lab"


def room(name: str) -> str:
    """The unit the depth counts: a library module, or one of the folders `attribution`,
    `course`, `lab` (their modules import each other freely), or `benchmarks` / `scripts`."""
    parts = name.split(".")
    if parts[0] in ("benchmarks", "scripts"):
        return parts[0]
    return ".".join(parts[:2]) if parts[1:2] and parts[1] in ("attribution", "course", "lab") else name


def test_the_import_graph_is_at_most_8_floors_deep():
    """Issue 40 item 7: from the bottom floor (modules that import no other) to the command lines
    of benchmarks/ and scripts/, at most 8 floors of rooms (12 before the three layers)."""
    known = modules()
    edges = {}
    for name, path in known.items():
        edges.setdefault(room(name), set()).update(room(t) for t in graph()[name] if t != "oar_lite")
    for folder in ("benchmarks", "scripts"):
        for path in sorted((ROOT / folder).glob("*.py")):
            edges.setdefault(folder, set()).update(room(t) for t, _, _ in imports(path, known) if t != "oar_lite")
    edges.pop("oar_lite", None)
    floors = {}

    def floor(node, seen=()):
        if node not in floors:
            below = [floor(t, seen + (node,)) for t in edges.get(node, ()) if t != node and t not in seen]
            floors[node] = 1 + max(below, default=0)
        return floors[node]

    depth = max(floor(n) for n in edges)
    chain = [max(edges, key=floor)]
    while below := [t for t in edges.get(chain[-1], ()) if t != chain[-1] and floors.get(t) == floors[chain[-1]] - 1]:
        chain.append(below[0])
    assert floors["benchmarks"] >= 3 and floors["oar_lite.lab"] > floors["oar_lite.course"]  # the graph is read at all
    assert depth <= 8, f"{depth} floors: {' -> '.join(chain)}"
