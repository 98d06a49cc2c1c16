"""scripts/migrate_logs.py (issue 47 item 6): logs written before issue 47 rewritten once with
today's names; the shipped ones were, and need nothing more."""
import json

import pytest
from conftest import load_script, old_flat_form

from oar_lite.attribution import CREDIT_FIELDS, CreditConfig
from oar_lite.train import TrainConfig

migrate_logs = load_script("migrate_logs")


def test_the_shipped_logs_need_no_migration_and_name_no_old_method(capsys):
    assert migrate_logs.main(["--check"]) == 0 and "0 log(s) to migrate" in capsys.readouterr().out
    for path in migrate_logs.logs([migrate_logs.SHIPPED]):
        assert migrate_logs.migrate_file(path, check=True) == [], path
    assert len(migrate_logs.logs([migrate_logs.SHIPPED])) >= 10  # the files are read at all


def test_old_names_and_the_flat_form_are_rewritten_and_commands_kept(tmp_path, capsys):
    flat = old_flat_form(TrainConfig(credit=CreditConfig("oar-p", boost=9.0)))
    log = {"runs": [{"name": "none-seed0", "method": "none", "command": "run --method none", "argv": ["--method", "none"],
                     "settings": {"method": "uniform (GRPO)", "attribution_batch_size": 64}}],
           "config": flat, "table": {"rows": [["GRPO (uniform)", 1]]}}
    (tmp_path / "log.json").write_text(json.dumps(log, indent=1) + "\n")
    (tmp_path / "metrics.jsonl").write_text(json.dumps({"type": "eval", "method": "none", "step": 0}) + "\n")
    assert migrate_logs.main(["--check", str(tmp_path)]) == 1
    assert json.loads((tmp_path / "log.json").read_text()) == log  # --check changes nothing
    assert migrate_logs.main([str(tmp_path)]) == 0
    new = json.loads((tmp_path / "log.json").read_text())
    run = new["runs"][0]
    assert (run["name"], run["method"], run["settings"]) == ("uniform-seed0", "uniform", {"method": "uniform",
                                                                                          "batch_size": 64})
    assert run["command"] == "run --method none" and run["argv"] == ["--method", "none"]  # as typed
    assert TrainConfig(**new["config"]).credit == CreditConfig("oar-p", boost=9.0)  # the flat form, nested
    assert new["table"] == log["table"]  # text that is no method key is left alone
    assert json.loads((tmp_path / "metrics.jsonl").read_text())["method"] == "uniform"
    assert migrate_logs.main(["--check", str(tmp_path)]) == 0  # once is enough
    with pytest.raises(FileNotFoundError):
        migrate_logs.logs([tmp_path / "missing"])


def test_the_scripts_credit_fields_are_the_librarys():
    assert migrate_logs.CREDIT_FIELDS == CREDIT_FIELDS
