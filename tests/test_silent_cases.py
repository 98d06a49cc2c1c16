"""No option is dropped in silence (issue 29): each case that used to be accepted and ignored
is now an error that names what is valid, or does what it says."""
import ast
import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import PAD, VOCAB

import oar_lite as ol
from oar_lite.lab import compare
from oar_lite.lab.__main__ import main
from oar_lite.attribution import CreditConfig
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


def test_a_partial_credit_dict_updates_fields_the_method_takes():
    config = compare.run_config("oar-p", 0, compare.PROFILES["default"].config)
    changed = compare.with_overrides(config, {"credit": {"boost": 2.0}})
    assert changed.credit == dataclasses.replace(config.credit, boost=2.0)
    assert changed.credit.batch_size == 64 and changed.credit.method == "oar-p"  # kept, not reset to defaults
    assert TrainConfig(credit={"method": "oar-p", "boost": 2.0}).credit == CreditConfig("oar-p", boost=2.0, batch_size=64)
    with pytest.raises(ValueError, match=r"boost=2\.0, which 'uniform' does not take"):  # plain GRPO: no reshaping
        compare.with_overrides(compare.PROFILES["default"].config, {"credit": {"boost": 2.0}})
    with pytest.raises(ValueError, match=r"noise_std=0\.5, which 'oar-p' does not take"):
        TrainConfig(credit={"method": "oar-p", "noise_std": 0.5})
    with pytest.raises(ValueError, match=r"unknown method 'none' \(plain GRPO is spelled 'uniform'\)"):
        TrainConfig(credit={"method": "none"})


def test_a_stored_credit_is_read_whole_and_a_setting_its_method_ignores_refused():
    """Issue 47 item 4: the stored form (every field, as `dataclasses.asdict` writes it) of
    plain GRPO with boost 9 used to drop the boost in silence."""
    stored = dataclasses.asdict(CreditConfig("uniform"))
    assert set(stored) == set(ol.attribution.CREDIT_FIELDS) and TrainConfig(credit=stored).credit == CreditConfig("uniform")
    stored_oar = dataclasses.asdict(CreditConfig("oar-p", boost=9.0))
    assert TrainConfig(credit=stored_oar).credit == CreditConfig("oar-p", boost=9.0)
    with pytest.raises(ValueError, match=r"CreditConfig\(method='uniform'\) got boost=9\.0, which 'uniform' does not "
                                         r"take; it takes no settings: drop boost \(it would have no effect\)"):
        TrainConfig(credit={**stored, "boost": 9.0})


def test_lora_settings_without_lora_are_refused():
    with pytest.raises(ValueError, match=r"TrainConfig\(lora=False\) got lora_rank=64, which only a LoRA run uses .*"
                                         r"pass lora=True, or drop lora_rank"):
        TrainConfig(lora_rank=64)
    with pytest.raises(ValueError, match=r"lora_rank=64, lora_alpha=8"):
        TrainConfig(lora=False, lora_rank=64, lora_alpha=8)
    assert TrainConfig(lora=True, lora_rank=64).lora_rank == 64
    with pytest.raises(TypeError, match="lora_dropout"):  # the update runs with dropout off: no such setting
        TrainConfig(lora=True, lora_dropout=0.1)


def test_token_weights_refuses_none_and_settings_the_new_method_does_not_take(llama):
    with pytest.raises(ValueError, match=r"CreditConfig\.boost=None is out of range: expected a finite number >= 0"):
        ol.token_weights(llama, *batch(), pad_token_id=PAD, boost=None)  # used to mean the default
    with pytest.raises(ValueError, match=r"method must be a str such as 'oar-g' or 'oar-p:last', got None"):
        ol.token_weights(llama, *batch(), pad_token_id=PAD, method=None)
    with pytest.raises(ValueError, match=r"batch_size=4, which 'oar-g' does not take"):
        ol.token_weights(llama, *batch(), pad_token_id=PAD, credit=CreditConfig("oar-p", batch_size=4), method="oar-g")
    with pytest.raises(ValueError, match=r"boost=9\.0, which 'uniform' does not take"):
        ol.token_weights(llama, *batch(), pad_token_id=PAD, method="uniform", boost=9.0)


