"""`oar_lite.attribution.registry`: methods by name, the options each declares, the P_final
mode a method runs in; a name registered once, the library's never replaced."""
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from oar_lite.attribution import registry
from oar_lite.attribution.registry import (BATCHED, LIBRARY_METHODS, WEIGHTINGS, SCORERS, declared_options,
                                           Method, default_mode, display_name, method_of, register_scorer)

ROOT = Path(__file__).resolve().parents[2]


def _ramp(model, input_ids, reasoning, answer, *, mode="last", noise_std=None):
    return torch.arange(reasoning.stop - reasoning.start, dtype=torch.float32)


def _ramp_batch(model, input_ids, attention_mask, reasoning, answer, *, mode="last", batch_size=None):
    return [torch.arange(r.stop - r.start, dtype=torch.float32) for r in reasoning]


@pytest.fixture
def ramp(scorer_registry):
    """The scorer ``ramp`` registered with a batched form, for one test."""
    register_scorer("ramp", _ramp, batched=_ramp_batch)
    return "ramp"


def test_the_library_methods_are_registered_with_their_batched_forms():
    assert set(LIBRARY_METHODS) == {"uniform", "oar-p", "oar-g"} <= set(SCORERS)
    assert set(BATCHED) >= {"oar-p", "oar-g"} and "entropy" not in BATCHED
    ones = torch.ones(4)
    assert WEIGHTINGS["uniform"](ones) is ones and "oar-p" not in WEIGHTINGS  # plain GRPO's weights are its ones


def test_a_scorer_declares_its_options_by_keyword_only_parameters(ramp):
    assert declared_options(ramp) == ("noise_std",)  # the mode is not an option
    assert declared_options(ramp, batched=True) == ("batch_size",)
    assert default_mode(ramp) == "last" and default_mode("uniform") is None
    assert method_of("ramp").run_mode == "last" and method_of("ramp:answer_mean").run_mode == "answer_mean"
    assert method_of("entropy").run_mode is None


def test_a_taken_name_is_refused_unless_replaced_and_the_library_names_never(ramp):
    with pytest.raises(ValueError, match=r"'ramp' is registered already \(.*_ramp\).*replace=True"):
        register_scorer(ramp, _ramp)
    register_scorer(ramp, _ramp, replace=True)
    assert SCORERS[ramp] is _ramp and ramp not in BATCHED  # a stale batched form would score the new scorer's rows
    for name in LIBRARY_METHODS:
        for replace in (False, True):
            with pytest.raises(ValueError, match=rf"'{name}' is the library's method .* cannot be replaced"):
                register_scorer(name, _ramp, replace=replace)
    assert SCORERS["oar-p"] is registry.perturbation_scores and SCORERS["uniform"] is registry.uniform_weights
    with pytest.raises(ValueError, match="'entropy' is registered already"):  # the lab's, registered by conftest
        register_scorer("entropy", _ramp)


@pytest.mark.parametrize("name, match", [("a:last", "cannot end in ':<P_final mode>'"),
                                         ("x:answer_joint", "cannot end in"), ("", "non-empty str"),
                                         (" ramp", "surrounding spaces"), (3, "non-empty str")])
def test_register_scorer_refuses_names_the_method_grammar_reserves(name, match, scorer_registry):
    with pytest.raises(ValueError, match=match):
        register_scorer(name, _ramp)
    assert name not in SCORERS


def test_a_name_may_hold_a_colon_and_the_mode_is_what_follows_the_last(ramp):
    register_scorer("wrapped:ramp", _ramp)
    assert method_of("wrapped:ramp") == Method("wrapped:ramp")
    assert method_of("wrapped:ramp:answer_joint") == Method("wrapped:ramp", "answer_joint")
    assert method_of("ramp:last") == Method("ramp", "last")


@pytest.mark.parametrize("method, match", [
    ("oar-x", r"unknown method 'oar-x'; registered: \[.*'oar-g'.*oar_lite\.lab\.scorers"),
    ("none", r"unknown method 'none' \(plain GRPO is spelled 'uniform'\)"),
    ("entropy:last", "takes no P_final mode"), ("oar-p:middle", "middle"),
])
def test_method_of_says_what_was_wrong_and_what_is_expected(method, match):
    with pytest.raises(ValueError, match=match):
        method_of(method)


