"""The package as a user installs it (``make test-wheel``, run by .ci/run after ``make test``).

Checks that the sdist carries the package and its data; builds the wheel from the
package's own files; in a fresh virtual environment with torch==2.13.0 (CPU) and the bare
wheel (no extra), runs the README's library example; then, in another, installs the wheel the
way the notebooks' Colab cell does (notebooks/setup_cell.py with ``OAR_LITE_SOURCE`` pointing
at the wheel, under constraints.txt), and from a working directory outside the repository runs
the smallest real comparison and notebook 07 under nbval. No editable install; the repository
is never on the path.
"""
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = "07_lora_grpo_on_gpu.ipynb"  # the shipped SmolLM2 logs and one live LoRA step from the wheel, a few CPU minutes
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "TOKENIZERS_PARALLELISM": "false", "MPLBACKEND": "Agg", "PYTHONHASHSEED": "0", "OMP_NUM_THREADS": "1"}


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "OAR_LITE_SOURCE")}
    return {**env, **OFFLINE, **extra}


def _run(cmd, cwd, **env):
    proc = subprocess.run([str(c) for c in cmd], cwd=cwd, env=_env(**env), capture_output=True, text=True)
    return proc


def _ok(proc):
    assert proc.returncode == 0, f"{proc.args}\n--- stdout\n{proc.stdout[-3000:]}\n--- stderr\n{proc.stderr[-5000:]}"
    return proc


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """A folder with only what the package is built from: no build/ left over from earlier builds."""
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "oar_lite", source / "oar_lite", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return source


def _files(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()}


def test_sdist_carries_the_package_and_its_data(source, tmp_path):
    """What PyPI would get: every file of the package (code and data) and the project files; a
    wheel built from the sdist, as pip builds one, carries the package and its data too."""
    _ok(_run([sys.executable, "-c", "import sys; from setuptools import build_meta; build_meta.build_sdist(sys.argv[1])",
              tmp_path / "sdist"], cwd=source))
    (sdist,) = (tmp_path / "sdist").glob("oar_lite-*.tar.gz")
    with tarfile.open(sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    package = {name for name in _files(source) if name.startswith("oar_lite/")}
    missing = (package | {"pyproject.toml", "README.md", "LICENSE"}) - names
    assert not missing, sorted(missing)
    _ok(_run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", tmp_path / "dist",
              sdist], cwd=tmp_path))
    (wheel,) = (tmp_path / "dist").glob("oar_lite-*.whl")
    assert not package - set(zipfile.ZipFile(wheel).namelist()), sorted(package - set(zipfile.ZipFile(wheel).namelist()))


@pytest.fixture(scope="module")
def wheel(source, tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("dist")
    _ok(_run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", tmp, source],
             cwd=tmp))
    (built,) = tmp.glob("oar_lite-*.whl")
    print(f"wheel: {built.name}, {built.stat().st_size / 2**20:.2f} MiB")
    return built


def _fresh_venv(tmp: Path) -> tuple[Path, Path]:
    """``(python of a fresh venv holding torch==2.13.0 only, a working directory outside the repository)``."""
    venv = tmp / "venv"
    _ok(_run([sys.executable, "-m", "venv", venv], cwd=tmp))
    python = venv / "bin" / "python"
    _ok(_run([python, "-m", "pip", "install", "-q", "torch==2.13.0"], cwd=tmp))
    work = tmp / "work"
    work.mkdir()
    return python, work


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory):
    """``(python of the fresh venv, a working directory outside the repository, the wheel)``."""
    python, work = _fresh_venv(tmp_path_factory.mktemp("wheel"))
    return python, work, wheel


EXTRAS_PACKAGES = ("trl", "peft", "accelerate", "datasets", "matplotlib", "gguf", "captum", "ipywidgets")
"""What the extras install and the bare wheel must not (issue 47 item 1; jinja2, the lab's, comes with torch)."""


