"""oar_lite.findings: the series' conclusions are written from the shipped data, the README's
"What we measured" block is that text, and the prose follows the numbers when they change."""
import copy
from pathlib import Path

import pytest

from oar_lite import findings, lora_learning

ROOT = Path(__file__).resolve().parents[1]


def test_readme_block_is_what_the_shipped_data_says():
    assert findings.check_readme(ROOT / "README.md") is None, findings.check_readme(ROOT / "README.md")


def test_credit_conclusion_states_the_shipped_numbers():
    f = findings.credit_findings()
    text = findings.credit_conclusion(f)
    c = f["confirm"]
    assert f"{c['speedup']:.2f}x" in text and f"{c['accuracy_diff']:+.3f}" in text
    assert f"{f['auc']['entropy']['mean']:.2f}" in text and f"{f['auc']['oar-p:last']['mean']:.2f}" in text
    assert ("none met the project's bar" in text) == (not f["regimes_paid"])
    assert 0 <= f["noise_share_toy"][0] <= f["noise_share_toy"][1] <= 1


def test_credit_conclusion_follows_the_numbers():
    f = copy.deepcopy(findings.credit_findings())
    f["regimes_paid"] = ["a regime"]
    f["controls"]["inverted:oracle"]["diff_ci"] = [-0.05, 0.01]
    f["auc"]["oar-p:last"] = {"mean": 0.62, "ci95": 0.05, "n": 15}
    text = findings.credit_conclusion(f)
    assert "1 met the project's bar (a regime)" in text
    assert "an interval that includes 0" in text  # a control that did not hurt is not reported as hurting
    assert "ranks the pivotal tokens near chance (AUC 0.62" in text


def _run(method, seed, before, after, cpu):
    heldout = [{"step": s, "decoding": d, "correct": [[c] for c in cs]}
               for s, cs in ((0, before), (4, after)) for d in ("greedy", "t1")]
    log = [{"step": k, "reward": 0.1, "cpu_time": cpu * k, "oar/effective_share": 0.9, "oar/frac_at_floor": 0.02,
            "oar/tau_mean": 0.1} for k in range(1, 5)]
    return {"name": f"{method}-{seed}", "method": method, "seed": seed, "heldout": heldout, "log": log,
            "settings": {"steps": 4}}


def test_learning_conclusion_on_a_log_with_known_answers():
    base = [0] * 8
    log = {"name": "t", "screened_seeds": [0], "runs": [
        _run("none", 0, base, [1, 1, 1, 1, 0, 0, 0, 0], 100.0), _run("none", 1, base, [1, 1, 1, 0, 0, 0, 0, 0], 100.0),
        _run("none", 2, base, [1, 1, 1, 1, 0, 0, 0, 0], 100.0),
        _run("oar-g", 0, base, [1, 1, 1, 1, 0, 0, 0, 0], 120.0), _run("oar-g", 1, base, [1, 1, 1, 0, 0, 0, 0, 0], 120.0),
        _run("oar-g", 2, base, [1, 1, 1, 1, 0, 0, 0, 0], 120.0)]}
    f = findings.learning_findings(log)
    assert f["grpo"]["greedy"]["mean"] == pytest.approx(11 / 24) and f["grpo"]["greedy"]["low"] > 0
    assert f["grpo_unscreened"]["greedy"]["seeds"] == [1, 2] and f["grpo_unscreened"]["t1"]["seeds"] == [1, 2]
    assert f["methods"]["oar-g"]["paired"]["greedy"]["mean"] == pytest.approx(0.0)
    assert f["methods"]["oar-g"]["cost"] == pytest.approx(1.2)
    text = findings.learning_conclusion(f)
    assert "measurably learned" in text and "cannot be told apart" in text and "1.20x" in text


def test_the_shipped_learning_log_reads_through():
    f = findings.learning_findings(lora_learning.load_log())
    text = findings.learning_conclusion(f)
    assert f"{f['grpo']['greedy']['mean']:+.3f}" in text and f["methods"], text
