"""oar_lite.lab.findings.prose: templates fill numbers, a branch on a verdict lives in the template,
a missing number is an error, and wrapped template lines render as one paragraph."""
import jinja2
import pytest

from oar_lite.lab.findings import prose


def _template(tmp_path, monkeypatch, text: str) -> str:
    env = prose.ENVIRONMENT.overlay(loader=jinja2.FileSystemLoader(str(tmp_path)))
    (tmp_path / "t.md.j2").write_text(text)
    monkeypatch.setattr(prose, "ENVIRONMENT", env)
    return "t.md.j2"


def test_filters_format_numbers_intervals_verdicts_and_seed_spans():
    assert prose.num(0.0556, "+.3f") == "+0.056" and prose.ci([0.78, 1.49], ".2f") == "0.78 to 1.49"
    assert prose.reads([0.01, 0.03]) == "above" and prose.reads([-0.03, -0.01]) == "below"
    assert prose.reads([-0.01, 0.02]) == "includes" and prose.reads([1.01, 1.4], 1.0) == "above"
    assert prose.reads({"low": -0.1, "high": 0.2, "mean": 0.05}) == "includes"
    assert prose.span([201, 0, 1, 2, 3, 5, 7, 8, 202, 203]) == "0-3, 5, 7, 8, 201-203"
    with pytest.raises(ValueError, match="to print as a number"):
        prose.num(float("nan"), ".2f")
    with pytest.raises(ValueError, match="two ends"):
        prose.ci([0.1], ".2f")


def test_a_branch_on_a_verdict_is_in_the_template_and_lines_join_into_a_paragraph(tmp_path, monkeypatch):
    name = _template(tmp_path, monkeypatch, """{% macro reading(x) %}
The gain was {{ x.diff | num("+.3f") }}
({{ x.diff_ci | ci("+.3f") }}),
{% if x.diff_ci | reads == "above" %}
a gain
{% else %}
an interval that includes 0
{% endif %}.

| a | b |
|---|---|
{% for k in [1, 2] %}
| {{ k }} | x |
{% endfor %}

- one
  wrapped
- two
{% endmacro %}
""")
    gain = prose.render(name, "reading", x={"diff": 0.02, "diff_ci": [0.01, 0.03]})
    assert gain == "The gain was +0.020 (+0.010 to +0.030), a gain.\n\n| a | b |\n|---|---|\n| 1 | x |\n| 2 | x |\n\n- one wrapped\n- two"
    none = prose.render(name, "reading", x={"diff": 0.0, "diff_ci": [-0.01, 0.01]})
    assert none.startswith("The gain was +0.000 (-0.010 to +0.010), an interval that includes 0.\n\n")


def test_a_missing_number_or_macro_is_an_error_not_a_blank(tmp_path, monkeypatch):
    name = _template(tmp_path, monkeypatch, "{% macro m(x) %}{{ x.missing | num('.2f') }}{% endmacro %}")
    with pytest.raises(jinja2.UndefinedError):
        prose.render(name, "m", x={})
    with pytest.raises(KeyError, match=r"has no macro 'other'; it has \['m'\]"):
        prose.render(name, "other", x={})


def test_inline_drops_paragraph_breaks_and_unwrap_tidies_spaces():
    assert prose.inline(f"  a{prose.PARAGRAPH}b  ") == "a b"
    assert prose.unwrap(f"x  y ,\nz .{prose.PARAGRAPH}{prose.PARAGRAPH}\n# Head\ntext") == "x y, z.\n\n# Head\ntext"
