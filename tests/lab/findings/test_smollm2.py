"""oar_lite.lab.findings.smollm2: notebook 07's results lead with the pre-registered primary outcome
of the study on the clean split once its log is shipped (a synthetic one here), else with the
old-split study, labelled; the prose follows the numbers."""
import copy
import json
from pathlib import Path

import pytest

from oar_lite.lab import lora_learning
from oar_lite.lab.findings import positive, smollm2

ROOT = Path(__file__).resolve().parents[3]


def _run(method, seed, before, after, cpu):
    heldout = [{"step": s, "decoding": d, "correct": [[c] for c in cs]}
               for s, cs in ((0, before), (4, after)) for d in ("greedy", "t1")]
    log = [{"step": k, "reward": 0.1, "cpu_time": cpu * k, "oar/effective_share": 0.9, "oar/frac_at_floor": 0.02,
            "oar/tau_mean": 0.1} for k in range(1, 5)]
    return {"name": f"{method}-{seed}", "method": method, "seed": seed, "heldout": heldout, "log": log,
            "settings": {"steps": 4}}


def test_a_study_with_known_answers():
    base = [0] * 8
    log = {"name": "t", "screened_seeds": [0], "runs": [
        _run("uniform", 0, base, [1, 1, 1, 1, 0, 0, 0, 0], 100.0), _run("uniform", 1, base, [1, 1, 1, 0, 0, 0, 0, 0], 100.0),
        _run("uniform", 2, base, [1, 1, 1, 1, 0, 0, 0, 0], 100.0),
        _run("oar-g", 0, base, [1, 1, 1, 1, 0, 0, 0, 0], 120.0), _run("oar-g", 1, base, [1, 1, 1, 0, 0, 0, 0, 0], 120.0),
        _run("oar-g", 2, base, [1, 1, 1, 1, 0, 0, 0, 0], 120.0)]}
    s = smollm2.study(log)
    assert s["split"] == "question" and s["twins"] is None and s["decomposition"] is None
    assert s["grpo"]["greedy"]["mean"] == pytest.approx(11 / 24) and s["grpo"]["greedy"]["low"] > 0
    assert s["grpo_unscreened"]["greedy"]["seeds"] == [1, 2]
    assert s["methods"]["oar-g"]["paired"]["greedy"]["mean"] == pytest.approx(0.0)
    assert s["methods"]["oar-g"]["cost"] == pytest.approx(1.2)
    text = smollm2.text("results", smollm2.combine(s))
    assert text.startswith("**The pre-registered primary outcome, held-out greedy accuracy, rose on the old split.**")
    assert "measurably learned" in text and "cannot be told apart" in text and "1.20x GRPO's CPU seconds" in text
    assert "pooled over all" not in text  # no positive control to recall
    # A method whose runs never ran beside GRPO's: no ratio is read from their step times, and the text says so.
    untimed = {**log, "untimed": ["oar-p"], "runs": log["runs"] + [_run("oar-p", k, base, [1, 1, 0, 0, 0, 0, 0, 0], 500.0)
                                                                     for k in (1, 2)]}
    s = smollm2.study(untimed)
    assert s["methods"]["oar-p"]["cost"] is None and s["methods"]["oar-g"]["cost"] == pytest.approx(1.2)
    text = smollm2.text("results", smollm2.combine(s))
    assert "5.00x" not in text and "not read from these runs" in text and "1.20x" in text
    assert "its step cost: benchmarks/RESULTS.md" in smollm2.text("readme", smollm2.combine(s))


@pytest.fixture(scope="module")
def shipped():
    return smollm2.finale(clean=None) if lora_learning.LOG_DIR.joinpath("clean.json").is_file() else smollm2.combine(
        smollm2.study(lora_learning.load_log()), None, positive.pooled())


def _clean_log(seeds=range(10, 16)) -> dict:
    """A synthetic clean study: the shipped old-split runs of GRPO and OAR-G, renamed to new seeds
    and recorded as split by numbers (their answers are the old ones: only the form matters here)."""
    old = lora_learning.load_log()
    runs = []
    for k, seed in enumerate(seeds):
        for method in ("uniform", "oar-g"):
            src = copy.deepcopy(lora_learning.runs_of(old, method)[k % 3])
            src["seed"], src["name"] = seed, f"{method}-seed{seed}"
            src["settings"]["split"] = {**src["settings"]["split"], "by": "numbers"}
            runs.append(src)
    return {"name": "clean", "note": "synthetic", "runs": runs, "machine": old["machine"]}


