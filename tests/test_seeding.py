"""`oar_lite.seeding`: the seed and the problems of a step depend on (seed, step) only."""
import re
from pathlib import Path

import pytest

from oar_lite.seeding import derive_seed, pick_problems


def test_same_seed_same_prompts_for_every_method():
    pool = [{"prompt": f"{a}+{b}=", "answer": a + b} for a in range(7) for b in range(6)]
    assert pick_problems(pool, 4, seed=3, step=7) == pick_problems(pool, 4, seed=3, step=7)
    assert pick_problems(pool, 4, seed=3, step=7) != pick_problems(pool, 4, seed=3, step=8)


def test_derive_seed_keys_a_stream_by_numbers_only():
    assert derive_seed(3, 7) == 3 * 1_000_003 + 7  # a step of a run (both trainers)
    assert derive_seed(3, 7, 2) == derive_seed(3, 7) + 2 * 7_919  # and a process (TRL under accelerate)
    assert derive_seed(0, 5) == 5 and derive_seed(2**62, 1) < 2**63
    assert len({derive_seed(s, k) for s in range(4) for k in range(100)}) == 400
    with pytest.raises(ValueError, match="at most 3 keys"):
        derive_seed(0, 1, 2, 3, 4)


def test_one_seed_formula_in_the_package_and_the_benchmarks():
    root = Path(__file__).resolve().parents[1]
    files = [p for folder in ("oar_lite", "benchmarks", "scripts") for p in (root / folder).rglob("*.py")]
    holders = sorted({str(p.relative_to(root)) for p in files if re.search(r"1_?000_?003", p.read_text())})
    assert holders == ["oar_lite/seeding.py"]
    # No other mixing formula either (a seed times a constant plus a key): credit_weights' was one.
    mixing = re.compile(r"seed\s*\*\s*\d{3,}")
    assert [str(p.relative_to(root)) for p in files if p.name != "seeding.py" and mixing.search(p.read_text())] == []
    assert all(derive_seed(0, b, s) == s * 7919 + b for s in (0, 1000, 1005) for b in range(20))  # its draws, kept
