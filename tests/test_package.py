"""The package as users install it: declared TRL range enforced at import, data found
through the package. (The wheel itself is built and installed by `make test-wheel`.)"""
import re
import sys
import tomllib
import warnings
from pathlib import Path

import pytest
from conftest import load_script

from oar_lite.course import toy

ROOT = Path(__file__).resolve().parent.parent


PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _requirement(name: str, extra: str | None = None) -> str:
    deps = PROJECT["optional-dependencies"][extra] if extra else PROJECT["dependencies"]
    (spec,) = [d for d in deps if re.match(rf"{name}\b", d)]
    return spec[len(name):]


def test_trl_range_in_pyproject_is_the_one_enforced():
    from oar_lite.trl import TRL_SUPPORTED

    assert _requirement("trl", "trl") == TRL_SUPPORTED


def _distributions(requirements) -> set[str]:
    from packaging.requirements import Requirement

    return {Requirement(r).name.lower() for r in requirements}


def _extra(name: str) -> set[str]:
    """The packages extra ``name`` installs, the extras it names (``oar-lite[trl]``) included."""
    from packaging.requirements import Requirement

    out = set()
    for line in PROJECT["optional-dependencies"][name]:
        requirement = Requirement(line)
        out |= set().union(*map(_extra, requirement.extras)) if requirement.name == "oar-lite" else {requirement.name.lower()}
    return out


IMPORT_NAMES = {"math_verify": "math-verify"}
"""Import names that differ from their distribution's."""


def library_imports() -> dict[str, set[str]]:
    """``{distribution: {library module that imports it}}`` for every package outside the
    standard library that a library module (``oar_lite/*.py``, ``oar_lite/attribution/``)
    imports, at its top (``top``) or only inside a function (``lazy``)."""
    import ast

    found: dict[str, set[str]] = {}
    for path in sorted([*(ROOT / "oar_lite").glob("*.py"), *(ROOT / "oar_lite" / "attribution").glob("*.py")]):
        tree = ast.parse(path.read_text())
        top = {id(n) for n in tree.body}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module]
            else:
                continue
            for name in names:
                root = name.split(".")[0]
                if root not in sys.stdlib_module_names and root != "oar_lite":
                    where = "top" if id(node) in top else "lazy"
                    found.setdefault(IMPORT_NAMES.get(root, root), set()).add(f"{path.stem}:{where}")
    return found


def test_the_bare_install_is_what_the_library_imports():
    """Issue 47 item 1: ``pip install oar-lite`` installs what the library imports, no more;
    the [trl] extra's packages are imported by oar_lite.trl, or only where they are used
    (peft in train.py's LoRA); the course's and the lab's by neither."""
    imported = library_imports()
    base = _distributions(PROJECT["dependencies"])
    assert set(imported) <= base | _extra("trl"), sorted(set(imported) - base - _extra("trl"))
    assert base <= set(imported), f"installed but imported by no library module: {sorted(base - set(imported))}"
    for name in set(imported) - base:
        assert all(w.startswith("trl:") or w.endswith(":lazy") for w in imported[name]), (name, imported[name])
    assert {"trl", "accelerate", "peft"} <= set(imported) and "matplotlib" not in imported
    assert {"matplotlib", "gguf", "jupyterlab", "ipywidgets"} <= _extra("course") - base - _extra("trl")


def test_colab_installs_what_the_course_and_the_lab_need_but_jupyterlab():
    """The setup cell installs ``oar-lite[colab]`` on Colab: the tested minor releases of the
    fast-moving stack and every other package of the lab, the course and TRL extras (JupyterLab
    aside: Colab is the notebook server), so that `lab` stays the one list of what the lab needs."""
    needed = (_extra("lab") | _extra("trl")) - {"jupyterlab"}
    assert needed <= _extra("colab"), sorted(needed - _extra("colab"))
    assert _extra("colab") <= needed | _distributions(PROJECT["dependencies"]), sorted(_extra("colab") - needed)


