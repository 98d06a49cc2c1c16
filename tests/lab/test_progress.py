"""`oar_lite.lab.progress`: one bar per method over the steps its runs' metrics files record."""
import json

from oar_lite.checkpoint import METRICS
from oar_lite.lab.progress import MethodBars


def test_bars_follow_the_metrics_files_and_finish(tmp_path, capsys):
    runs = [("uniform", tmp_path / "a", 4), ("oar-g", tmp_path / "b", 4), ("uniform", tmp_path / "c", 4)]
    for _, folder, _ in runs:
        folder.mkdir()
    (tmp_path / "a" / METRICS).write_text("".join(json.dumps({"type": t, "step": s}) + "\n"
                                                  for t, s in (("eval", 0), ("train", 1), ("train", 2))) + '{"type": "tr')
    with MethodBars(runs, disable=True) as bars:
        assert bars.done == [2, 0, 0]  # a half-written line is skipped
        (tmp_path / "b" / METRICS).write_text(json.dumps({"type": "train", "step": 9}) + "\n")
        bars.poll()
        assert bars.done == [2, 4, 0]  # capped at the run's steps
        bars.finish(2, "done uniform seed 1")
        assert bars.done == [2, 4, 4]
    assert "done uniform seed 1" in capsys.readouterr().out
