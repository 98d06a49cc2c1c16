"""Progress of runs trained in worker processes (`oar_lite.lab.compare`), whose own bars would
overwrite each other: `MethodBars` reads each run's ``metrics.jsonl`` and moves one tqdm
bar per method over the steps of all its runs.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

from tqdm.auto import tqdm

from ..checkpoint import METRICS


class MethodBars:
    """One bar per method over the steps of its ``runs``, each ``(method, run folder, steps)``;
    ``disable`` shows no bars (`finish` still prints its message)."""

    def __init__(self, runs: Sequence[tuple[str, str | Path, int]], *, disable: bool = False):
        self.runs = [(method, Path(folder) / METRICS, steps) for method, folder, steps in runs]
        self.done = [0] * len(self.runs)
        methods = list(dict.fromkeys(method for method, _, _ in self.runs))
        self.bars = {method: tqdm(total=sum(s for m, _, s in self.runs if m == method), desc=method, position=i,
                                  unit="step", dynamic_ncols=True, disable=disable, leave=True)
                     for i, method in enumerate(methods)}
        self.poll()

    def poll(self) -> None:
        """Move the bars to the steps the runs' metrics files record."""
        for i, (method, path, steps) in enumerate(self.runs):
            done = min(_trained_steps(path), steps)
            if done > self.done[i]:
                self.bars[method].update(done - self.done[i])
                self.done[i] = done

    def finish(self, index: int, message: str | None = None) -> None:
        """Run ``index`` is over: its bar gets all its steps, and ``message`` is printed above the bars."""
        method, _, steps = self.runs[index]
        self.bars[method].update(steps - self.done[index])
        self.done[index] = steps
        if message:
            tqdm.write(message)

    def close(self) -> None:
        for bar in self.bars.values():
            bar.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _trained_steps(path: Path) -> int:
    """The highest training step in a metrics file (0 if none yet)."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return 0
    steps = 0
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:  # a line being written
            continue
        if record.get("type") == "train":
            steps = max(steps, int(record.get("step", 0)))
    return steps
