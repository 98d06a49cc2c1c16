"""One credit configuration (issue 18, item 1): `CreditConfig` is checked once, `token_weights`,
`TrainConfig`, `OARConfig` and the comparison's presets all carry it, and runs and checkpoints
written before it existed still read."""
import dataclasses
import json
import math

import pytest
import torch

import oar_lite as ol
from oar_lite import compare, toy
from oar_lite.attribution import CREDIT_RANGES, CreditConfig
from oar_lite.train import CHECKPOINT, TrainConfig, load_checkpoint, save_checkpoint


# ----------------------------------------------------------------------------- CreditConfig

@pytest.mark.parametrize("field, value", [("quantile", 1.5), ("quantile", math.nan), ("boost", -1.0),
                                          ("boost", math.inf), ("floor", 2.0), ("noise_std", -1e-3),
                                          ("batch_size", 0), ("batch_size", 2.5), ("token_budget", 0)])
def test_credit_config_refuses_out_of_range_values_naming_the_field(field, value):
    with pytest.raises(ValueError, match=rf"^CreditConfig\.{field}=.* is out of range: expected "):
        CreditConfig(**{field: value})


def test_credit_config_refuses_unknown_methods_listing_the_valid_ones():
    with pytest.raises(ValueError, match=r"unknown method 'oar-x'; expected one of \[.*'oar-g'.*'oracle'"):
        CreditConfig(method="shuffled:oar-x")
    with pytest.raises(ValueError, match="preserve_mass"):
        CreditConfig(preserve_mass="yes")
    assert CreditConfig(method="inverted:oar-p:answer_joint").method == "inverted:oar-p:answer_joint"
    assert set(CREDIT_RANGES) <= {f.name for f in dataclasses.fields(CreditConfig)}


def test_credit_config_routes_each_setting_by_name():
    credit = CreditConfig(method="oar-p", quantile=0.5, boost=9, noise_std=0.0, batch_size=4)
    assert credit.scorer_options() == {"noise_std": 0.0, "batch_size": 4, "token_budget": None}
    scores = torch.tensor([0.0, 1.0, 2.0, 4.0])
    assert torch.equal(credit.reshape(scores), ol.bilevel_weights(scores, quantile=0.5, boost=9))


def _toy_batch():
    tok = toy.build_tokenizer()
    rows = [toy.example(tok, "473+258:", "3+8+0=11 hmm 7+5+1=14 4+2+1=07 A=741"),
            toy.example(tok, "12+35:", "2+5+0=07 1+3+0=04 A=47")]
    T = max(len(r["input_ids"]) for r in rows)
    ids = torch.zeros(len(rows), T, dtype=torch.long)
    attn, rm, am = (torch.zeros(len(rows), T, dtype=torch.bool) for _ in range(3))
    for k, r in enumerate(rows):  # left-padded
        off = T - len(r["input_ids"])
        ids[k, off:] = r["input_ids"]
        attn[k, off:] = True
        rm[k, r["reasoning"].start + off : r["reasoning"].stop + off] = True
        am[k, r["answer"].start + off : r["answer"].stop + off] = True
    return ids, attn.long(), rm, am


@pytest.mark.parametrize("method", ["oar-p:answer_mean", "oar-g", "shuffled:oar-g", "oracle"])
def test_token_weights_takes_a_credit_config_or_its_keywords(method):
    model, _ = toy.load_model()
    ids, attn, rm, am = _toy_batch()
    credit = CreditConfig(method=method, quantile=0.5, boost=3.0, floor=0.2)
    run = lambda **kw: ol.token_weights(model, ids, attn, rm, am, pad_token_id=0,
                                        generator=torch.Generator().manual_seed(0), **kw)
    by_config = run(credit=credit)
    assert torch.equal(by_config, run(method=method, quantile=0.5, boost=3.0, floor=0.2))
    assert torch.equal(by_config, run(credit=CreditConfig(method=method), quantile=0.5, boost=3.0, floor=0.2))
    assert not torch.equal(by_config, run(credit=credit, boost=0.0))  # a keyword replaces the config's field
    with pytest.raises(ValueError, match=r"CreditConfig\.quantile=2"):
        run(method=method, quantile=2)