def test_the_bare_wheel_runs_the_readme_library_example(wheel, tmp_path):
    """``pip install oar-lite`` alone: the library imports and runs a GRPO step with OAR-G on a
    model built in place (the README's block, read from the README), with none of the extras'
    packages installed; the lab's command line says which extra it needs."""
    python, work = _fresh_venv(tmp_path)
    _ok(_run([python, "-m", "pip", "install", "-q", "-c", ROOT / "constraints.txt", wheel], cwd=work))
    listed = _ok(_run([python, "-m", "pip", "list", "--format=freeze"], cwd=work)).stdout.lower()
    installed = {line.split("==")[0].replace("_", "-") for line in listed.splitlines()}
    assert not installed & set(EXTRAS_PACKAGES), sorted(installed & set(EXTRAS_PACKAGES))
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## The package\n"):]
    (work / "example.py").write_text(section[section.index("```python\n") + 10:section.index("\n```\n")] + "\n")
    proc = _ok(_run([python, "example.py"], cwd=work))
    assert "gradient norm" in proc.stdout and "OAR-G weights of row 0's reasoning: [" in proc.stdout, proc.stdout
    lab = _run([python, "-m", "oar_lite.lab", "demo", "--tiny"], cwd=work)
    assert lab.returncode != 0 and "pip install 'oar-lite[lab]'" in lab.stderr, lab.stderr[-2000:]
    trl = _run([python, "-c", "import oar_lite.trl"], cwd=work)
    assert trl.returncode != 0 and "pip install 'oar-lite[trl]'" in trl.stderr, trl.stderr[-2000:]


def test_wheel_carries_the_data(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    shipped = sorted(str(p.relative_to(ROOT)) for layer in ("course", "lab")
                     for p in (ROOT / "oar_lite" / layer / "data").rglob("*") if p.is_file())
    assert shipped and all(name in names for name in shipped), sorted(set(shipped) - set(names))


def test_colab_cell_installs_the_wheel_or_says_what_to_do(installed):
    python, work, wheel = installed
    cell = ROOT / "notebooks" / "setup_cell.py"
    # a source pip cannot install: the cell stops and says what to do
    failed = _run([python, cell], cwd=work, OAR_LITE_SOURCE=f"file://{work / 'no-such-oar_lite.whl'}",
                  PIP_CONSTRAINT=str(ROOT / "constraints.txt"))
    assert failed.returncode != 0 and "Installing failed" in failed.stderr and "What to do" in failed.stderr
    # the wheel, through the same code a Colab user runs, under the tested versions
    _ok(_run([python, cell], cwd=work, OAR_LITE_SOURCE=f"file://{wheel}", PIP_CONSTRAINT=str(ROOT / "constraints.txt")))
    where = _ok(_run([python, "-c", "import oar_lite, trl; print(oar_lite.__file__); print(trl.__version__)"], cwd=work))
    package_file, trl_version = where.stdout.split()
    assert package_file.startswith(str(python.parent.parent)) and str(ROOT) not in package_file
    assert trl_version == next(line.split("==")[1] for line in (ROOT / "constraints.txt").read_text().splitlines()
                               if line.startswith("trl=="))
    # without OAR_LITE_SOURCE (a local kernel) the cell installs nothing and checks the import
    _ok(_run([python, cell], cwd=work))


def test_demo_runs_from_the_wheel(installed):
    python, work, _ = installed
    _ok(_run([python, "-m", "pip", "show", "oar-lite"], cwd=work))
    proc = _ok(_run([python, "-m", "oar_lite.lab", "demo", "--tiny", "--out", work / "demo"], cwd=work))
    assert "| GRPO |" in proc.stdout and "| OAR-G |" in proc.stdout
    # quiet: the results fit one screen, stderr holds the progress bars and nothing of the libraries
    assert len(proc.stdout.splitlines()) <= 50, proc.stdout
    assert "Loading weights" not in proc.stderr and "Warning" not in proc.stderr, proc.stderr[-3000:]
    assert "uniform" in proc.stderr and "oar-g" in proc.stderr  # one bar per method
    assert (work / "demo" / "compare.md").exists() and (work / "demo" / "compare.png").exists()


def test_notebook_runs_from_the_wheel(installed):
    python, work, _ = installed
    _ok(_run([python, "-m", "pip", "install", "-q", "-c", ROOT / "constraints.txt", "nbval", "ipykernel"], cwd=work))
    for name in (NOTEBOOK, "sanitize.cfg"):
        shutil.copy(ROOT / "notebooks" / name, work / name)
    _ok(_run([python, "-m", "pytest", "-q", "--nbval-lax", "--nbval-sanitize-with", "sanitize.cfg",
              "--nbval-cell-timeout=900", "-p", "no:cacheprovider", NOTEBOOK], cwd=work))
