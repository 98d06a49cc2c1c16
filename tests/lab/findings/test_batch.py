"""oar_lite.lab.findings.batch: the batch-size study read by its pre-registered rule over every seed
set it was run on, the pooled reading first, the credit methods placed on GRPO's curve."""
import json

import pytest

from oar_lite.lab import regime
from oar_lite.lab.findings import batch, positive


def _sweep(seeds, area: dict, steps: dict, model="oar_lite/course/data/toy-model", optimizer="adamw") -> dict:
    """A `benchmarks/batch_size.py` entry from per-seed readings ``{prompts: [per seed]}``."""
    label = lambda p: f"{p} prompts"
    return {"settings": {"model": model, "optimizer": optimizer, "steps": 30, "target": 0.75, "group_size": 4},
            "table": {"prompts": sorted(area), "seeds": list(seeds),
                      "steps": {"seeds": list(seeds), "methods": {label(p): {"steps": v} for p, v in steps.items()}},
                      "area": {"seeds": list(seeds), "methods": {label(p): {"area": v} for p, v in area.items()}},
                      "per_completion": {"budget": 240, "rows": {label(p): {"area": [x - 0.01 * (p > 2) for x in v]}
                                                                   for p, v in area.items()}}}}


def _credit(seeds, grpo, methods: dict, optimizer="adamw") -> dict:
    """A `benchmarks/credit_regime.py` entry at the smallest batch, GRPO reused from the sweep."""
    return {"settings": {"optimizer": optimizer}, "reused": {"methods": ["uniform"]},
            "area": {"seeds": list(seeds), "methods": {"uniform": {"area": list(grpo)},
                                                       **{m: {"area": v} for m, v in methods.items()}}}}


FIRST = (range(300, 306), {2: [0.70, 0.71, 0.69, 0.70, 0.72, 0.70], 4: [0.76, 0.77, 0.75, 0.77, 0.78, 0.76],
                           8: [0.78, 0.78, 0.77, 0.79, 0.80, 0.78]},
         {2: [20, 24, 32, 18, 16, 22], 4: [8, 10, 12, 8, 6, 10], 8: [8, 6, 8, 6, 6, 8]})
REPLICATION = (range(601, 605), {2: [0.74, 0.70, 0.72, 0.71], 4: [0.70, 0.72, 0.76, 0.69], 8: [0.72, 0.72, 0.73, 0.70]},
               {2: [16, 20, 18, 24], 4: [18, 14, 10, 26], 8: [12, 14, 10, 16]})


def _study():
    sweeps = {"plain toy, adamw": _sweep(*FIRST), "plain toy, adamw: external replication": _sweep(*REPLICATION)}
    credit = {"item 4": _credit(FIRST[0], FIRST[1][2], {"oracle": [0.70, 0.72, 0.69, 0.71, 0.72, 0.70],
                                                         "oar-g:answer_mean": [0.57, 0.68, 0.66, 0.67, 0.69, 0.67]}),
              "item 4, replication": _credit(REPLICATION[0], REPLICATION[1][2], {"oracle": [0.74, 0.71, 0.72, 0.72],
                                                                                 "oar-g:answer_mean": [0.74, 0.69, 0.73, 0.70]}),
              "another regime": _credit([0, 1], [0.5, 0.6], {"oracle": [0.5, 0.6]})}  # other GRPO runs: not a set
    return batch.worlds(sweeps, regimes=credit, control={}, n_boot=2000)


def test_every_seed_set_of_a_world_is_pooled_and_read_on_its_own_too():
    (b,) = _study()
    assert [st["label"] for st in b["sets"]] == ["pre-registered", "external replication"]
    assert b["seeds"] == [300, 301, 302, 303, 304, 305, 601, 602, 603, 604]
    diffs = [a - r for a, r in zip(FIRST[1][4] + REPLICATION[1][4], FIRST[1][2] + REPLICATION[1][2])]
    assert b["rows"][4]["diff"] == pytest.approx(sum(diffs) / 10)
    assert b["sets"][0]["noise_limited"] and not b["sets"][1]["noise_limited"] and b["noise_limited"]
    assert b["rows"][4]["reached"] == 10 and b["rows"][2]["reached"] == 9  # seed 302 never got there at 2 prompts
    o, g = b["marks"]["oracle"], b["marks"]["oar-g:answer_mean"]
    assert o["seeds"] == b["seeds"] and [st["label"] for st in o["sets"]] == ["pre-registered", "external replication"]
    assert g["diff_ci"][1] < 0 and g["sets"][1]["diff_ci"][0] < 0 < g["sets"][1]["diff_ci"][1]
    assert g["without_extreme"]["seed"] == 300 and g["without_extreme"]["diff_of_seed"] == pytest.approx(-0.13)
    assert o["worth"] == regime.batch_equivalent({p: b["rows"][p]["diff"] for p in (2, 4, 8)}, o["diff"])