# ----------------------------------------------------------------------------- TrainConfig

def old_flat_form(config: TrainConfig) -> dict:
    """A config as versions before `CreditConfig` stored it: the credit settings beside the others."""
    data = dataclasses.asdict(config)
    names = {"batch_size": "attribution_batch_size", "token_budget": "attribution_token_budget"}
    return {**data, **{names.get(k, k): v for k, v in data.pop("credit").items()}}


def test_train_config_nests_the_credit_config():
    nested = TrainConfig(credit=CreditConfig("oar-g", boost=9.0, batch_size=8), steps=3)
    assert nested.credit.boost == 9.0 and nested.credit.method == "oar-g"
    assert TrainConfig().credit == CreditConfig("uniform", batch_size=64)  # plain GRPO by default
    changed = dataclasses.replace(nested, credit=dataclasses.replace(nested.credit, quantile=0.5), seed=2)
    assert changed.credit == CreditConfig("oar-g", quantile=0.5, boost=9.0, batch_size=8) and changed.seed == 2
    assert dataclasses.replace(nested, credit=CreditConfig("oracle")).credit.method == "oracle"
    assert TrainConfig(**dataclasses.asdict(nested)) == nested  # a checkpoint's nested dict
    with pytest.raises(dataclasses.FrozenInstanceError):
        nested.steps = 4
    with pytest.raises(TypeError, match="'bost'"):
        TrainConfig(bost=9)
    with pytest.raises(ValueError, match="TrainConfig.credit must be a CreditConfig"):
        TrainConfig(credit="oar-g")


def test_a_checkpoint_written_with_flat_settings_still_resumes(tmp_path):
    model, _ = toy.load_model()
    config = TrainConfig(credit=CreditConfig("oar-g", boost=9.0, batch_size=64), steps=2)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.learning_rate)
    path = tmp_path / CHECKPOINT
    save_checkpoint(path, model, optimizer, config, 1, [])
    state = torch.load(path, weights_only=True)
    assert state["config"]["credit"]["boost"] == 9.0  # written nested
    old = old_flat_form(config)
    del old["attribution_token_budget"]  # the flat form older versions wrote, before this setting existed
    torch.save({**state, "config": old}, path)
    assert load_checkpoint(path, model, optimizer, config)[0] == 1
    with pytest.raises(ValueError, match=r"boost=9.0 \(now 1.0\)"):
        load_checkpoint(path, model, optimizer, dataclasses.replace(config, credit=dataclasses.replace(config.credit,
                                                                                                      boost=1.0)))


# ----------------------------------------------------------------------------- compare's presets

def test_profiles_are_train_config_presets():
    for name, profile in compare.PROFILES.items():
        assert isinstance(profile.config, TrainConfig) and profile.seeds and 0 < profile.target <= 1, name
    credit = compare.PROFILES["credit"].config.credit
    assert credit.boost == 9.0 and credit.method == "uniform"
    run = compare.run_config("oar-p:answer_mean", 3, compare.PROFILES["tiny"].config)
    assert (run.credit.method, run.seed, run.steps) == ("oar-p:answer_mean", 3, compare.PROFILES["tiny"].config.steps)


def test_compare_refuses_an_unknown_override_before_writing(tmp_path):
    with pytest.raises(ValueError, match=r"unknown TrainConfig setting\(s\) \['prompts'\]"):
        compare.compare(["uniform"], profile="tiny", out=tmp_path / "out", overrides={"prompts": 4}, progress=False)
    with pytest.raises(ValueError, match=r"CreditConfig\.boost=-1"):
        compare.compare(["uniform"], profile="tiny", out=tmp_path / "out", overrides={"boost": -1}, progress=False)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("form", ["old flat", "nested"])
