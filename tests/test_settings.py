"""`oar_lite.settings`: range checks, and every setting declared once (`Setting`): the functions'
defaults, `OARConfig`'s ``oar_*`` fields, the command line's flags, docs/trl.md's table and the
report's settings line are generated from the declarations or checked against them here."""
import argparse
import dataclasses
import functools
import inspect
import math
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import oar_lite as ol
from conftest import assert_refused_or_in_range
from oar_lite.lab import compare
from oar_lite.lab.__main__ import _parser
from oar_lite.attribution import CREDIT_RANGES, CreditConfig
from oar_lite.settings import check_number, settings_of
from oar_lite.lab.report import render_markdown
from oar_lite.lab.uniformity import weight_uniformity
from oar_lite.reshape import RESHAPING, bilevel_weights
from oar_lite.train import LORA_SETTINGS, NUMERIC_RANGES, TrainConfig

ROOT = Path(__file__).resolve().parents[1]

numbers = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-(10**40), 10**40),
                    st.sampled_from([0, 0.0, -0.0, 1, 2, 1e-300, 1e300]))


NUMERIC_FIELDS = sorted(NUMERIC_RANGES)
ACCEPTS_ZERO = {"seed", "weight_decay", "beta", "quantile", "boost", "floor", "noise_std",
                "eval_every", "eval_size", "checkpoint_every"}
BOUNDED_ABOVE = {"seed", "top_p", "learning_rate", "clip_eps", "quantile", "floor"}
INTEGER_FIELDS = {name for name, r in NUMERIC_RANGES.items() if r.get("integer")}
BAD = [math.nan, math.inf, -math.inf, -1, -1e-9, 0, 10**30, 1e30, True, "1", 2.5]


def test_every_numeric_field_has_a_range():
    import dataclasses

    numeric = {f.name for f in dataclasses.fields(TrainConfig) if f.type in ("int", "float", "int | None", "float | None")}
    assert numeric == set(NUMERIC_RANGES)


def _expected_refusal(field, value) -> bool:
    if isinstance(value, (bool, str)):
        return True
    if isinstance(value, float) and not math.isfinite(value):
        return True
    if field in INTEGER_FIELDS and not isinstance(value, int):
        return True
    if value < 0:
        return True
    if value == 0:
        return field not in ACCEPTS_ZERO
    if value > 1 and field in BOUNDED_ABOVE - {"seed"}:
        return True
    if value >= 1e29:
        return field in BOUNDED_ABOVE
    return False


@pytest.mark.parametrize("field", NUMERIC_FIELDS)
@pytest.mark.parametrize("value", BAD, ids=repr)
def test_train_config_refuses_values_out_of_range(field, value):
    lora = {"lora": True} if field in LORA_SETTINGS else {}  # a LoRA setting needs LoRA on (else it is refused)
    if _expected_refusal(field, value):
        with pytest.raises(ValueError, match=rf"TrainConfig\.{field}=.* is out of range: expected "):
            TrainConfig(**{field: value}, **lora)
    else:
        assert getattr(TrainConfig(**{field: value}, **lora), field) == value


def test_max_grad_norm_and_friends_from_the_issue():
    for field, value in [("max_grad_norm", 0), ("max_grad_norm", -1.0), ("learning_rate", math.nan),
                         ("clip_eps", math.inf)]:
        with pytest.raises(ValueError, match=field):
            TrainConfig(**{field: value})
    for field, value in [("boost", math.nan), ("noise_std", math.inf)]:
        with pytest.raises(ValueError, match=field):
            TrainConfig(credit=CreditConfig(**{field: value}))


@settings(max_examples=300, deadline=None)
@given(field=st.sampled_from(NUMERIC_FIELDS), value=numbers)
def test_train_config_property(field, value):
    """Any number: refused with a message naming the field, or kept, finite and in range."""
    make = functools.partial(TrainConfig, lora=True) if field in LORA_SETTINGS else TrainConfig
    assert_refused_or_in_range(make, "TrainConfig", field, value, NUMERIC_RANGES)


