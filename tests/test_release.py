"""The student release (`make release-student`): a class repository with the student material only.

It is greped for every solution's distinctive lines, every model answer and every hidden test of
the course notebooks (scripts/course.py `leaks`); the same grep runs over the student site in
`make check-site`.
"""
import re

import nbformat
import pytest

from conftest import load_script

course = load_script("course")
NOTEBOOKS = course.notebooks()
REPO = "my-school/rl-course-2027"


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    return course.release_student(tmp_path_factory.mktemp("release") / "class", REPO)


def test_the_release_holds_the_student_notebooks_the_package_and_a_student_readme(release):
    assert sorted(p.name for p in (release / "notebooks").glob("*.ipynb")) == [p.name for p in NOTEBOOKS]
    assert (release / "oar_lite" / "__init__.py").is_file() and (release / "oar_lite" / "course" / "data" / "toy-model" / "config.json").is_file()
    assert (release / "pyproject.toml").is_file() and not (release / "student").exists() and not (release / "scripts").exists()
    assert not list(release.rglob("__pycache__"))
    for path in NOTEBOOKS:
        nb = nbformat.read(release / "notebooks" / path.name, as_version=4)
        if course.questions(nbformat.read(path, as_version=4)):
            assert nb.metadata.get("otter", {}).get("assignment_name") == path.stem   # graded by its metadata
        text = "\n".join(c.source for c in nb.cells)
        assert f"colab.research.google.com/github/{REPO}/blob/main/notebooks/{path.name}" in text
        assert f"git+https://github.com/{REPO}.git" in text                            # the setup cell installs from it
        assert "oar-lite/oar-lite" not in text, f"{path.name} still points at the upstream repository"
    readme = (release / "README.md").read_text()
    colab = re.findall(r"https://colab\.research\.google\.com/github/([^)\s]+)", readme)
    assert len(colab) == len(NOTEBOOKS) and all(c.startswith(f"{REPO}/blob/main/notebooks/") for c in colab)
    assert "oar-lite/oar-lite" not in readme


def test_the_release_shows_no_solution_model_answer_or_hidden_test(release):
    assert course.leaks(release) == []


def test_every_relative_link_of_the_release_resolves(release):
    """Each link of the release's pages and notebooks (Markdown, href, src) is followed: the file
    is in the release, and a #anchor is a heading or an <a id> of the page it names."""
    assert course.broken_links(release) == []
    assert (release / "docs" / "gpu.md").is_file() and (release / "docs" / "scale.md").is_file()   # 07 and trl.md link them


def test_the_link_check_finds_a_missing_page_an_anchor_and_a_way_out(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A page\n\n## Its part · two\n\n<a id=\"eq-x\"></a>\n")
    (tmp_path / "README.md").write_text(
        "[ok](docs/a.md) [part](docs/a.md#its-part--two) [eq](docs/a.md#eq-x) [web](https://x.org/b.md)\n"
        "`[in code](nowhere.md)`\n\n```\n[in a block](nowhere.md)\n```\n")
    assert course.broken_links(tmp_path) == []
    (tmp_path / "README.md").write_text("[gone](docs/b.md) [anchor](docs/a.md#nothing) [out](../x.md) <img src=\"fig.png\">\n")
    found = course.broken_links(tmp_path)
    assert len(found) == 4 and all(f.startswith("README.md -> ") for f in found)
    assert any("no anchor #nothing" in f for f in found) and any("fig.png: no such file" in f for f in found)


def test_the_grep_covers_every_hidden_test_model_answer_and_solution():
    """Each hidden test, model answer and solution cell has a line the grep looks for; only a
    prediction cell, whose solution is a short number (``predicted_pivotal = 6  # SOLUTION``), has none."""
    lines = course.distinctive_lines()
    uncovered = []
    for path in NOTEBOOKS:
        for q in course.questions(nbformat.read(path, as_version=4)):
            for kind in ("solution", "answers", "hidden"):
                for source in q[kind]:
                    if any(line in source for line in lines):
                        continue
                    solved = [l.split("# SOLUTION")[0].strip() for l in source.splitlines() if l.rstrip().endswith("# SOLUTION")]
                    if kind == "solution" and "BEGIN SOLUTION" not in source and all(len(s) < 24 for s in solved):
                        continue
                    uncovered.append(f"{path.name} {q['name']} {kind}: {source[:80]!r}")
    assert not uncovered, uncovered


def test_the_grep_finds_a_course_notebook_a_model_answer_and_a_hidden_test(tmp_path):
    """The check can fail: a course notebook copied in, a model answer pasted into a README, a
    hidden test in a page are each found, with the file named."""
    source = NOTEBOOKS[1]
    qs = course.questions(nbformat.read(source, as_version=4))
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "notebooks" / source.name).write_text(source.read_text())
    (tmp_path / "README.md").write_text("Notes\n\n" + qs[0]["answers"][0] if qs[0]["answers"] else "")
    (tmp_path / "page.html").write_text("<pre>" + qs[0]["hidden"][0].replace("# HIDDEN", "").replace("<", "&lt;") + "</pre>")
    found = course.leaks(tmp_path)
    assert any(f.startswith(f"notebooks/{source.name}: ") for f in found)
    assert any(f.startswith("page.html: ") for f in found)
    if qs[0]["answers"]:
        assert any(f.startswith("README.md: ") for f in found)


def test_the_release_needs_a_class_repository(tmp_path):
    with pytest.raises(ValueError, match="CLASS_REPO"):
        course.release_student(tmp_path / "class", None)
    with pytest.raises(ValueError, match="owner/name"):
        course.release_student(tmp_path / "class", "not a repository")
    assert course.class_repository("https://github.com/my-school/rl-course.git") == "my-school/rl-course"
    assert not (tmp_path / "class").exists()


def test_the_student_site_without_a_class_repository_has_no_colab_link():
    nb = nbformat.read(course.STUDENT / NOTEBOOKS[1].name, as_version=4)
    assert "colab.research.google.com" in nb.cells[0].source
    assert "colab.research.google.com" not in course.for_class(nb, None).cells[0].source
    assert "colab.research.google.com" not in course.student_readme(NOTEBOOKS, None)