def test_a_run_recorded_in_either_form_is_reused(tmp_path, form):
    from oar_lite.__main__ import main

    tiny = ["compare", "--tiny", "--jobs", "1", "--quiet", "--methods", "uniform", "--out", str(tmp_path)]
    assert main(tiny) == 0
    run = tmp_path / "runs" / "uniform-seed0"
    saved = json.loads((run / "run.json").read_text())
    assert saved["config"]["credit"]["method"] == "uniform" and saved["config"]["credit"]["boost"] == 1.0  # nested
    config = TrainConfig(**saved["config"])
    if form == "old flat":
        saved["config"] = old_flat_form(config)
        del saved["config"]["attribution_token_budget"]
    else:
        saved["config"] = dataclasses.asdict(config)
    (run / "run.json").write_text(json.dumps(saved))
    checkpoint = (run / "checkpoint.pt").read_bytes()
    assert main(tiny) == 0
    assert (run / "checkpoint.pt").read_bytes() == checkpoint  # read back, not trained again
    (run / "run.json").write_text(json.dumps(saved))
    with pytest.raises(ValueError, match=r"boost=1.0 \(now 2.0\)"):
        main(tiny + ["--boost", "2"])


def test_oar_config_builds_the_credit_config():
    from oar_lite.trl import OARConfig

    args = OARConfig(output_dir="/tmp/oar-config", report_to="none", use_cpu=True, oar_method="oar-p",
                     oar_quantile=0.4, oar_boost=2.0, oar_batch_size=16)
    assert args.oar_credit == CreditConfig(method="oar-p:last", quantile=0.4, boost=2.0, batch_size=16)
    none = OARConfig(output_dir="/tmp/oar-config", report_to="none", use_cpu=True, oar_method="none")
    assert none.oar_credit is None


# ----------------------------------------------------------------------------- one evaluation

def test_toy_evaluate_is_train_evaluate_with_the_toy_settings():
    from oar_lite.train import evaluate

    model, tokenizer = toy.load_model()
    problems = toy.load_eval_set(n=6)
    cap = max(toy.max_new_tokens(p["digits"]) for p in problems)
    general = evaluate(model, tokenizer, problems, group_size=3, temperature=1.0, seed=0, max_new_tokens=cap,
                       batch_size=4, formats=toy.FORMATS)
    assert set(general) == {"accuracy", "answer_rate", "mixed", "solved", "failed", "mean_tokens", "n"}
    on_toy = toy.evaluate(model, tokenizer, problems, group_size=3, temperature=1.0, seed=0, batch_size=4)
    assert on_toy == {**general, "parsed": on_toy["parsed"]} and 0 < on_toy["parsed"] <= 1
    assert general["mixed"] + general["solved"] + general["failed"] == pytest.approx(1.0)


def test_a_scorer_gets_the_credit_settings_it_names():
    """A scorer's parameter named like a CreditConfig field receives that field: a new scorer
    setting is one CreditConfig field, with nothing to thread through the trainers."""
    seen = {}

    def probe(model, input_ids, reasoning, answer, *, token_budget=None, noise_std=None):
        seen.update(token_budget=token_budget, noise_std=noise_std)
        return torch.arange(reasoning.stop - reasoning.start, dtype=torch.float32)

    ol.register_scorer("probe", probe)
    try:
        ids, attn, rm, am = _toy_batch()
        ol.token_weights(None, ids, attn, rm, am, credit=CreditConfig("probe", token_budget=123, noise_std=0.5))
        assert seen == {"token_budget": 123, "noise_std": 0.5}
        config = TrainConfig(credit=CreditConfig("probe", token_budget=7, batch_size=64))
        assert config.credit.token_budget == 7 and config.credit.scorer_options()["token_budget"] == 7
    finally:
        del ol.SCORERS["probe"]
