"""ARCA's concentration measures (`oar_lite.lab.concentration`): against naive references, on
hand-made ground-truth data, and on what the project ships."""
import itertools
import math

import pytest
import torch

from oar_lite.lab import concentration as c
from oar_lite.reshape import effective_share


def naive_gini(w):
    R, m = len(w), sum(w) / len(w)
    return sum(abs(a - b) for a, b in itertools.product(w, w)) / (2 * R * R * m) if m else 0.0


def naive_ratio(w):
    total = sum(w)
    return math.exp(-sum(x / total * math.log(x / total) for x in w if x > 0)) / len(w)


def test_gini_and_effective_token_ratio_match_naive_references():
    g = torch.Generator().manual_seed(0)
    for R in (1, 2, 5, 33):
        w = (torch.rand(R, generator=g, dtype=torch.float64) * 2).tolist()
        assert c.gini(w) == pytest.approx(naive_gini(w), abs=1e-12)
        assert c.effective_token_ratio(w) == pytest.approx(naive_ratio(w), abs=1e-12)
        assert c.gini([3 * x for x in w]) == pytest.approx(c.gini(w), abs=1e-12)  # scale-free


def test_the_measures_at_their_ends():
    R = 8
    one_hot = [0.0] * (R - 1) + [5.0]
    assert c.gini([1.0] * R) == 0 and c.effective_token_ratio([1.0] * R) == pytest.approx(1)
    assert c.gini(one_hot) == pytest.approx((R - 1) / R) and c.effective_token_ratio(one_hot) == pytest.approx(1 / R)
    half = [0.0] * 4 + [1.0] * 4  # even over k = 4 tokens: ratio k / R, as the effective share
    assert c.effective_token_ratio(half) == pytest.approx(0.5) and effective_share(torch.tensor(half)) == pytest.approx(0.5)
    assert c.gini([0.0] * 3) == 0 and c.effective_token_ratio([0.0] * 3) == 1
    # the two ratios differ off these cases: the entropy form is the larger for mass-preserving bilevel-like weights
    w = [0.1, 0.1, 1.0, 1.0, 1.0, 2.8]
    assert c.effective_token_ratio(w) > effective_share(torch.tensor(w))


def test_answer_mass_and_rows():
    w = [1.0, 3.0, 0.0, 4.0]
    assert c.answer_mass(w, [False, True, False, True]) == pytest.approx(7 / 8)
    assert math.isnan(c.answer_mass([0.0, 0.0], [True, False]))
    row = c.concentration_row(w, [True, False, False, False])
    assert row["answer_mass"] == pytest.approx(1 / 8) and row["zero_share"] == 0.25 and row["tokens"] == 4
    assert "answer_mass" not in c.concentration_row(w)


@pytest.mark.parametrize("bad, match", [([], "non-empty 1-D"), ([[1.0]], "non-empty 1-D"),
                                        ([1.0, -1.0], "finite and >= 0"), ([float("nan")], "finite and >= 0")])
def test_bad_weights_raise(bad, match):
    with pytest.raises(ValueError, match=match):
        c.gini(bad)
    with pytest.raises(ValueError, match="relevant must be"):
        c.answer_mass([1.0, 2.0], [True])