def test_compare_passes_a_credit_setting_to_the_methods_that_take_it(tmp_path):
    runs = {m: compare.run_config(m, 0, compare.TRAINING, {"boost": 2.0, "batch_size": 8}) for m in ("uniform", "oar-g",
                                                                                                      "oar-p")}
    assert runs["uniform"].credit == CreditConfig("uniform")
    assert runs["oar-g"].credit == CreditConfig("oar-g", boost=2.0)
    assert runs["oar-p"].credit == CreditConfig("oar-p", boost=2.0, batch_size=8)
    for methods, overrides in ((["uniform"], {"boost": 2.0}), (["oar-p"], {"noise_std": 0.5}),
                               (["oar-g", "entropy"], {"batch_size": 4})):
        with pytest.raises(ValueError, match=r"taken by none of the methods"):
            compare.compare(methods, out=tmp_path, profile="tiny", overrides=overrides, progress=False)
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("argv, says", [
    (["--boo", "9"], "unrecognized arguments: --boo 9"),  # no prefix matching
    (["--noise", "5"], "unrecognized arguments: --noise 5"),
    (["--quick", "--profile", "credit"], "--profile and --quick ask for different profiles"),
    (["--methods", "oar-q"], "unknown method 'oar-q'; registered: ['adapter-residual', 'captum-ig', 'entropy', 'entropy-top', "),
    (["--digits", "1", "2", "3"], "--digits 1 2 3: expected one number or a low high pair"),
    (["--boost", "-1"], "--boost=-1.0 is out of range: expected a finite number >= 0"),
    (["--methods", "oar-p", "--noise-std", "0.5"], "['noise_std'] are taken by none of the methods ['oar-p']; they "
                                                   "take oar-p: ['batch_size', 'boost'"),
    (["--methods", "oar-g", "--batch-size", "4"], "['batch_size'] are taken by none of the methods ['oar-g']"),
    (["--methods", "uniform", "--boost", "9"], "['boost'] are taken by none of the methods ['uniform']; they take "
                                               "uniform: no settings (plain GRPO)"),
    (["--methods", "none", "oar-g"], "unknown method 'none' (plain GRPO is spelled 'uniform')"),
    (["--lora-rank", "64"], "--lora-rank 64: no effect without --lora (every weight trains): pass --lora, or drop it"),
    (["--lora-rank", "64", "--lora-alpha", "8"], "--lora-rank 64, --lora-alpha 8.0: no effect without --lora"),
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


def test_every_credit_setting_reaches_trl(scorer_registry):
    """`OARConfig.oar_credit` reads every `CreditConfig` field from its ``oar_`` twin (no
    ``hasattr``: a field without a twin would silently keep its default under TRL)."""
    from oar_lite.trl import OARConfig

    def takes_every_setting(model, input_ids, reasoning, answer, *, noise_std=1e-3, batch_size=None, token_budget=None):
        return torch.ones(reasoning.stop - reasoning.start)

    ol.register_scorer("z-every-setting", takes_every_setting)
    config = OARConfig(output_dir="/tmp/unused", report_to="none", bf16=False, use_cpu=True,
                       oar_method="z-every-setting", oar_quantile=0.4, oar_boost=2.0, oar_floor=0.2,
                       oar_preserve_mass=False, oar_noise_std=0.01, oar_batch_size=3, oar_token_budget=99)
    assert dataclasses.asdict(config.oar_credit) == {
        "method": "z-every-setting", "quantile": 0.4, "boost": 2.0, "floor": 0.2, "preserve_mass": False,
        "noise_std": 0.01, "batch_size": 3, "token_budget": 99}


def _script(name):
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"_script_{name}", ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SKIPPED = {".git", ".venv", "build", "node_modules", "student", "__pycache__", ".hypothesis", "results"}
PARSER_CLASSES = {"ArgumentParser", "HfArgumentParser"}


def python_files(root: Path) -> list[Path]:
    """Every ``.py`` file of the repository at ``root`` (what git tracks: no virtual environment,
    build output or generated student folder)."""
    return sorted(p for p in root.rglob("*.py") if not SKIPPED & set(p.relative_to(root).parts))


def parser_sites(root: Path) -> tuple[list[str], list[str]]:
    """``(built elsewhere, command lines)``, read from the source (AST), not run: where a parser
    class (`PARSER_CLASSES`, however imported) is called outside the builder
    (`oar_lite.settings.parser`), and the files that parse a command line at all."""
    elsewhere, command_lines = [], []
    for path in python_files(root):
        where = str(path.relative_to(root))
        tree = ast.parse(path.read_text(), where)
        classes = PARSER_CLASSES | {a.asname for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                                    for a in node.names if a.name in PARSER_CLASSES and a.asname}
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
            if name in classes and where != "oar_lite/settings.py":
                elsewhere.append(f"{where}:{node.lineno}")
            if name in ("parse_args", "parse_known_args", "parse_args_into_dataclasses"):
                command_lines.append(where)
    return elsewhere, sorted(set(command_lines))


def test_every_parser_in_the_repository_is_built_by_the_one_builder():
    """Issue 47 item 4: a parser made any other way could take abbreviations again (``--ste``
    read as ``--steps``). Found by reading every Python file of the tree, not from a list."""
    elsewhere, command_lines = parser_sites(ROOT)
    assert not elsewhere, f"parsers built outside oar_lite.settings.parser: {elsewhere}"
    for known in ("oar_lite/lab/__main__.py", "scripts/train_trl.py", "scripts/pacing.py", "scripts/ci_durations.py",
                  "benchmarks/gpu_memory.py", "oar_lite/lab/concentration.py", "benchmarks/credit_regime.py"):
        assert known in command_lines, (known, command_lines)  # the scan reads the files at all


def test_the_parser_scan_sees_a_parser_built_by_hand(tmp_path):
    (tmp_path / "tool.py").write_text("import argparse as a\nfrom transformers import HfArgumentParser as H\n"
                                      "p = a.ArgumentParser()\nq = H(dict)\np.parse_args()\n")
    (tmp_path / ".venv").mkdir()
    (tmp_path / ".venv" / "ignored.py").write_text("import argparse\nargparse.ArgumentParser()\n")
    assert parser_sites(tmp_path) == (["tool.py:3", "tool.py:4"], ["tool.py"])


def test_the_builder_refuses_abbreviations_in_subcommands_too(capsys):
    from oar_lite.settings import Parser, parser

    top = parser("test")
    top.add_argument("--steps", type=int)
    sub = top.add_subparsers(dest="command")
    run = sub.add_parser("run")
    run.add_argument("--method")
    assert type(run) is Parser
    for argv, abbreviated in ((["--ste=3", "run"], "--ste=3"), (["run", "--meth", "x"], "--meth")):
        with pytest.raises(SystemExit) as exit_info:
            top.parse_args(argv)
        assert exit_info.value.code == 2 and f"unrecognized arguments: {abbreviated}" in capsys.readouterr().err
    assert top.parse_args(["--steps", "3", "run", "--method", "x"]).method == "x"
    for build in (lambda: parser("test", allow_abbrev=True), lambda: sub.add_parser("other", allow_abbrev=True)):
        with pytest.raises(ValueError, match="no abbreviated flags"):
            build()


def test_the_builder_refuses_abbreviations_of_dataclass_fields():
    from oar_lite.settings import parser

    @dataclasses.dataclass
    class Fields:
        oar_boost: float = 1.0

    fields = parser(dataclass_types=Fields)
    assert fields.parse_args_into_dataclasses(["--oar_boost", "2"])[0].oar_boost == 2.0
    with pytest.raises(ValueError, match="--oar_boo"):  # scripts/train_trl.py turns it into a usage error
        fields.parse_args_into_dataclasses(["--oar_boo", "2"])


def test_train_trl_refuses_abbreviated_flags():
    known, rest = _script("train_trl").parse_args(["--mod", "smollm2"])  # --model, else an OARConfig field
    assert known.model == "toy" and rest == ["--mod", "smollm2"]  # rest goes to OARConfig's parser, which refuses it


@pytest.mark.parametrize("argv, says", [
    (["--no-lora", "--lora-rank", "64"], "--lora-rank 64 has no effect without LoRA"),
    (["--model", "toy", "--lora-rank", "8"], "--lora-rank 8 has no effect without LoRA (off with --no-lora, and for "
                                             "the toy model unless --lora): drop --lora-rank, or pass --lora"),
])
def test_train_trl_refuses_a_lora_rank_without_lora(argv, says, capsys):
    with pytest.raises(SystemExit) as exit_info:
        _script("train_trl").parse_args(argv)
    assert exit_info.value.code == 2 and says in capsys.readouterr().err
    known, _ = _script("train_trl").parse_args(["--model", "toy", "--lora", "--lora-rank", "8"])
    assert known.lora and known.lora_rank == 8


def test_credit_regime_refuses_a_flag_no_method_takes_as_a_usage_error(capsys, tmp_path):
    from benchmarks import credit_regime

    with pytest.raises(SystemExit) as exit_info:
        credit_regime.main(["--name", "x", "--methods", "oar-g", "--batch-size", "4", "--out", str(tmp_path / "never"),
                            "--json", str(tmp_path / "never.json")])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "['batch_size'] are taken by none of the methods ['oar-g']" in err
    assert "Traceback" not in err and not (tmp_path / "never").exists()


@pytest.mark.parametrize("where, argv, abbreviated", [
    ("scripts/pacing", ["--che"], "--che"),  # --check
    ("scripts/ci_durations", [".", "--to", "3"], "--to"),  # --top
    ("benchmarks/gpu_memory", ["measure", "--ste", "2", "--out", "x"], "--ste"),  # --steps
    ("oar_lite.lab.concentration", ["--rh", "0.5"], "--rh"),  # --rho
])
def test_the_scripts_that_took_abbreviations_refuse_them(where, argv, abbreviated, capsys):
    """Issue 47 item 4: these four parsers were built without ``allow_abbrev=False``."""
    import importlib

    if where.startswith("scripts/"):
        main = _script(where.split("/")[1]).main
    else:
        main = importlib.import_module(where.replace("/", ".")).main
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2 and f"unrecognized arguments: {abbreviated}" in capsys.readouterr().err
