"""`oar_lite.lab.provenance`: a path under ``$RUNS`` recorded as ``$RUNS/...``, a command as one
shell line with its paths so written."""
import shlex

from oar_lite.lab.provenance import command_line, portable


def test_a_path_under_runs_is_written_relative_to_it(monkeypatch, tmp_path):
    runs = tmp_path / "runs"
    monkeypatch.setenv("RUNS", str(runs) + "/")  # a trailing slash changes nothing
    assert portable(runs / "study" / "seed-1") == "$RUNS/study/seed-1"
    assert portable(runs) == "$RUNS"
    assert portable(str(runs) + "-other/x") == str(runs) + "-other/x"  # a sibling folder is not inside
    assert portable("results/compare") == "results/compare"
    monkeypatch.delenv("RUNS")
    assert portable(runs / "study") == str(runs / "study")  # no RUNS: as given


def test_a_command_line_quotes_its_words_and_leaves_runs_to_the_shell(monkeypatch, tmp_path):
    runs = tmp_path / "runs"
    monkeypatch.setenv("RUNS", str(runs))
    line = command_line(["--out", str(runs / "a b"), f"--json={runs}/x.json", "--name", "it's", str(runs)])
    assert line == "--out $RUNS'/a b' --json=$RUNS/x.json --name 'it'\"'\"'s' $RUNS"
    monkeypatch.setenv("RUNS", "/elsewhere")
    assert shlex.split(line.replace("$RUNS", "/elsewhere")) == ["--out", "/elsewhere/a b", "--json=/elsewhere/x.json",
                                                                 "--name", "it's", "/elsewhere"]