def test_ground_truth_concentration_on_a_hand_made_file():
    """Two completions: uniform's mass on the pivotal tokens is their share; entropy-top keeps
    the top-rho entropy tokens (weights 0/1, no re-scoring); OAR-P's bilevel weights with the
    library's defaults."""
    recs = [{"p": [0.0, 0.0, 0.5, 0.5, 0.5], "scores": {"entropy": [0.1, 0.2, 0.3, 0.9], "oar-p:last": [0.0, 2.0, 0.1, 0.1]}},
            {"p": [0.2, 0.2, 0.2], "scores": {"entropy": [1.0, 2.0], "oar-p:last": [1.0, 1.0]}}]
    for r in recs:
        r["se"] = [0.0] * len(r["p"])
    table = c.ground_truth_concentration({"completions": recs}, methods=["uniform", "entropy-top", "oar-p:last"])
    assert table["tokens"] == 6 and table["pivotal_share"] == pytest.approx(1 / 6)
    u, top, oar = (table["methods"][m] for m in ("uniform", "entropy-top", "oar-p:last"))
    assert u["answer_mass"] == pytest.approx(1 / 4) and u["answer_mass_n"] == 1 and u["gini"] == 0 and u["n"] == 2
    # entropy-top at rho 0.2: completion 1 keeps token 3 only (not the pivotal token 1), completion 2 keeps token 1
    assert top["zero_share"] == pytest.approx((3 / 4 + 1 / 2) / 2) and top["answer_mass"] == 0
    assert top["effective_share"] == pytest.approx((1 / 4 + 1 / 2) / 2)
    assert oar["answer_mass"] > u["answer_mass"]  # OAR-P's largest score is the pivotal token's
    with pytest.raises(ValueError, match="unknown method"):
        c.ground_truth_concentration({"completions": recs}, methods=["oar-x"])
    with pytest.raises(ValueError, match="stores no 'random' scores"):
        c.ground_truth_concentration({"completions": recs}, methods=["random"])


def test_on_the_shipped_data():
    table = c.ground_truth_concentration()
    assert set(table["methods"]) == set(c.METHODS)
    assert table["methods"]["uniform"]["effective_share"] == 1 and table["methods"]["uniform"]["gini"] == 0
    top = table["methods"]["entropy-top"]
    assert 0.7 <= top["zero_share"] <= 0.85  # TRL's rho = 0.2 zeroes about 80% of the tokens
    for m in ("oar-p:last", "oar-g:answer_mean"):
        assert 0 < table["methods"][m]["gini"] < top["gini"]
    shipped = c.shipped_concentration()
    assert set(shipped["smollm2"]) == {"oar-g", "oar-p"} and "gini" in shipped["not_computable"]
    assert 0.5 < shipped["smollm2"]["oar-g"]["effective_share"] < 1
    text = c.concentration_markdown(table, shipped)
    assert "| entropy-top |" in text and "Not computable" in text


def test_main_prints_the_table(capsys):
    text = c.main(["--rho", "0.5"])
    assert "TRL's rho = 0.5" in text and "| entropy-top |" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_info:  # a usage error
        c.main(["--rho", "2"])
    assert exit_info.value.code == 2 and "--rho must lie in [0, 1]" in capsys.readouterr().err


def _entry(es, gini, mass, ci, zero=0.0):
    return {"effective_share": es, "gini": gini, "effective_token_ratio": es, "zero_share": zero,
            "answer_mass": mass, "answer_mass_ci95": ci, "answer_mass_n": 10, "n": 12}


def test_the_reading_follows_the_numbers():
    base = {"uniform": _entry(1, 0, 0.10, 0.02), "random": _entry(0.82, 0.25, 0.10, 0.02),
            "entropy-top": _entry(0.2, 0.8, 0.40, 0.05, zero=0.8)}
    table = {"entropy_top_quantile": 0.8, "methods": {**base, "oar-p:last": _entry(0.8, 0.27, 0.11, 0.02)}}
    text = c.concentration_reading(table)
    assert "cannot tell a signal from noise" in text and "no bilevel method puts more" in text
    assert "beyond uniform's interval" in text and "80% of the tokens at weight 0" in text
    table["methods"]["oar-p:last"] = _entry(0.4, 0.6, 0.30, 0.03)
    text = c.concentration_reading(table)
    assert "differently from noise" in text and "oar-p:last puts more, beyond both intervals" in text
    # GRAIL's own weighting is read apart from the bi-level methods
    table["methods"]["grail"] = _entry(0.9, 0.15, 0.16, 0.02)
    text = c.concentration_reading(table)
    assert "grail, with its own weighting (not the bi-level reshaping), keeps an effective share of 0.90" in text
    assert "beyond uniform's interval." in text.split("grail, with its own")[1]
    assert "bilevel methods (oar-p:last)" in text
    with pytest.raises(ValueError, match="needs the methods"):
        c.concentration_reading({"entropy_top_quantile": 0.8, "methods": {"uniform": base["uniform"]}})
    with pytest.raises(ValueError, match="at least one bilevel method"):
        c.concentration_reading({"entropy_top_quantile": 0.8, "methods": base})