def test_the_results_lead_with_the_clean_study_when_its_log_exists_and_label_the_old_split(shipped):
    clean = smollm2.study(_clean_log())
    assert clean["split"] == "numbers" and clean["twins"] is None and len(clean["grpo"]["greedy"]["seeds"]) == 6
    f = smollm2.combine(shipped["old"], clean, shipped["positive"])
    text = smollm2.text("results", f)
    g = clean["grpo"]["greedy"]
    first = text.split("\n\n")[0]
    assert first.startswith("**The pre-registered primary outcome, held-out greedy accuracy, ")
    assert "on problems held out by their numbers.** Over 12 GRPO steps and 6 seeds (short of the 8 planned)" in first
    assert f"{g['mean']:+.3f} (95% interval {g['low']:+.3f} to {g['high']:+.3f}; 6 seeds x 96 problems)" in first
    # The plan's aim for the interval is checked against the interval got, either way.
    half = (g["high"] - g["low"]) / 2
    assert f"The interval's half-width is {half:.3f}, {'within' if half <= 0.10 else 'wider than'} the 0.10 the plan " \
           "chose its 8 seeds for." in " ".join(first.split())
    narrow = copy.deepcopy(clean)
    narrow["grpo"]["greedy"].update(low=g["mean"] - 0.05, high=g["mean"] + 0.05)
    assert "half-width is 0.050, within the 0.10" in " ".join(smollm2.text("results", smollm2.combine(shipped["old"], narrow)).split())
    narrow["aimed_half_width"] = 0.04
    assert "half-width is 0.050, wider than the 0.04" in " ".join(smollm2.text("results", smollm2.combine(shipped["old"], narrow)).split())
    assert "**The old split, for comparison.**" in text and "Held out by its numbers too" in text
    assert text.index("**The old split, for comparison.**") > text.index("**OAR-G against GRPO")
    readme = smollm2.text("readme", f)
    assert "on problems held out by their numbers (pre-registered, 6 seeds)" in readme
    assert readme.index("held out by their numbers") < readme.index("On the old split")
    takeaways = smollm2.text("takeaways", f)
    assert "(pre-registered, problems held out by their numbers, 6 seeds)" in takeaways
    tables = smollm2.text("tables", f)
    assert tables.startswith("**The pre-registered study on problems held out by their numbers** (6 seeds).")
    assert "**The study on the old split (problems held out by their wording only)** (3 seeds)." in tables
    # Fewer seeds than the plan reads: the primary outcome is not read.
    few = smollm2.combine(shipped["old"], smollm2.study(_clean_log(range(10, 14))))
    assert smollm2.text("results", few).startswith("**The pre-registered primary outcome is not read yet.** The study "
                                                   "on problems held out by their numbers has finished 4 of its 8")
    with pytest.raises(ValueError, match="not split by numbers"):
        smollm2.combine(shipped["old"], shipped["old"])


def test_the_old_split_alone_is_labelled_and_a_sign_change_is_said(shipped):
    f = smollm2.combine(shipped["old"], None, shipped["positive"])
    text = smollm2.text("results", f)
    s = f["old"]
    assert text.startswith("**The pre-registered primary outcome, held-out greedy accuracy, ") and "on the old split.**" in text
    assert "is not shipped yet" in text
    # Issue 38: the shipped runs' held-out problems, read apart by their numbers.
    t = s["twins"]
    assert (t["heldout"], t["twins_in_pool"], len(t["strict"]["problems"])) == (96, 66, 30)
    assert f"On the {len(t['problems'])} held-out problems whose numbers no run trained on" in text
    # Issue 49: the strictest reading's greedy gain has the other sign; the text says so and no longer
    # says the gains change "in size, not in sign".
    strict = t["strict"]["grpo"]["greedy"]["mean"]
    assert strict < 0 < s["grpo"]["greedy"]["mean"]
    assert "**A point estimate changes sign**" in text and f"{strict:+.3f} on the strictest 30" in text
    assert "not in sign" not in text
    x = s["decomposition"]["uniform"]
    assert x["from_format"]["mean"] + x["from_accuracy"]["mean"] == pytest.approx(s["grpo"]["t1"]["mean"])
    assert text.index("primary outcome") < text.index("secondary outcome") < text.index("from stating an answer more often")
    takeaways = smollm2.text("takeaways", f)
    assert "not measurable: its interval includes 0" in takeaways
    assert "what measurably improved is stating an answer at all, not the sums" in takeaways
    assert smollm2.text("readme", f).startswith("- **A real model: greedy answers did not measurably improve, sampled "
                                                "ones did**")


def test_the_last_paragraph_recalls_the_pooled_positive_control(shipped):
    p = shipped["positive"]
    text = smollm2.text("results", smollm2.combine(shipped["old"], None, p))
    o = p["pooled"]["oracle"]
    assert f"pooled over all {len(p['pooled']['seeds'])} seeds run, was {o['diff']:+.3f}" in text


def test_results_md_holds_the_current_learning_tables_and_lead():
    results = (ROOT / "benchmarks" / "RESULTS.md").read_text()
    f = smollm2.finale()
    assert smollm2.text("tables", f) in results, "rerun: python -m oar_lite.lab.findings --learning-tables"
    assert smollm2.text("lead", f) in results, "rerun: python -m oar_lite.lab.findings --learning-tables"


def test_runs_table_names_the_split():
    shipped_logs = smollm2.logs()
    assert shipped_logs[-1]["name"] == "main" and all(smollm2.split_of(l) == "numbers" for l in shipped_logs[:-1])
    table = smollm2.runs_table(lora_learning.load_log())
    assert "| held out | by their wording only (the old split) |" in table
    assert smollm2.runs_table(_clean_log()).count("by their numbers") == 1