def test_unsupported_trl_gets_an_error_naming_the_supported_range(monkeypatch):
    from oar_lite.trl import TRL_SUPPORTED, check_trl_version

    monkeypatch.delenv("OAR_LITE_ANY_TRL", raising=False)
    for bad in ("1.5.1", "1.17.0", "2.0.0", "0.29.1"):
        with pytest.raises(ImportError, match=re.escape(f"supports trl{TRL_SUPPORTED}, but trl {bad} is installed")):
            check_trl_version(bad)
    for good in ("1.6.0", "1.16.0", "1.16.1"):
        assert check_trl_version(good) == good


def test_missing_trl_names_the_extra_to_install(monkeypatch):
    """Issue 47 item 1: the library alone has no TRL; `oar_lite.trl` says which extra brings it."""
    import importlib.metadata

    from oar_lite.trl import check_trl_version

    def not_installed(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", not_installed)
    with pytest.raises(ImportError, match=re.escape("oar_lite.trl needs TRL, which the library alone does not install: "
                                                    "pip install 'oar-lite[trl]'")):
        check_trl_version()


def test_any_trl_override_warns_instead(monkeypatch):
    from oar_lite.trl import check_trl_version

    monkeypatch.setenv("OAR_LITE_ANY_TRL", "1")
    with pytest.warns(UserWarning, match="supports trl"):
        assert check_trl_version("1.17.0") == "1.17.0"


def test_installed_trl_is_supported():
    from importlib.metadata import version

    from oar_lite.trl import check_trl_version

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert check_trl_version() == version("trl")


def test_data_is_package_data():
    """The toy model and held-out set live inside the course, the shipped results inside the lab
    (so wheels carry them), and `pyproject.toml` ships both data folders whole."""
    from oar_lite.lab import regime

    package = Path(sys.modules["oar_lite"].__file__).parent
    assert toy.DATA_DIR == package / "course" / "data"
    assert (toy.MODEL_DIR / "model.safetensors").is_file() and toy.EVAL_PATH.is_file()
    assert regime.RESULTS_DIR.parent == package / "lab" / "data" and (regime.RESULTS_DIR / "regimes.json").is_file()
    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert package_data == {"oar_lite.course": ["data/**/*"], "oar_lite.lab": ["data/**/*"],
                            "oar_lite.lab.findings": ["*.j2"]}
    assert not (ROOT / "data").exists() and not (package / "data").exists(), "one copy of the data only"


def _sync_module():
    return load_script("sync_setup_cell")


def test_every_notebook_setup_cell_is_the_template():
    """`python scripts/sync_setup_cell.py` writes notebooks/setup_cell.py into every notebook."""
    sync = _sync_module()
    notebooks = sorted((ROOT / "notebooks").glob("*.ipynb"))
    assert notebooks
    stale = sync.sync(notebooks, sync.template_source(), check=True)
    assert not stale, f"setup cells differ from notebooks/setup_cell.py; run scripts/sync_setup_cell.py: {stale}"


def test_sync_rewrites_only_the_setup_cell(tmp_path):
    import json

    sync = _sync_module()
    notebook = {"cells": [{"cell_type": "markdown", "metadata": {}, "source": ["# title"]},
                          {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": 1,
                           "source": ["import sys"]},
                          {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": 2, "source": ["x = 1"]}],
                "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "07_new.ipynb"
    path.write_text(json.dumps(notebook, indent=1) + "\n")
    assert sync.sync([path], "print('setup')\nx = 2", check=True) == [path]
    assert json.loads(path.read_text()) == notebook  # --check changes nothing
    sync.sync([path], "print('setup')\nx = 2")
    cells = json.loads(path.read_text())["cells"]
    assert cells[1]["source"] == ["print('setup')\n", "x = 2"]
    assert cells[0] == notebook["cells"][0] and cells[2] == notebook["cells"][2]
    assert sync.sync([path], "print('setup')\nx = 2", check=True) == []


def test_colab_extra_admits_the_tested_versions():
    """The ranges the Colab cell installs contain the versions constraints.txt pins."""
    from packaging.requirements import Requirement

    pins = dict(line.split("==") for line in (ROOT / "constraints.txt").read_text().splitlines()
                if "==" in line and not line.startswith("#"))
    pins = {name.lower(): version for name, version in pins.items()}
    for requirement in map(Requirement, PROJECT["optional-dependencies"]["colab"]):
        assert requirement.specifier.contains(pins[requirement.name.lower()]), (requirement, pins[requirement.name])
    deps = PROJECT["dependencies"] + [d for extra in ("trl", "course", "lab") for d in PROJECT["optional-dependencies"][extra]
                                      if not d.startswith("oar-lite")]
    for requirement in map(Requirement, deps):
        if requirement.name.lower() in pins:
            assert requirement.specifier.contains(pins[requirement.name.lower()]), requirement


def test_oldest_trl_tested_is_the_supported_lower_bound():
    from oar_lite.trl import TRL_SUPPORTED

    oldest = re.search(r"^TRL_OLDEST := (\S+)$", (ROOT / "Makefile").read_text(), re.M).group(1)
    lower = re.search(r">=([\d.]+)", TRL_SUPPORTED).group(1)
    assert oldest.split(".")[:2] == lower.split(".")[:2], (oldest, TRL_SUPPORTED)




def test_every_spec_section_the_code_cites_is_in_the_shipped_spec():
    """Docstrings say "spec section 4" instead of restating the method: each section they cite
    must be a heading of docs/oar-spec.md, the copy of the contract that ships with the repository."""
    spec = (ROOT / "docs" / "oar-spec.md").read_text()
    headings = {int(n) for n in re.findall(r"^## (\d+)\.", spec, flags=re.M)}
    cited = set()
    for path in (ROOT / "oar_lite").glob("*.py"):
        for numbers in re.findall(r"[Ss][Pp][Ee][Cc] sections? ([\d ,and-]+)", path.read_text()):
            for a, b in re.findall(r"(\d+)(?:-(\d+))?", numbers):
                cited |= set(range(int(a), int(b or a) + 1))
    assert cited and cited <= headings, sorted(cited - headings)
    assert "docs/oar-spec.md" in (ROOT / "README.md").read_text()


def test_line_count_splits_code_docstrings_comments_and_blanks():
    line_count = load_script("line_count")
    source = '"""Module.\n\nMore."""\n\n# a comment\nx = 1  # trailing\n\n\ndef f():\n    """One line."""\n    return "not a docstring"\n'
    assert line_count.classify(source) == {"code": 3, "docstring": 4, "comment": 1, "blank": 3}


def test_paper_and_official_code_are_cited_with_the_spec_tied_to_their_lines():
    """Issue 37: the ACL 2026 paper and both official repositories in the README and the spec;
    the spec's section 9 links lines of the authors' file at a fixed commit, inside its 285 lines."""
    readme, spec = (ROOT / "README.md").read_text(), (ROOT / "docs" / "oar-spec.md").read_text()
    for text in (readme, spec):
        for link in ("https://aclanthology.org/2026.acl-long.1132/", "https://arxiv.org/abs/2601.07408",
                     "https://github.com/Valsure/Outcome-Grounded-Advantage-Reshaping",
                     "https://github.com/XINGYUN-AI-LAB/XINGYUN_LAB"):
            assert link in text
    assert "24681-24693" in readme and "24681-24693" in spec
    section = spec[spec.index("## 9."):]
    lines = [(int(a), int(b or a)) for a, b in re.findall(
        r"Valsure/Outcome-Grounded-Advantage-Reshaping/blob/8dbc47862b5c3636b6070be16c9a181b17ca6346/OAR-main\.py"
        r"#L(\d+)(?:-L(\d+))?\)", section)]
    rows = [row for row in section.splitlines() if re.match(r"\| \d+ \|", row)]
    assert len(rows) >= 10 and all("#L" in row for row in rows)  # each point tied to a line
    assert lines and all(1 <= a <= b <= 285 for a, b in lines), lines


def test_newest_stack_installs_every_dependency_but_torch_and_sees_unmet_requirements():
    """scripts/newest_stack.py (make test-newest): pyproject's dependencies without torch, and a
    requirement an installed release has that the path does not meet is reported."""
    from importlib import metadata

    from packaging.requirements import Requirement

    stack = load_script("newest_stack")
    names = {r.name for r in stack.requirements()}
    deps = {Requirement(d).name for d in PROJECT["dependencies"] + PROJECT["optional-dependencies"]["trl"]}
    assert names == deps - {"torch"} and "trl" in names

    class Dist:  # a release that needs more than is installed
        requires = ["packaging>=9999", "surely-not-installed-oar-lite>=1", "pytest; extra == 'test'"]

    unmet = stack._unmet(Dist())
    assert len(unmet) == 2 and "found " + metadata.version("packaging") in unmet[0] and "not installed" in unmet[1]
    assert {"trl", "math-verify", "typing-extensions"} <= set(stack.pins())  # names as pip writes them, '-' for '_'


def test_line_count_puts_each_file_in_its_layer_before_and_after_the_move():
    line_count = load_script("line_count")
    assert [line_count.layer_of(p) for p in ("oar_lite/grpo.py", "oar_lite/attribution/kv.py", "oar_lite/__init__.py",
                                             "oar_lite/course/toy.py", "oar_lite/course/toy.py", "oar_lite/lab/plots.py",
                                             "oar_lite/lab/plots.py", "oar_lite/__main__.py", "benchmarks/common.py")] == [
        "library", "library", "library", "course", "course", "lab", "lab", "lab", "benchmarks"]
    counts = line_count.count(None)  # the working tree: every layer has lines, and the parts add up
    assert all(counts[layer]["total"] > 0 for layer in line_count.LAYERS)
    assert all(c["total"] == sum(c[k] for k in line_count.KINDS) for c in counts.values())


def readme_library_example() -> str:
    """The README's library example: the first ``python`` block of its section "The package"."""
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## The package\n"):]
    return section[section.index("```python\n") + len("```python\n"):section.index("\n```\n")] + "\n"


def test_the_readme_library_example_runs(capsys):
    """The block `make test-wheel` runs in a bare install (tests_install/test_wheel.py), run here
    with the tested stack so that it cannot go stale between wheel runs."""
    exec(compile(readme_library_example(), "README.md", "exec"), {"__name__": "readme_example"})
    out = capsys.readouterr().out
    assert out.startswith("rewards [") and "gradient norm" in out and "OAR-G weights of row 0's reasoning: [" in out


def test_dispatch_is_no_larger_than_the_algorithms_it_dispatches():
    """Issue 47 item 2 (scripts/line_count.py's second table): the registry, the config and the
    entry points together are no larger than OAR-P and OAR-G, in code lines and in all lines; at
    5682eaa, before controls and weightings moved to the lab, they were 471 lines to 387."""
    groups = load_script("line_count").count_groups(None)
    algorithms, dispatch = groups["algorithms (OAR-P, OAR-G)"], groups["dispatch (registry, config, scoring, controls)"]
    assert algorithms["code"] > 200  # the files are read at all
    assert dispatch["code"] <= algorithms["code"] and dispatch["total"] <= algorithms["total"], (dispatch, algorithms)
def test_torch_floor_is_the_oldest_torch_tested():
    """pyproject's torch floor is the torch the tested stack runs (constraints.txt, which the
    Makefile installs first): no older release is tested here. FSDP2 support is tested with it."""
    from packaging.requirements import Requirement
    from packaging.version import Version

    from oar_lite.trl import FSDP2_TESTED_TORCH

    pinned = re.search(r"^torch==(\S+)$", (ROOT / "constraints.txt").read_text(), re.M).group(1)
    assert f"torch=={pinned}" in (ROOT / "Makefile").read_text()
    floor = [s.version for s in Requirement("torch" + _requirement("torch")).specifier if s.operator == ">="]
    assert floor and Version(floor[0]) == Version(Version(pinned).base_version), (floor, pinned)
    assert f"torch>={floor[0]}" in (ROOT / "environment.yml").read_text()  # the conda file mirrors pyproject
    assert Requirement("torch" + FSDP2_TESTED_TORCH).specifier.contains(Version(pinned).base_version)
