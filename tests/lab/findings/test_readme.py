"""oar_lite.lab.findings.readme: the README's "What we measured" block is what the shipped data says."""
from pathlib import Path

import pytest

from oar_lite.lab.findings import readme
from oar_lite.lab.findings.__main__ import main

ROOT = Path(__file__).resolve().parents[3]


def test_readme_block_is_what_the_shipped_data_says():
    assert readme.check(ROOT / "README.md") is None, readme.check(ROOT / "README.md")


def test_write_replaces_only_the_block_and_check_sees_a_stale_one(tmp_path, monkeypatch):
    monkeypatch.setattr(readme, "block", lambda: "- new")
    path = tmp_path / "README.md"
    start, end = readme.MARKERS
    path.write_text(f"# T\n{start}\n- old\n{end}\ntail\n")
    assert "README block:\n- old" in readme.check(path)
    main(["--write-readme", str(path)])
    assert path.read_text() == f"# T\n{start}\n- new\n{end}\ntail\n" and readme.check(path) is None
    path.write_text("no markers")
    with pytest.raises(ValueError, match="has no block between"):
        readme.write(path)