def test_method_of_splits_name_and_mode():
    assert method_of("oar-p:answer_joint") == Method("oar-p", "answer_joint")
    assert method_of("oar-g") == Method("oar-g") and str(method_of("oar-g")) == "oar-g"
    assert method_of("shuffled:oar-p") == Method("shuffled:oar-p")


def test_a_method_is_parsed_once_into_a_typed_value(ramp):
    from oar_lite.attribution import CreditConfig

    m = method_of("inverted:oar-p:last")
    assert m == Method("inverted:oar-p", "last") and str(m) == "inverted:oar-p:last"
    assert method_of("inverted:oar-p:last") is m and method_of(m) is m  # kept, and passed on as it is
    assert method_of("oar-g").run_mode == default_mode("oar-g") and method_of("oar-g").mode is None
    credit = CreditConfig(method="shuffled:oar-g:answer_joint")
    assert credit.parsed == Method("shuffled:oar-g", "answer_joint") and credit.parsed is credit.parsed
    assert method_of(credit.parsed) is credit.parsed and credit.parsed.run_mode == "answer_joint"
    with pytest.raises(ValueError, match="must be a str"):
        method_of(["oar-g"])
    assert method_of("ramp:answer_mean").name == "ramp"
    SCORERS.pop("ramp")  # unregistered after it was parsed: the kept value does not outlive it
    with pytest.raises(ValueError, match="unknown method 'ramp:answer_mean'"):
        method_of("ramp:answer_mean")


def test_plain_grpo_has_one_display_name():
    assert display_name("uniform") == "GRPO" and display_name("oar-g") == "OAR-G" and display_name("oar-p") == "OAR-P"
    assert display_name("oracle") == "oracle" and display_name("oar-p:last") == "oar-p:last"


IMPORTS = ("oar_lite.trl", "oar_lite.course", "oar_lite.lab", "oar_lite.course.oracle", "oar_lite.lab.scorers",
           "oar_lite.lab.compare")


def _registry_after(modules) -> tuple[list[str], str]:
    """``(SCORERS after importing ``modules`` in that order, what OARConfig says of 'random' then)``,
    in a fresh interpreter."""
    code = ("import importlib, sys, oar_lite\n"
            "for m in sys.argv[1:]: importlib.import_module(m)\n"
            "from oar_lite.trl import OARConfig\n"
            "try:\n"
            "    OARConfig(output_dir='/tmp/unused', report_to='none', use_cpu=True, oar_method='random')\n"
            "    said = 'accepted'\n"
            "except ValueError as err:\n"
            "    said = str(err)\n"
            "print(sorted(oar_lite.SCORERS)); print(said)\n")
    out = subprocess.run([sys.executable, "-c", code, *modules], capture_output=True, text=True, cwd=ROOT, check=True)
    names, said = out.stdout.strip().split("\n")
    return eval(names), said  # noqa: S307  (our own subprocess's print of a list of str)


def test_what_oarconfig_accepts_does_not_change_with_import_order():
    """Issue 47 item 2: the library's packages register nothing; the course's and the lab's
    methods join only with the module that registers them, the same set whatever the order; a
    method that is not there is refused naming that module."""
    bare, said = _registry_after(["oar_lite.trl", "oar_lite.course", "oar_lite.lab"])
    assert bare == sorted(LIBRARY_METHODS)
    assert "unknown method 'random'" in said and "oar_lite.lab.scorers" in said
    oracles, _ = _registry_after(["oar_lite.course.oracle"])
    assert oracles == sorted([*LIBRARY_METHODS, "oracle", "oracle-pivotal", "oracle-relevant"])
    full = [_registry_after(order) for order in (IMPORTS, IMPORTS[::-1], IMPORTS[3:] + IMPORTS[:3])]
    assert all(f == full[0] for f in full) and full[0][1] == "accepted"
    from oar_lite.lab.scorers import LAB_METHODS

    assert full[0][0] == sorted([*LIBRARY_METHODS, *LAB_METHODS])


def test_importing_the_lab_refuses_to_replace_a_users_scorer_of_its_name():
    code = ("import torch, oar_lite\n"
            "oar_lite.register_scorer('entropy', lambda model, ids, r, a: torch.ones(r.stop - r.start))\n"
            "import oar_lite.lab.scorers\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode != 0 and "method 'entropy' is registered already" in out.stderr, out.stderr[-2000:]