def test_check_number_messages():
    with pytest.raises(ValueError, match=r"^X\.y=nan is out of range: expected a finite number > 0$"):
        check_number("X", "y", math.nan, low=0, low_open=True)
    with pytest.raises(ValueError, match=r"expected an integer in \[1, 5\] or None"):
        check_number("X", "y", 7, integer=True, low=1, high=5, optional=True)
    assert check_number("X", "y", None, optional=True) is None


# ----------------------------------------------------------------------------- declared once, read everywhere

def signature_default(fn, name):
    return inspect.signature(fn).parameters[name].default


def test_functions_take_their_defaults_from_the_declarations():
    credit = settings_of(CreditConfig)
    for name in RESHAPING:
        assert credit[name] is RESHAPING[name] and signature_default(bilevel_weights, name) == RESHAPING[name].default
    for name in ("quantile", "floor"):
        assert signature_default(weight_uniformity, name) == RESHAPING[name].default
    for fn in (ol.gradient_scores, ol.gradient_scores_batch):
        assert signature_default(fn, "noise_std") == credit["noise_std"].default
    for fn in (ol.perturbation_scores, ol.perturbation_scores_batch):
        assert signature_default(fn, "batch_size") == credit["batch_size"].default
        assert signature_default(fn, "token_budget") == credit["token_budget"].default
    assert {name: s.range for name, s in credit.items() if s.range} == CREDIT_RANGES


def test_oar_config_fields_are_the_credit_settings():
    from oar_lite.trl import OAR_NUMERIC_RANGES, OARConfig

    fields = {f.name: f for f in dataclasses.fields(OARConfig) if f.name.startswith("oar_")}
    twins = {name: s for name, s in settings_of(CreditConfig).items() if name != "method"}
    assert set(fields) == {f"oar_{name}" for name in twins} | {"oar_method", "oar_answer_formats"}
    for name, declared in twins.items():
        field = fields[f"oar_{name}"]
        assert field.metadata["help"] == declared.help
        assert field.default == declared.default  # one default per setting, OAR-P's batch size included
        if declared.range:
            assert OAR_NUMERIC_RANGES[f"oar_{name}"] == declared.range


def test_command_line_flags_are_the_run_settings():
    parser = _parser()
    actions = {a.dest: a for a in parser._subparsers._group_actions[0].choices["compare"]._actions}
    declared = compare.run_settings()
    assert set(declared) >= {"steps", "learning_rate", "quantile", "boost", "floor", "noise_std", "group_size"}
    for name, setting in declared.items():
        action = actions[name]
        assert action.option_strings[0] == "--" + name.replace("_", "-") and action.help.startswith(setting.help)
        assert action.default is None  # a flag not given changes nothing
        bad = setting.range.get("low", 0) - 1
        with pytest.raises(argparse.ArgumentTypeError, match="out of range"):
            action.type(str(bad))


def test_docs_trl_table_lists_every_oar_field_with_its_default():
    from oar_lite.trl import OARConfig

    table = re.findall(r"^\| `(oar_\w+)` \| ([^|]+) \|", (ROOT / "docs" / "trl.md").read_text(), flags=re.M)
    fields = {f.name: f for f in dataclasses.fields(OARConfig) if f.name.startswith("oar_")}
    assert [name for name, _ in table] == list(fields)
    for name, cell in table:
        default, cell = fields[name].default, cell.strip()
        if name == "oar_answer_formats":
            continue  # "all": said in words
        assert cell == (f'`"{default}"`' if isinstance(default, str) else str(default)) or float(cell) == default, name


def test_report_settings_line_names_every_credit_setting():
    settings = {**dataclasses.asdict(TrainConfig()), **dataclasses.asdict(TrainConfig().credit)}
    line = render_markdown({"methods": {}, "target": 0.5, "settings": settings}).split("\n")[2]
    for name, declared in settings_of(CreditConfig).items():
        if name != "method":
            assert f"{declared.label or name} {settings[name]}" in line, name
