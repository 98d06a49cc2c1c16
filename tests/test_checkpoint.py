"""`oar_lite.checkpoint`: files a run leaves are whole or absent, and resume only what may change."""
import dataclasses
import json

import pytest
import torch
from conftest import load_script, old_flat_form

from oar_lite.course import toy
from oar_lite.attribution import CreditConfig
from oar_lite.checkpoint import (CHECKPOINT, METRICS, atomic_path, load_checkpoint, read_jsonl, resumable,
                                 save_checkpoint, write_json)
from oar_lite.train import TrainConfig


def test_a_truncated_metrics_line_names_the_file(tmp_path):
    path = tmp_path / METRICS
    path.write_text('{"type": "train", "step": 1}\n{"type": "tra')
    with pytest.raises(ValueError, match=rf"{METRICS} line 2"):
        read_jsonl(path)


def test_a_checkpoint_written_with_flat_settings_resumes_once_migrated(tmp_path):
    """The flat form of versions before `CreditConfig` is refused, naming scripts/migrate_logs.py,
    which rewrites the checkpoint (issue 47 item 6); then it resumes."""
    model, _ = toy.load_model()
    config = TrainConfig(credit=CreditConfig("oar-g", boost=9.0), steps=2)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.learning_rate)
    path = tmp_path / CHECKPOINT
    save_checkpoint(path, model, optimizer, config, 1, [])
    state = torch.load(path, weights_only=True)
    assert state["config"]["credit"]["boost"] == 9.0  # written nested
    old = old_flat_form(config)
    del old["attribution_token_budget"]  # the flat form older versions wrote, before this setting existed
    old["attribution_batch_size"] = 64  # which they gave every method: OAR-G never took it
    torch.save({**state, "config": old}, path)
    with pytest.raises(ValueError, match=r"flat form of versions before CreditConfig.*scripts/migrate_logs\.py"):
        load_checkpoint(path, model, optimizer, config)
    assert load_script("migrate_logs").migrate_file(path)  # the changes it made
    assert load_checkpoint(path, model, optimizer, config)[0] == 1
    with pytest.raises(ValueError, match=r"boost=9.0 \(now 1.0\)"):
        load_checkpoint(path, model, optimizer, dataclasses.replace(config, credit=dataclasses.replace(config.credit,
                                                                                                      boost=1.0)))


def test_what_may_change_on_resume_is_declared_on_the_fields():
    assert resumable(TrainConfig()) == {"steps": "more", "eval_every": "evaluation", "eval_size": "evaluation",
                                        "eval_batch_size": "bookkeeping", "checkpoint_every": "bookkeeping",
                                        "progress": "bookkeeping"}


def test_atomic_writes_leave_the_old_file_whole_on_error(tmp_path):
    path = tmp_path / "report.json"
    write_json(path, {"a": 1})
    with pytest.raises(RuntimeError):
        with atomic_path(path) as tmp:
            tmp.write_text("half")
            raise RuntimeError("killed")
    assert json.loads(path.read_text()) == {"a": 1} and [p.name for p in tmp_path.iterdir()] == ["report.json"]
