"""`scripts/train_trl.py` under ``accelerate launch`` with two CPU processes (gloo): the
data-parallel path that multi-GPU runs take, on the shipped toy model, for 2 steps."""
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from oar_lite.course import toy

ROOT = Path(__file__).resolve().parent.parent
HELPER = ROOT / "tests" / "helpers" / "distributed_train.py"
# The launch command of docs/trl.md ("tested"), with the test's output folders and a small batch.
LAUNCH = ["-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
          "--mixed_precision", "no", "--dynamo_backend", "no"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_two_processes_train_the_same_weights_with_oar(tmp_path):
    assert (toy.MODEL_DIR / "config.json").exists()
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, *LAUNCH, "--main_process_port", str(_free_port()), str(HELPER), str(tmp_path),
           "--model", "toy", "--dataset", "toy", "--method", "oar-g", "--steps", "2", "--num-problems", "64",
           "--output-dir", str(tmp_path / "run"), "--per_device_train_batch_size", "8", "--num_generations", "4",
           "--save_strategy", "no",
           # one micro-batch per step, no recomputation: the sizes these checks count (the script's laptop recipe accumulates 4)
           "--gradient_accumulation_steps", "1", "--gradient_checkpointing", "false"]
    proc = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "processes=2" in proc.stdout, proc.stdout[-2000:]

    ranks = [json.loads((tmp_path / f"rank{i}.json").read_text()) for i in range(2)]
    for i, rank in enumerate(ranks):
        assert rank["rank"] == i and rank["world_size"] == 2
        assert rank["backend"] == "gloo" and rank["distributed_type"].endswith("MULTI_CPU")
        # each process scored its own 8 rows in each of the 2 steps
        assert rank["rows_scored"] == [8, 8]
        logged = [h for h in rank["log_history"] if "oar/weight_std" in h]
        assert [h["step"] for h in logged] == [1, 2]
        assert all(h["oar/weight_std"] > 0 and 0 <= h["oar/frac_suppressed"] <= 1 for h in logged)
        # the script's trainer is the lab's StudyTrainer: the uniformity of both processes' rows, on both
        assert all(0 <= h["oar/tau_mean"] <= 1 and 0 < h["oar/effective_share"] <= 1 for h in logged)
    taus = [[h["oar/tau_mean"] for h in r["log_history"] if "oar/tau_mean" in h] for r in ranks]
    assert len(taus[0]) == 2 and taus[0] == taus[1]  # gathered over both processes: the same on each
    # the step moved the weights, and moved them the same way on both processes
    assert ranks[0]["digest"] != ranks[0]["initial_digest"]
    assert ranks[0]["digest"] == ranks[1]["digest"]
    assert (tmp_path / "run" / "model.safetensors").exists()