def test_the_conclusion_says_what_holds_pooled_and_what_did_not_replicate():
    found = _study()
    text = batch.conclusion(found)
    assert "(10 seeds, pooled over 2 seed sets: pre-registered 300-305; external replication 601-604)" in text
    assert ("On the external replication's seeds alone the learner does not read as on the pre-registered seeds: "
            "the pre-registered reading did not replicate on them (no bigger batch's interval lies above 0)") in text
    assert "Pooled, the effect of doubling the batch is smaller than the pre-registered seeds read it" in text
    assert "OAR-G on the external replication seeds alone:" in text and "where pooled it reads below 0" in text
    assert "without seed 300 (-0.130) OAR-G's pooled difference is" in text
    assert "**What holds and what does not in the plain toy (adamw), over all 10 seeds.** A bigger batch helps, pooled" in text
    assert "OAR-G's harm" in text and "the size of the batch effect" in text
    table = batch.table(found).splitlines()
    assert table[2].startswith("| plain toy | adamw | pooled: 300-305, 601-604 (10) | 2 |")
    assert any(line.startswith("| plain toy | adamw | external replication: 601-604 (4) | 4 |") for line in table)
    marks = batch.prose.render(batch.TEMPLATE, "marks", worlds=found)
    assert "| plain toy, adamw | OAR-G | pooled: 300-305, 601-604 (10) |" in marks
    sentence = batch.sentence(found)
    assert sentence.startswith("- **Is the learner noise-limited at all?** Yes: in the plain toy (adamw, 10 seeds "
                               "pooled over 2 seed sets)") and "the pre-registered 6 seeds alone read" in sentence


def test_a_set_is_labelled_without_the_seeds_printed_beside_it():
    assert batch.set_label("plain toy, adamw: external replication, seeds 601-605") == "external replication"
    assert batch.set_label("plain toy, adamw") == batch.PRE_REGISTERED
    assert batch.set_label("k=64, adamw: confirmatory") == "confirmatory"


def test_a_pooled_harm_that_rests_on_one_seed_says_so_where_it_is_stated():
    """OAR-G's pooled interval lies below 0 only with its most extreme seed: the summary and the
    'what holds' paragraph say it rests on that seed, beside the verdict, not only in a footnote."""
    (b,) = _study()
    g = b["marks"]["oar-g:answer_mean"]
    g["without_extreme"] = {**g["without_extreme"], "diff": -0.005, "diff_ci": [-0.02, 0.01]}
    assert f"OAR-G (pooled; resting on seed {g['without_extreme']['seed']}; not on the external replication seeds alone)" \
        in batch.sentence([b])
    assert "OAR-G reads below GRPO pooled (" in batch.conclusion([b]) and "a verdict that rests on one seed: without seed " \
        f"{g['without_extreme']['seed']}" in batch.conclusion([b])
    g["without_extreme"]["diff_ci"] = [-0.03, -0.001]
    assert "resting on seed" not in batch.sentence([b]) and "and still without its most extreme seed" in batch.conclusion([b])


def test_a_world_without_a_bigger_batch_that_helps_is_not_noise_limited_and_sgd_gets_no_credit_marks():
    flat = {2: [0.70, 0.71, 0.69], 4: [0.70, 0.70, 0.70], 8: [0.71, 0.70, 0.69]}
    sgd = _sweep(range(3), flat, {p: [32, 32, 32] for p in flat}, optimizer="sgd")
    credit = {"item 4": _credit(range(3), flat[2], {"oracle": [0.7, 0.7, 0.7]})}  # AdamW runs on SGD's GRPO seeds
    (b,) = batch.worlds({"plain toy, sgd": sgd}, regimes=credit, control={}, n_boot=500)
    assert not b["noise_limited"] and b["marks"] == {} and b["sets"][0]["rows"] is b["rows"]
    assert "this learner **is not noise-limited**" in batch.conclusion([b]) and batch.sentence([b]) == ""


