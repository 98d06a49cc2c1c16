"""The package as users install it: declared TRL range enforced at import, data found
through the package. (The wheel itself is built and installed by `make test-wheel`.)"""
import re
import sys
import tomllib
import warnings
from pathlib import Path

import pytest

from oar_lite import toy

ROOT = Path(__file__).resolve().parent.parent


def _requirement(name: str) -> str:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    (spec,) = [d for d in deps if re.match(rf"{name}\b", d)]
    return spec[len(name):]


def test_trl_range_in_pyproject_is_the_one_enforced():
    from oar_lite.trl import TRL_SUPPORTED

    assert _requirement("trl") == TRL_SUPPORTED


def test_unsupported_trl_gets_an_error_naming_the_supported_range(monkeypatch):
    from oar_lite.trl import TRL_SUPPORTED, check_trl_version

    monkeypatch.delenv("OAR_LITE_ANY_TRL", raising=False)
    for bad in ("1.5.1", "1.17.0", "2.0.0", "0.29.1"):
        with pytest.raises(ImportError, match=re.escape(f"supports trl{TRL_SUPPORTED}, but trl {bad} is installed")):
            check_trl_version(bad)
    for good in ("1.6.0", "1.16.0", "1.16.1"):
        assert check_trl_version(good) == good


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
    """The toy model and held-out set live inside the package (so wheels carry them) and
    `pyproject.toml` ships the whole folder."""
    package = Path(sys.modules["oar_lite"].__file__).parent
    assert toy.DATA_DIR == package / "data"
    assert (toy.MODEL_DIR / "model.safetensors").is_file() and toy.EVAL_PATH.is_file()
    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert "data/**/*" in package_data["oar_lite"]
    assert not (ROOT / "data").exists(), "data/ moved to oar_lite/data: one copy only"
