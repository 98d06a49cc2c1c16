"""Reproducible randomness: the seed of each step (`derive_seed`), the problems of each step
(`pick_problems`), and the random generators' states, which checkpoints save and restore.
"""
from __future__ import annotations

import random
from typing import Sequence

import numpy as np
import torch

KEY_MULTIPLIERS = (1, 7_919, 104_729)
"""What each key of `derive_seed` is multiplied by (1 and the 1,000th and 10,000th primes)."""


def derive_seed(seed: int, *keys: int) -> int:
    """The seed of the stream keyed by ``keys`` (a step, a batch, a process) in a run seeded
    ``seed``: ``seed * 1,000,003 + key_1 + 7,919 key_2 + 104,729 key_3``, modulo 2^63. It
    depends on those numbers only, not on what ran before, so a resumed run, another method
    or another process draws what an uninterrupted run would. Both trainers, gradient
    quality and the Monte-Carlo ground truth use it."""
    if len(keys) > len(KEY_MULTIPLIERS):
        raise ValueError(f"derive_seed takes at most {len(KEY_MULTIPLIERS)} keys, got {len(keys)}")
    return (seed * 1_000_003 + sum(int(k) * m for k, m in zip(keys, KEY_MULTIPLIERS))) % 2**63


def pick_problems(problems: Sequence[dict], n: int, *, seed: int, step: int) -> list[dict]:
    """The ``n`` problems of one step (or batch): a function of (seed, step) only, so every
    method and a resumed run see the same prompts. Without replacement when the pool is big enough."""
    if n < 1 or len(problems) == 0:
        raise ValueError(f"need n >= 1 problems from a non-empty pool, got n={n} from {len(problems)}")
    rng = np.random.default_rng([seed, step])
    idx = rng.choice(len(problems), size=n, replace=len(problems) < n)
    return [problems[int(i)] for i in idx]


def seed_everything(seed: int) -> None:
    """Seed python, numpy and torch (CPU and CUDA)."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def rng_state() -> dict:
    """The states of python's, numpy's and torch's generators (CUDA's too, if any), as
    `torch.save` with ``weights_only`` can store them."""
    name, keys, pos, has_gauss, gauss = np.random.get_state()
    state = {"python": random.getstate(), "numpy": [name, torch.from_numpy(keys.astype(np.int64)), pos, has_gauss, gauss],
             "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    """Restore the generators from `rng_state`'s dict."""
    random.setstate(_as_tuples(state["python"]))
    name, keys, pos, has_gauss, gauss = state["numpy"]
    np.random.set_state((name, keys.numpy().astype(np.uint32), pos, has_gauss, gauss))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _as_tuples(x):
    return tuple(_as_tuples(v) for v in x) if isinstance(x, (list, tuple)) else x
