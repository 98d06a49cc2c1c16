"""Bad settings are refused in one place per config (issue 15, item 2): TrainConfig, OARConfig
and the command-line flags, with a ValueError that names the field, the value and the range."""
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import oar_lite.compare
from oar_lite.__main__ import main
from oar_lite.attribution import CreditConfig
from oar_lite.checks import check_number
from oar_lite.train import NUMERIC_RANGES, TrainConfig

NUMERIC_FIELDS = sorted(NUMERIC_RANGES)
ACCEPTS_ZERO = {"seed", "weight_decay", "beta", "quantile", "boost", "floor", "noise_std", "lora_dropout",
                "eval_every", "eval_size", "checkpoint_every"}
BOUNDED_ABOVE = {"seed", "top_p", "learning_rate", "clip_eps", "quantile", "floor", "lora_dropout"}
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
    if _expected_refusal(field, value):
        with pytest.raises(ValueError, match=rf"TrainConfig\.{field}=.* is out of range: expected "):
            TrainConfig(**{field: value})
    else:
        assert getattr(TrainConfig(**{field: value}), field) == value


def test_max_grad_norm_and_friends_from_the_issue():
    for field, value in [("max_grad_norm", 0), ("max_grad_norm", -1.0), ("learning_rate", math.nan),
                         ("clip_eps", math.inf)]:
        with pytest.raises(ValueError, match=field):
            TrainConfig(**{field: value})
    for field, value in [("boost", math.nan), ("noise_std", math.inf)]:
        with pytest.raises(ValueError, match=field):
            TrainConfig(credit=CreditConfig(**{field: value}))


numbers = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-(10**40), 10**40),
                    st.sampled_from([0, 0.0, -0.0, 1, 2, 1e-300, 1e300]))


@settings(max_examples=300, deadline=None)
@given(field=st.sampled_from(NUMERIC_FIELDS), value=numbers)
def test_train_config_property(field, value):
    """Any number: refused with a message naming the field, or kept, finite and in range."""
    try:
        config = TrainConfig(**{field: value})
    except ValueError as err:
        assert f"TrainConfig.{field}=" in str(err) and "expected" in str(err)
        return
    kept = getattr(config, field)
    assert math.isfinite(kept)
    allowed = NUMERIC_RANGES[field]
    low = allowed.get("low")
    if low is not None:
        assert kept > low if allowed.get("low_open") else kept >= low
    high = allowed.get("high")
    if high is not None:
        assert kept < high if allowed.get("high_open") else kept <= high
    if allowed.get("integer"):
        assert isinstance(kept, int)


def test_check_number_messages():
    with pytest.raises(ValueError, match=r"^X\.y=nan is out of range: expected a finite number > 0$"):
        check_number("X", "y", math.nan, low=0, low_open=True)
    with pytest.raises(ValueError, match=r"expected an integer in \[1, 5\] or None"):
        check_number("X", "y", 7, integer=True, low=1, high=5, optional=True)
    assert check_number("X", "y", None, optional=True) is None


# ----------------------------------------------------------------------------- OARConfig

def oar_config(**kw):
    from oar_lite.trl import OARConfig

    return OARConfig(output_dir="/tmp/oar-validation", report_to="none", use_cpu=True, **kw)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(field=st.sampled_from(["oar_quantile", "oar_boost", "oar_floor", "oar_noise_std", "oar_batch_size"]),
       value=numbers)
def test_oar_config_property(field, value):
    from oar_lite.trl import OAR_NUMERIC_RANGES

    try:
        config = oar_config(**{field: value})
    except ValueError as err:
        assert f"OARConfig.{field}=" in str(err) and "expected" in str(err)
        return
    kept = getattr(config, field)
    assert math.isfinite(kept)
    allowed = OAR_NUMERIC_RANGES[field]
    assert kept >= allowed["low"] and ("high" not in allowed or kept <= allowed["high"])


@pytest.mark.parametrize("field", ["oar_quantile", "oar_boost", "oar_floor", "oar_noise_std", "oar_batch_size"])
@pytest.mark.parametrize("value", [math.nan, math.inf, -1.0])
def test_oar_config_refuses_nan_inf_negative(field, value):
    with pytest.raises(ValueError, match=rf"OARConfig\.{field}="):
        oar_config(**{field: value})


# ----------------------------------------------------------------------------- the command line

class _Reached(Exception):
    pass


@pytest.fixture
def no_compare(monkeypatch):
    def fake(*args, **kwargs):
        raise _Reached(kwargs)

    monkeypatch.setattr(oar_lite.compare, "compare", fake)


@pytest.mark.parametrize("flag, value", [
    ("--lr", "nan"), ("--lr", "0"), ("--lr", "inf"), ("--quantile", "1.5"), ("--boost", "-1"), ("--boost", "nan"),
    ("--floor", "inf"), ("--prompts", "0"), ("--group-size", "1"), ("--iterations", "0"), ("--beta", "-0.1"),
    ("--noise-std", "nan"), ("--eval-every", "-1"), ("--eval-size", "-5"), ("--steps", "0"), ("--seeds", "-1"),
    ("--target", "nan"), ("--target", "0"), ("--jobs", "0"), ("--threads", "0"),
])
def test_cli_refuses_bad_flags(flag, value, no_compare, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["compare", f"{flag}={value}", "--out", "/tmp/never-written"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert f"{flag}=" in err and "expected" in err


@settings(max_examples=100, deadline=None)
@given(value=st.floats(allow_nan=True, allow_infinity=True))
def test_cli_lr_property(value):
    """--lr: refused naming the flag, or passed on as a learning rate TrainConfig accepts."""
    import contextlib
    import io

    original = oar_lite.compare.compare
    oar_lite.compare.compare = lambda *a, **kw: (_ for _ in ()).throw(_Reached(kw))
    try:
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr):
            try:
                main(["compare", f"--lr={value!r}", "--out", "/tmp/never-written"])
            except SystemExit as exit_info:
                assert exit_info.code == 2 and "--lr=" in stderr.getvalue()
                return
            except _Reached as reached:
                assert TrainConfig(learning_rate=reached.args[0]["overrides"]["learning_rate"])
                return
        raise AssertionError("main neither refused the flag nor reached compare")
    finally:
        oar_lite.compare.compare = original


@pytest.mark.parametrize("field", ["learning_rate", "beta", "epsilon", "temperature", "top_p", "max_grad_norm",
                                   "weight_decay"])
@pytest.mark.parametrize("value", [math.nan, math.inf, -1.0])
def test_oar_config_refuses_bad_trl_fields(field, value):
    with pytest.raises(ValueError, match=rf"OARConfig\.{field}="):
        oar_config(**{field: value})
