"""No option is dropped in silence (issue 29): each case that used to be accepted and ignored
is now an error that names what is valid, or does what it says."""
import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import PAD, VOCAB

import oar_lite as ol
from oar_lite.lab import compare
from oar_lite.__main__ import main
from oar_lite.train import TrainConfig

ROOT = Path(__file__).resolve().parents[1]


def batch():
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(3, VOCAB, (2, 20), generator=g)
    attn = torch.ones_like(ids)
    reasoning = torch.zeros_like(ids, dtype=torch.bool)
    answer = torch.zeros_like(ids, dtype=torch.bool)
    reasoning[:, 3:14], answer[:, 16:18] = True, True
    return ids, attn, reasoning, answer


@pytest.mark.parametrize("options, valid", [
    ({"method": "oar-p", "noise_std": 5.0}, r"\['noise_std'\].*'oar-p' does not take"),  # another method's setting
    ({"methd": "oar-p"}, r"\['methd'\]"),  # a typo: it used to run OAR-G
    ({"quantil": 0.5}, r"\['quantil'\]"),
    ({"method": "entropy", "batch_size": 4}, r"\['batch_size'\].*'entropy' does not take"),
])
def test_token_weights_refuses_what_it_would_ignore(llama, options, valid):
    with pytest.raises(TypeError, match=valid) as err:
        ol.token_weights(llama, *batch(), pad_token_id=PAD, **options)
    assert "the context ['pad_token_id', 'generator', 'tokenizer', 'sampled_cache', 'stats']" in str(err.value)


def test_token_scores_refuses_a_misspelled_option(llama, sequence):
    ids, reasoning, answer = sequence
    with pytest.raises(TypeError, match=r"\['batch_sise'\].*valid: \['batch_size', 'max_waste', 'reuse_prefix', "
                                        r"'token_budget'\]"):
        ol.token_scores("oar-p", llama, ids, reasoning, answer, pad_token_id=PAD, batch_sise=1)


def test_compare_refuses_overrides_of_what_runs_set_themselves(tmp_path):
    for overrides in ({"method": "oar-p"}, {"seed": 7}, {"method": "oar-p", "seed": 7}, {"credit": {"method": "oar-p"}},
                      {"progress": False}):
        with pytest.raises(ValueError, match="set by compare's own arguments"):
            compare.compare(["uniform"], out=tmp_path, profile="tiny", overrides=overrides, progress=False)
    with pytest.raises(ValueError, match=r"\['steps'\]"):
        compare.compare(["uniform"], out=tmp_path, profile="tiny", steps=3, overrides={"steps": 4}, progress=False)
    assert not any(tmp_path.iterdir())  # refused before anything is written


def test_a_partial_credit_dict_updates_fields():
    config = compare.PROFILES["default"].config
    changed = compare.with_overrides(config, {"credit": {"boost": 2.0}})
    assert changed.credit == dataclasses.replace(config.credit, boost=2.0)
    assert changed.credit.batch_size == 64 and changed.credit.method == "uniform"  # kept, not reset to defaults
    assert TrainConfig(credit={"boost": 2.0}).credit == dataclasses.replace(TrainConfig().credit, boost=2.0)


@pytest.mark.parametrize("argv, says", [
    (["--boo", "9"], "unrecognized arguments: --boo 9"),  # no prefix matching
    (["--noise", "5"], "unrecognized arguments: --noise 5"),
    (["--quick", "--profile", "credit"], "--profile and --quick ask for different profiles"),
    (["--methods", "oar-q"], "unknown method 'oar-q'; expected one of ['adapter-residual', 'captum-ig', 'entropy', 'entropy-top', 'oar-g', 'oar-p'"),
    (["--digits", "1", "2", "3"], "--digits 1 2 3: expected one number or a low high pair"),
    (["--boost", "-1"], "--boost=-1.0 is out of range: expected a finite number >= 0"),
])
def test_the_command_line_refuses_with_a_usage_error(argv, says, capsys, tmp_path):
    with pytest.raises(SystemExit) as exit_info:
        main(["compare", *argv, "--out", str(tmp_path / "never")])
    assert exit_info.value.code == 2
    assert says in capsys.readouterr().err
    assert not (tmp_path / "never").exists()


def test_demo_refuses_another_profile(capsys, tmp_path):
    with pytest.raises(SystemExit) as exit_info:
        main(["demo", "--profile", "credit", "--out", str(tmp_path)])
    assert exit_info.value.code == 2 and "--profile and demo ask for different profiles" in capsys.readouterr().err


@pytest.mark.slow
def test_trl_script_refuses_an_abbreviated_field():
    """``--oar_boo 2`` was read as ``--oar_boost 2`` by HfArgumentParser's prefix matching."""
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "train_trl.py"), "--oar_boo", "2", "--steps", "1"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 2 and "--oar_boo" in out.stderr and "Traceback" not in out.stderr


def test_every_credit_setting_reaches_trl():
    """`OARConfig.oar_credit` reads every `CreditConfig` field from its ``oar_`` twin (no
    ``hasattr``: a field without a twin would silently keep its default under TRL)."""
    from oar_lite.trl import OARConfig

    config = OARConfig(output_dir="/tmp/unused", report_to="none", bf16=False, use_cpu=True, oar_method="oar-p",
                       oar_quantile=0.4, oar_boost=2.0, oar_floor=0.2, oar_preserve_mass=False, oar_noise_std=0.01,
                       oar_batch_size=3, oar_token_budget=99)
    assert dataclasses.asdict(config.oar_credit) == {"method": "oar-p:last", "quantile": 0.4, "boost": 2.0, "floor": 0.2,
                                                      "preserve_mass": False, "noise_std": 0.01, "batch_size": 3,
                                                      "token_budget": 99}
