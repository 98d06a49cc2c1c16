"""`oar_lite.seeding`: the seed and the problems of a step depend on (seed, step) only: the
same for every method and every process, different for every other key."""
import json
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from oar_lite.seeding import derive_seed, pick_problems

ROOT = Path(__file__).resolve().parents[1]
POOL = [{"prompt": f"{a}+{b}=", "answer": a + b} for a in range(7) for b in range(6)]


def test_same_seed_same_prompts_for_every_method():
    """What ran before (another method's sampling, its scorer's noise) does not move the prompts."""
    first = pick_problems(POOL, 4, seed=3, step=7)
    random.seed(1), np.random.seed(2), torch.manual_seed(3)
    torch.rand(5), np.random.rand(5), random.random()  # another method drew from every global generator
    assert pick_problems(POOL, 4, seed=3, step=7) == first
    assert len({p["prompt"] for p in first}) == 4  # without replacement from a big enough pool
    assert pick_problems(POOL, 4, seed=3, step=8) != first and pick_problems(POOL, 4, seed=4, step=7) != first


def test_different_keys_draw_different_streams():
    seeds = [derive_seed(s, step, batch, process) for s in range(3) for step in range(50) for batch in range(4)
             for process in range(3)]
    assert len(set(seeds)) == len(seeds)  # no two (seed, step, batch, process) share a stream
    assert derive_seed(1, 2) != derive_seed(2, 1) and derive_seed(0, 1, 2) != derive_seed(0, 2, 1)  # order matters
    assert derive_seed(5) != derive_seed(5, 1) and derive_seed(5, 1) != derive_seed(5, 1, 1)
    assert all(0 <= derive_seed(s, 1, 2, 3) < 2**63 for s in (0, 2**62, 2**70))  # a valid torch/numpy seed
    torch.manual_seed(derive_seed(2**70, 1, 2, 3))
    with pytest.raises(ValueError, match="at most 3 keys"):
        derive_seed(0, 1, 2, 3, 4)


def test_seeds_and_prompts_are_the_same_in_another_process():
    """A resumed run, TRL's other processes and a rerun next week draw what this process draws:
    nothing depends on the interpreter's state (hash randomisation included)."""
    code = ("import json; from oar_lite.seeding import derive_seed, pick_problems; "
            f"pool = {POOL!r}; "
            "print(json.dumps([[derive_seed(s, k, b) for s in range(3) for k in range(5) for b in range(2)], "
            "pick_problems(pool, 5, seed=11, step=4)]))")
    here = [[derive_seed(s, k, b) for s in range(3) for k in range(5) for b in range(2)],
            pick_problems(POOL, 5, seed=11, step=4)]
    for hash_seed in ("1",):  # this process runs with another (random or set) hash seed
        env = {**os.environ, "PYTHONHASHSEED": hash_seed, "PYTHONPATH": str(ROOT)}
        out = subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True, text=True)
        assert json.loads(out.stdout) == here


def test_one_seed_formula_in_the_package_and_the_benchmarks():
    files = [p for folder in ("oar_lite", "benchmarks", "scripts") for p in (ROOT / folder).rglob("*.py")]
    holders = sorted({str(p.relative_to(ROOT)) for p in files if re.search(r"1_?000_?003", p.read_text())})
    assert holders == ["oar_lite/seeding.py"]
    # No other mixing formula either (a seed times a constant plus a key): credit_weights' was one.
    mixing = re.compile(r"seed\s*\*\s*\d{3,}")
    assert [str(p.relative_to(ROOT)) for p in files if p.name != "seeding.py" and mixing.search(p.read_text())] == []
