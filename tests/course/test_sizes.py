"""`oar_lite.course.sizes.run_size`: the one reader of OAR_LITE_SIZE, which refuses a typo."""
import pytest

from oar_lite.course.sizes import SIZES, VARIABLE, run_size


@pytest.mark.parametrize("size", ["test", "grading", "full"])
def test_each_size_is_read_as_written(size):
    assert run_size({VARIABLE: size}) == size


@pytest.mark.parametrize("environ", [{}, {VARIABLE: ""}, {VARIABLE: "  "}])
def test_unset_or_empty_means_full_size(environ):
    assert run_size(environ) == "full"


@pytest.mark.parametrize("typo", ["tset", "Test", "grade", "small"])
def test_a_typo_is_refused_naming_the_sizes(typo):
    with pytest.raises(ValueError, match=rf"OAR_LITE_SIZE='{typo}' is not a size") as err:
        run_size({VARIABLE: typo})
    assert all(size in str(err.value) for size in SIZES)


def test_make_grade_sets_a_size_the_notebooks_know():
    from conftest import load_script

    course = load_script("course")
    assert run_size(course.GRADING_SIZE) == "grading"
