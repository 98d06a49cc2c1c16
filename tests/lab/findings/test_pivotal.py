"""oar_lite.lab.findings.pivotal: the ground truth's counts in words."""
from oar_lite.lab import ground_truth
from oar_lite.lab.findings import pivotal


def test_the_ground_truth_counts_are_worded():
    s = ground_truth.ground_truth_summary(ground_truth.load_ground_truth())
    text = pivotal.text("summary", s)
    assert text.startswith(f"{s['completions']} completions ({s['right']} right, {s['wrong']} wrong)")
    assert f"{s['pivotal_tokens']} pivotal tokens (|delta P| >= {s['threshold']})" in text