def test_a_scratch_world_uses_the_oracle_pooled_over_every_seed_set_of_the_positive_control(monkeypatch):
    k64 = _sweep(*FIRST, model="/runs/worlds/scratch64")
    pooled = {"pooled": {"seeds": list(range(20)), "methods": {positive.RELEVANT: {"diff": 0.5, "diff_ci": [0.4, 0.6]}}}}
    seen = []
    monkeypatch.setattr(positive, "pooled", lambda control, k: seen.append(k) or pooled)
    (b,) = batch.worlds({"k=64, adamw": k64}, regimes={}, control={}, n_boot=500)
    assert seen == [64] and b["world"] == "k = 64" and b["marks"]["oracle-relevant"]["worth"] == float("inf")
    assert "more than the largest batch measured" in batch.conclusion([b])


def test_every_shipped_seed_set_enters_the_pooled_readings():
    """Issue 48: the readings pool every seed set shipped. Every ``batch_size.json`` entry is a set
    of one world, and every ``regimes.json`` entry whose GRPO runs are a set's smallest batch is a
    credit set of that world: their seeds are exactly the pooled seeds."""
    sweeps = json.loads((regime.RESULTS_DIR / batch.BATCH).read_text())
    regimes = json.loads((regime.RESULTS_DIR / "regimes.json").read_text())
    found = batch.worlds()
    for key in {batch.world_key(e) for e in sweeps.values()}:
        entries = {n: e for n, e in sweeps.items() if batch.world_key(e) == key}
        (b,) = [b for b in found if {st["name"] for st in b["sets"]} == set(entries)]
        assert b["seeds"] == sorted(s for e in entries.values() for s in e["table"]["seeds"])
    plain = next(b for b in found if b["world"] == "plain toy" and b["optimizer"] == "adamw")
    studies = [n for n in regimes if n.startswith("batch-size study")]
    assert len(studies) >= 1 and len(plain["sets"]) == len(studies)
    for mark in plain["marks"].values():
        assert mark["seeds"] == sorted(s for n in studies for s in regimes[n]["area"]["seeds"]) == plain["seeds"]


def test_each_set_read_on_its_own_is_its_shipped_table():
    """The per-seed readings pool; read one set at a time they give back the shipped entry's own
    table (the same bootstrap draws)."""
    sweeps = json.loads((regime.RESULTS_DIR / batch.BATCH).read_text())
    for b in batch.worlds():
        for st in b["sets"]:
            t = sweeps[st["name"]]["table"]
            for p, row in st["rows"].items():
                if p == min(st["rows"]):
                    continue
                area, steps = t["area"]["methods"][f"{p} prompts"], t["steps"]["methods"][f"{p} prompts"]
                assert row["diff"] == pytest.approx(area["diff"]) and row["diff_ci"] == pytest.approx(area["diff_ci"])
                assert row["speedup_ci"] == pytest.approx(steps["speedup_ci"]) and row["reached"] == steps["reached"]
                assert row["per_completion_ci"] == pytest.approx(t["per_completion"]["rows"][f"{p} prompts"]["diff_ci"])


def test_results_md_holds_the_pooled_tables_the_cli_prints(capsys):
    """benchmarks/RESULTS.md states the pooled batch-size study as the shipped data reads it, and
    ``python -m oar_lite.lab.findings --batch`` prints those tables (rerun it when a seed set ships)."""
    from pathlib import Path

    from oar_lite.lab.findings.__main__ import main

    found = batch.worlds()
    tables = batch.table(found), batch.prose.render(batch.TEMPLATE, "marks", worlds=found)
    results = (Path(__file__).resolve().parents[3] / "benchmarks" / "RESULTS.md").read_text()
    for t in tables:
        assert t in results, "rerun: python -m oar_lite.lab.findings --batch"
    main(["--batch"])
    printed = capsys.readouterr().out
    assert all(t in printed for t in tables) and batch.conclusion(found) in printed
    assert "| plain toy | adamw | pooled: 300-309, 601-605 (15) | 4 |" in tables[0]
