"""Fault injection (issue 15): a `compare` run killed with SIGKILL in the middle of training,
then started again with the same command, ends with the results of a run never stopped."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from oar_lite.checkpoint import CHECKPOINT, METRICS, read_jsonl

ROOT = Path(__file__).resolve().parents[1]


METHODS = ("uniform", "oar-g")
STEPS = 2


def arguments(out: Path) -> list[str]:
    return ["compare", "--tiny", "--jobs", "1", "--quiet", "--methods", *METHODS, "--steps", str(STEPS),
            "--out", str(out)]


def command(out: Path) -> list[str]:
    return [sys.executable, "-m", "oar_lite.lab", *arguments(out)]


def environment() -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONHASHSEED="0", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               TOKENIZERS_PARALLELISM="false", MPLBACKEND="Agg")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    return env


def results(out: Path) -> list[dict]:
    """Every record of the comparison, without wall and CPU times (they differ run to run)."""
    return [{k: v for k, v in r.items() if not k.startswith(("time_", "cpu_")) and k not in ("wall_time", "cpu_time")}
            for r in read_jsonl(out / "compare.jsonl")]


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL (POSIX)")
def test_sigkill_mid_run_then_the_same_command_finishes_with_the_same_results(tmp_path):
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    from oar_lite.lab.__main__ import main

    assert main(arguments(straight)) == 0  # the run never stopped (in this process: the same code)

    # Kill the second run (OAR-G) once it has checkpointed its first step and is still training.
    run = killed / "runs" / "oar-g-seed0"
    proc = subprocess.Popen(command(killed), env=environment(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 600
        while not (run / CHECKPOINT).exists():
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
            assert time.monotonic() < deadline
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    assert not (killed / "compare.jsonl").exists()  # it died before the end
    done = [r["step"] for r in read_jsonl(run / METRICS) if r["type"] == "train"] if (run / METRICS).exists() else []
    assert max(done, default=0) < STEPS  # mid-run

    again = subprocess.run(command(killed), env=environment(), capture_output=True, timeout=600)
    assert again.returncode == 0, again.stderr.decode()[-2000:]
    assert results(killed) == results(straight)
    for method in METHODS:
        steps = [r["step"] for r in read_jsonl(killed / "runs" / f"{method}-seed0" / METRICS) if r["type"] == "train"]
        assert steps == list(range(1, STEPS + 1))
