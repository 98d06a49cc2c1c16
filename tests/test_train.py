"""The readable training loop (oar_lite.train) on a tiny in-process world.

The world: prompts ``"a+b="`` with a + b <= 2, completions ``"xx A=<digit>"``. A 2-layer
Llama is taught the format (with random answer digits) in a few optimizer steps, so its
sampled groups get mixed rewards and every part of the loop has something to do.
"""
import copy
import dataclasses
import json
import math
import random

import pytest
import torch
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from oar_lite.attribution import CreditConfig
from oar_lite.checkpoint import CHECKPOINT, METRICS, load_checkpoint, read_jsonl, save_checkpoint
from oar_lite.grpo import group_advantages, policy_loss, sequence_logprobs
from oar_lite.reward import math_reward
from oar_lite.rollout import sample_completions
from oar_lite.seeding import derive_seed, pick_problems
from oar_lite.train import Task, TrainConfig, train

TRAIN_FIELDS = (  # what every step records (issue 5)
    "step", "method", "seed", "reward_mean", "accuracy", "entropy", "completion_length", "zero_spread_groups",
    "weight_mean", "weight_std", "weight_suppressed", "weight_boosted",
    "weight_effective_share",
    "time_generate", "time_reward", "time_attribute", "time_update", "wall_time", "loss", "clip_fraction", "kl",
    "cpu_generate", "cpu_reward", "cpu_attribute", "cpu_update", "cpu_time",
)
LAB_FIELDS = ("tau_mean", "tau_zero_share", "weight_at_floor", "taus")  # the lab's hook adds them (issue 40)


def tiny_tokenizer():
    vocab = {"<pad>": 0, "<s>": 1, "</s>": 2, "<unk>": 3}
    for c in "0123456789+= Ax":
        vocab[c] = len(vocab)
    tk = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    tk.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="<pad>", bos_token="<s>", eos_token="</s>",
                                   unk_token="<unk>")


def problems(n, seed):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        a = rng.randint(0, 2)
        b = rng.randint(0, 2 - a)
        out.append({"prompt": f"{a}+{b}=", "answer": a + b})
    return out


def tiny_model(tokenizer, steps=30, seed=0):
    """A 2-layer Llama that writes ``x.. A=<d>`` after a prompt, with d mostly random."""
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                      pad_token_id=0, bos_token_id=1, eos_token_id=2, tie_word_embeddings=False)
    model = LlamaForCausalLM(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    rng = random.Random(seed)
    for _ in range(steps):
        texts = []
        for p in problems(16, rng.random()):
            d = p["answer"] if rng.random() < 0.5 else rng.randint(0, 2)
            texts.append(p["prompt"] + "x" * rng.randint(1, 3) + f" A={d}")
        enc = tokenizer(texts, padding=True, padding_side="right", return_tensors="pt")
        ids = torch.cat([enc.input_ids, torch.zeros(len(texts), 1, dtype=torch.long)], 1)
        lengths = enc.attention_mask.sum(1)
        ids[torch.arange(len(texts)), lengths] = tokenizer.eos_token_id
        attn = (torch.arange(ids.shape[1])[None] <= lengths[:, None]).long()
        loss = model(input_ids=ids, attention_mask=attn, labels=ids.masked_fill(attn == 0, -100)).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model.eval()


@pytest.fixture(scope="module")
def world():
    tokenizer = tiny_tokenizer()
    return tiny_model(tokenizer), tokenizer, Task(train_problems=problems(40, 0), eval_problems=problems(8, 1))


def config(**kw):
    base = dict(steps=2, prompts_per_step=4, group_size=4, max_new_tokens=8, learning_rate=1e-3, eval_every=2,
                progress=False)
    return TrainConfig(**{**base, **kw})


def without_times(records):
    return [{k: v for k, v in r.items() if not k.startswith(("time_", "cpu_")) and k not in ("wall_time", "cpu_time")}
            for r in records]


def test_two_steps_write_metrics_with_all_fields(world, tmp_path):
    model, tokenizer, task = world
    _, records = train(copy.deepcopy(model), tokenizer, task, config(credit=CreditConfig("oar-g")), out_dir=tmp_path)
    lines = read_jsonl(tmp_path / METRICS)
    assert lines == json.loads(json.dumps(records))
    steps = [r for r in lines if r["type"] == "train"]
    evals = [r for r in lines if r["type"] == "eval"]
    assert [r["step"] for r in steps] == [1, 2]
    assert [r["step"] for r in evals] == [0, 2]  # before training and at the end
    for r in steps:
        missing = [f for f in TRAIN_FIELDS if f not in r]
        assert not missing, missing
        for f in TRAIN_FIELDS:
            if isinstance(r[f], float):
                assert math.isfinite(r[f]), (f, r[f])
        assert 0 <= r["accuracy"] <= 1 and 0 <= r["zero_spread_groups"] <= 1
        assert r["entropy"] > 0 and r["completion_length"] >= 1
        assert all(r[f"time_{p}"] >= 0 for p in ("generate", "reward", "attribute", "update"))
    assert steps[1]["wall_time"] > steps[0]["wall_time"] > 0
    assert all(0 <= r["eval_accuracy"] <= 1 and r["eval_n"] == len(task.eval_problems) for r in evals)
    # Some group had mixed rewards, so OAR-G reshaped something: weights spread around 1.
    scored = [r for r in steps if r["weight_std"] is not None]
    assert scored and any(r["weight_std"] > 0 and r["weight_suppressed"] > 0 and r["weight_boosted"] > 0 for r in scored)
    # How uniform (issue 26): reshaped weights are not; the lab's measures are left to the lab.
    assert all(1 / 64 <= r["weight_effective_share"] < 1 for r in scored if r["weight_std"] > 0)
    assert not any(f in r for r in steps for f in LAB_FIELDS)
    assert (tmp_path / CHECKPOINT).exists()


def test_the_lab_hook_gives_the_records_their_uniformity_and_changes_nothing_else(world):
    """``step_metrics``: with the lab's hook (`oar_lite.lab.uniformity.step_metrics`) a train record
    has the keys and values the library recorded before issue 40 (`summarize_uniformity` of
    `weight_uniformity` of the step's weights, the effective share included); without it, none of
    the lab's keys and every other value the same. A hook that overwrites a key is refused."""
    from oar_lite.lab.uniformity import step_metrics, summarize_uniformity, weight_uniformity

    model, tokenizer, task = world
    seen = []

    def hook(*args):
        seen.append(args)
        return step_metrics(*args)

    cfg = config(credit=CreditConfig("oar-g"), eval_every=0)
    _, lab = train(copy.deepcopy(model), tokenizer, task, cfg, step_metrics=hook)
    _, library = train(copy.deepcopy(model), tokenizer, task, cfg)
    lab_steps = [r for r in lab if r["type"] == "train"]
    assert len(seen) == len(lab_steps) == 2 and any(r["taus"] for r in lab_steps)  # something was scored
    for r, (scores, weights, mask, credit) in zip(lab_steps, seen):
        assert credit == cfg.credit
        old = summarize_uniformity(weight_uniformity(scores, [w[m] for w, m in zip(weights, mask)],
                                                     quantile=credit.quantile, floor=credit.floor))
        assert set(r) == set(TRAIN_FIELDS) | set(LAB_FIELDS) | {"type", "answer_rate", "scored_rows", "ratio_mean",
                                                                 "advantage_mean", "grad_norm", "skipped"}
        assert {k: r[k] for k in (*LAB_FIELDS, "weight_effective_share")} == {
            "tau_mean": old["tau_mean"], "tau_zero_share": old["tau_zero_share"], "weight_at_floor": old["at_floor"],
            "taus": old["taus"], "weight_effective_share": old["effective_share"]}
    assert without_times(library) == [{k: v for k, v in r.items() if k not in LAB_FIELDS} for r in without_times(lab)]
    with pytest.raises(ValueError, match=r"step_metrics returned \['reward_mean'\], which the record has"):
        train(copy.deepcopy(model), tokenizer, task, config(steps=1, eval_every=0),
              step_metrics=lambda *args: {"reward_mean": 0.0})


@pytest.mark.slow
def test_resume_gives_the_same_metrics(world, tmp_path):
    """4 steps straight == 2 steps, stop, resume, 2 more (apart from wall times)."""
    model, tokenizer, task = world
    # RNG, inner steps, KL: all covered
    settings = dict(credit=CreditConfig("oar-g"), num_iterations=2, beta=0.05, eval_every=2)
    _, straight = train(copy.deepcopy(model), tokenizer, task, config(steps=4, **settings), out_dir=tmp_path / "a")
    train(copy.deepcopy(model), tokenizer, task, config(steps=2, **settings), out_dir=tmp_path / "b")
    resumed_model, resumed = train(copy.deepcopy(model), tokenizer, task, config(steps=4, **settings),
                                   out_dir=tmp_path / "b", resume=True)
    assert any(r["type"] == "train" and r["reward_mean"] > 0 for r in straight)
    assert without_times(resumed) == without_times(straight)
    assert without_times(read_jsonl(tmp_path / "b" / METRICS)) == without_times(read_jsonl(tmp_path / "a" / METRICS))
    # The checkpoints agree too: same weights after 4 steps.
    a = torch.load(tmp_path / "a" / CHECKPOINT, weights_only=True)["model"]
    b = torch.load(tmp_path / "b" / CHECKPOINT, weights_only=True)["model"]
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_resume_refuses_a_different_run(world, tmp_path):
    model, tokenizer, task = world
    train(copy.deepcopy(model), tokenizer, task, config(steps=1), out_dir=tmp_path)
    with pytest.raises(ValueError, match="learning_rate"):
        train(copy.deepcopy(model), tokenizer, task, config(steps=2, learning_rate=5e-4), out_dir=tmp_path, resume=True)


def test_resume_refuses_a_checkpoint_of_other_problems(world, tmp_path):
    model, tokenizer, task = world
    train(copy.deepcopy(model), tokenizer, task, config(steps=1), out_dir=tmp_path)
    other = dataclasses.replace(task, train_problems=list(task.train_problems)[1:])
    assert other.fingerprint() != task.fingerprint()
    with pytest.raises(ValueError, match="other problems"):
        train(copy.deepcopy(model), tokenizer, other, config(steps=2), out_dir=tmp_path, resume=True)
    train(copy.deepcopy(model), tokenizer, task, config(steps=2), out_dir=tmp_path, resume=True)  # same task resumes


def test_a_failed_save_keeps_the_previous_checkpoint(world, tmp_path, monkeypatch):
    model, tokenizer, task = world
    cfg = config(steps=2)
    m, records = train(copy.deepcopy(model), tokenizer, task, cfg, out_dir=tmp_path)
    before = (tmp_path / CHECKPOINT).read_bytes()

    def crash(obj, f, *a, **k):
        with open(f, "wb") as fh:
            fh.write(b"half a checkpoint")
        raise KeyboardInterrupt

    monkeypatch.setattr(torch, "save", crash)
    optimizer = torch.optim.AdamW([p for p in m.parameters() if p.requires_grad])
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(tmp_path / CHECKPOINT, m, optimizer, cfg, 3, records)
    assert (tmp_path / CHECKPOINT).read_bytes() == before
    monkeypatch.undo()
    fresh = copy.deepcopy(model)
    step, saved = load_checkpoint(tmp_path / CHECKPOINT, fresh, torch.optim.AdamW(fresh.parameters()), cfg)
    assert step == 2 and saved == json.loads(json.dumps(records))


def test_lora_trains_only_the_adapter(world, tmp_path):
    model, tokenizer, task = world
    base = copy.deepcopy(model)
    before = {k: v.clone() for k, v in base.state_dict().items()}
    peft_model, records = train(base, tokenizer, task, config(credit=CreditConfig("oar-p", batch_size=64), lora=True,
                                                              lora_rank=4, learning_rate=1e-2),
                                out_dir=tmp_path)
    assert any(r["type"] == "train" and r["grad_norm"] > 0 for r in records)
    after = peft_model.state_dict()
    lora = {k: v for k, v in after.items() if "lora_" in k}
    assert lora, "no adapter weights"
    base_after = {k.replace("base_model.model.", "").replace(".base_layer", ""): v
                  for k, v in after.items() if "lora_" not in k}
    assert base_after.keys() == before.keys()
    assert all(torch.equal(base_after[k], before[k]) for k in before), "a base weight changed"
    # lora_B starts at zero; training moved it.
    assert any(v.abs().sum() > 0 for k, v in lora.items() if "lora_B" in k)
    saved = torch.load(tmp_path / CHECKPOINT, weights_only=True)["model"]
    assert saved and all("lora_" in k for k in saved)  # the checkpoint holds the adapter only


def test_uniform_is_plain_grpo(world):
    """method="uniform": every weight is 1 and one step equals a hand-written GRPO step."""
    model, tokenizer, task = world
    cfg = config(credit=CreditConfig("uniform"), steps=1, eval_every=0)
    task_no_eval = Task(train_problems=task.train_problems)
    trained, records = train(copy.deepcopy(model), tokenizer, task_no_eval, cfg)
    step = records[0]
    assert step["weight_mean"] == 1.0 and step["weight_std"] == 0.0
    assert step["weight_suppressed"] == 0.0 and step["weight_boosted"] == 0.0
    assert step["weight_effective_share"] in (None, 1.0)

    # Plain GRPO by hand: same prompts, same samples, [B] sequence advantages.
    reference = copy.deepcopy(model)
    chosen = pick_problems(task.train_problems, cfg.prompts_per_step, seed=cfg.seed, step=1)
    rollouts = sample_completions(reference, tokenizer, [p["prompt"] for p in chosen], group_size=cfg.group_size,
                                  max_new_tokens=cfg.max_new_tokens, seed=derive_seed(cfg.seed, 1))
    rewards = torch.tensor([math_reward(c, p["answer"]) for c, p in
                            zip(rollouts.completions, [p for p in chosen for _ in range(cfg.group_size)])])
    assert 0 < rewards.mean() < 1
    advantages = group_advantages(rewards, cfg.group_size)
    optimizer = torch.optim.AdamW(reference.parameters(), lr=cfg.learning_rate, weight_decay=cfg.weight_decay)
    C = rollouts.completion_mask.shape[1]
    logprobs = sequence_logprobs(reference, rollouts.input_ids, rollouts.attention_mask, C)
    loss, _ = policy_loss(logprobs, logprobs.detach(), advantages, rollouts.completion_mask)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(list(reference.parameters()), cfg.max_grad_norm)
    optimizer.step()
    assert step["loss"] == pytest.approx(float(loss.detach()), abs=1e-6)
    for (name, a), b in zip(trained.named_parameters(), reference.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6, msg=name)


def test_micro_batches_add_up_to_the_full_batch(world):
    model, tokenizer, task = world
    task_no_eval = Task(train_problems=task.train_problems)
    for loss_type in ("grpo", "dapo"):
        full, rec_full = train(copy.deepcopy(model), tokenizer, task_no_eval,
                               config(credit=CreditConfig("oar-p", batch_size=64), steps=1, loss_type=loss_type))
        micro, rec_micro = train(copy.deepcopy(model), tokenizer, task_no_eval,
                                 config(credit=CreditConfig("oar-p", batch_size=64), steps=1, loss_type=loss_type,
                                        micro_batch_size=3))
        assert rec_micro[0]["loss"] == pytest.approx(rec_full[0]["loss"], abs=1e-6)
        for a, b in zip(full.parameters(), micro.parameters()):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)


def test_oar_steps_continue_from_the_sampling_cache(world, monkeypatch):
    """OAR-P and OAR-G steps hand the sampling's KV cache to the attribution, with weights
    equal to those computed without it (up to rounding); plain GRPO keeps no cache."""
    import oar_lite.train as train_module

    model, tokenizer, task = world
    task_no_eval = Task(train_problems=task.train_problems)
    token_weights = train_module.token_weights
    caches, reshaped = [], []

    def checking(*args, **kwargs):
        caches.append(kwargs.get("sampled_cache"))
        rng = torch.get_rng_state()  # OAR-G's noise: the same for both calls
        result = token_weights(*args, **kwargs)
        weights = result[0] if isinstance(result, tuple) else result  # train_step also asks for the scores
        if caches[-1] is not None:
            after = torch.get_rng_state()
            torch.set_rng_state(rng)
            again = token_weights(*args, **{**kwargs, "sampled_cache": None, "return_scores": False})
            torch.testing.assert_close(weights, again, rtol=1e-5, atol=1e-6)
            torch.set_rng_state(after)
            reshaped.append(bool((weights != 1).any()))
        return result

    monkeypatch.setattr(train_module, "token_weights", checking)
    for method in ("oar-p", "oar-g:answer_joint"):  # OAR-G's KL modes amplify float32 rounding (test_attribution)
        caches.clear()
        train(copy.deepcopy(model), tokenizer, task_no_eval, config(credit=CreditConfig(method), steps=1, eval_every=0))
        assert len(caches) == 1 and caches[0] is not None, f"{method} was not given the sampling's cache"
    assert reshaped == [True, True]  # rows were scored, so the comparison compared something
    caches.clear()
    train(copy.deepcopy(model), tokenizer, task_no_eval, config(credit=CreditConfig("uniform"), steps=1, eval_every=0))
    assert caches == [None]


def test_bad_settings_raise():
    with pytest.raises(ValueError, match="unknown method"):
        TrainConfig(credit=CreditConfig("oar-x"))
    with pytest.raises(ValueError, match="group_size"):
        TrainConfig(group_size=1)
    with pytest.raises(ValueError, match="loss_type"):
        TrainConfig(loss_type="ppo")
    with pytest.raises(ValueError, match="prompt"):
        Task(train_problems=[{"question": "1+1"}])
    with pytest.raises(ValueError, match="empty"):
        Task(train_problems=[])


# ----------------------------------------------------------------------------- no silent loss (issue 15)

def test_checkpoints_are_on_by_default():
    assert 1 <= TrainConfig().checkpoint_every <= TrainConfig().steps


@pytest.mark.slow
def test_a_killed_run_keeps_its_checkpoint(world, tmp_path, monkeypatch):
    """With the default interval a run stopped after checkpoint_every steps resumes from there."""
    import oar_lite.train as train_module

    model, tokenizer, task = world
    every = TrainConfig().checkpoint_every
    cfg = config(steps=every + 1, eval_every=0, checkpoint_every=every)
    assert cfg.checkpoint_every == TrainConfig().checkpoint_every
    real_step = train_module.train_step

    def dies_at_the_last_step(*args, **kwargs):
        if args[5] == every + 1:
            raise KeyboardInterrupt
        return real_step(*args, **kwargs)

    monkeypatch.setattr(train_module, "train_step", dies_at_the_last_step)
    with pytest.raises(KeyboardInterrupt):
        train(copy.deepcopy(model), tokenizer, task, cfg, out_dir=tmp_path)
    state = torch.load(tmp_path / CHECKPOINT, weights_only=True)
    assert state["step"] == every


def test_a_fresh_run_refuses_a_folder_that_holds_a_run(world, tmp_path):
    model, tokenizer, task = world
    train(copy.deepcopy(model), tokenizer, task, config(steps=1), out_dir=tmp_path)
    before = (tmp_path / METRICS).read_text()
    with pytest.raises(ValueError, match=r"already holds a run.*resume=True.*overwrite=True"):
        train(copy.deepcopy(model), tokenizer, task, config(steps=1), out_dir=tmp_path)
    assert (tmp_path / METRICS).read_text() == before  # nothing truncated
    _, records = train(copy.deepcopy(model), tokenizer, task, config(steps=1, learning_rate=5e-4), out_dir=tmp_path,
                       overwrite=True)
    assert read_jsonl(tmp_path / METRICS) == json.loads(json.dumps(records))


@pytest.mark.parametrize("content", [b"", b"not a checkpoint at all", b"PK\x03\x04 truncated zip"])
def test_a_corrupt_checkpoint_names_the_file(world, tmp_path, content):
    model, tokenizer, task = world
    (tmp_path / CHECKPOINT).write_bytes(content)
    with pytest.raises(ValueError, match=rf"{CHECKPOINT}.*(delete|remove) it"):
        train(copy.deepcopy(model), tokenizer, task, config(steps=1), out_dir=tmp_path, resume=True)


def test_eval_size_may_change_on_resume(world, tmp_path):
    model, tokenizer, task = world
    train(copy.deepcopy(model), tokenizer, task, config(steps=1, eval_size=4), out_dir=tmp_path)
    fewer = dataclasses.replace(task, eval_problems=list(task.eval_problems)[:4])
    _, records = train(copy.deepcopy(model), tokenizer, fewer, config(steps=2, eval_size=2), out_dir=tmp_path,
                       resume=True)
    assert [r["eval_n"] for r in records if r["type"] == "eval"] == [4, 4, 2]  # steps 0 and 1, then 2


def test_lora_kl_is_measured_against_the_base_model(world, tmp_path):
    """With LoRA the reference is the base model, the adapter switched off: the KL is 0 while
    the adapter is still zero (step 1) and grows once it has moved. A reference taken with
    the adapter on would be the policy itself, and the KL 0 at every step."""
    model, tokenizer, task = world
    _, records = train(copy.deepcopy(model), tokenizer, task,
                       config(credit=CreditConfig("oar-g"), lora=True, lora_rank=4, learning_rate=1e-2, beta=0.05,
                              steps=3), out_dir=tmp_path)
    kl = [r["kl"] for r in records if r["type"] == "train"]
    assert len(kl) == 3 and kl[0] == pytest.approx(0.0, abs=1e-7) and max(kl[1:]) > 1e-6, kl


def test_same_seed_same_lora_adapter_and_metrics(world):
    model, tokenizer, task = world
    task = Task(train_problems=task.train_problems)
    runs = []
    for _ in range(2):
        torch.manual_seed(1234 + len(runs))  # whatever the global RNG holds before the call
        cfg = config(credit=CreditConfig("oar-g"), lora=True, lora_rank=4, learning_rate=1e-2, steps=1)
        peft_model, records = train(copy.deepcopy(model), tokenizer, task, cfg)
        runs.append(({k: v.clone() for k, v in peft_model.state_dict().items() if "lora_" in k}, records))
    (a, rec_a), (b, rec_b) = runs
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert without_times(rec_a) == without_times(rec_b)


def test_train_config_nests_the_credit_config():
    nested = TrainConfig(credit=CreditConfig("oar-p", boost=9.0, batch_size=8), steps=3)
    assert nested.credit.boost == 9.0 and nested.credit.method == "oar-p"
    assert TrainConfig().credit == CreditConfig("uniform")  # plain GRPO by default
    changed = dataclasses.replace(nested, credit=dataclasses.replace(nested.credit, quantile=0.5), seed=2)
    assert changed.credit == CreditConfig("oar-p", quantile=0.5, boost=9.0, batch_size=8) and changed.seed == 2
    # A stored credit (every field) of an older version gave plain GRPO OAR-P's batch size: read without it.
    stored = {**dataclasses.asdict(CreditConfig()), "method": "uniform", "batch_size": 64}
    assert TrainConfig(credit=stored).credit == CreditConfig("uniform")
    assert TrainConfig(credit={"method": "oar-p"}).credit.batch_size == CreditConfig("oar-p").batch_size == 64
    assert dataclasses.replace(nested, credit=CreditConfig("oracle")).credit.method == "oracle"
    assert TrainConfig(**dataclasses.asdict(nested)) == nested  # a checkpoint's nested dict
    with pytest.raises(dataclasses.FrozenInstanceError):
        nested.steps = 4
    with pytest.raises(TypeError, match="'bost'"):
        TrainConfig(bost=9)
    with pytest.raises(ValueError, match="TrainConfig.credit must be a CreditConfig"):
        TrainConfig(credit="oar-g")


def test_the_optimizer_is_a_setting_and_an_unknown_name_is_refused(world, tmp_path):
    """`TrainConfig.optimizer`: 'sgd' is plain SGD (no momentum, so no state), 'adamw' keeps moments;
    a checkpoint written before the setting existed resumes as the default's run only."""
    from oar_lite.train import make_optimizer
    with pytest.raises(ValueError, match=r"optimizer must be one of \('adamw', 'sgd'\), got 'adam'"):
        config(optimizer="adam")
    model, tokenizer, task = world
    sgd = make_optimizer(model.parameters(), config(optimizer="sgd", learning_rate=0.5))
    assert isinstance(sgd, torch.optim.SGD) and sgd.defaults["momentum"] == 0 and sgd.defaults["lr"] == 0.5
    assert isinstance(make_optimizer(model.parameters(), config()), torch.optim.AdamW)
    runs = {}
    for name in ("adamw", "sgd"):
        trained, _ = train(copy.deepcopy(model), tokenizer, task, config(steps=1, optimizer=name, learning_rate=0.05),
                           out_dir=tmp_path / name)
        state = torch.load(tmp_path / name / CHECKPOINT, weights_only=True)
        runs[name] = (trained, state)
    assert runs["adamw"][1]["optimizer"]["state"] and not runs["sgd"][1]["optimizer"]["state"]  # SGD keeps no moments
    assert runs["sgd"][1]["config"]["optimizer"] == "sgd"
    a, s = (dict(runs[n][0].named_parameters()) for n in ("adamw", "sgd"))
    assert any(not torch.equal(a[k], s[k]) for k in a)
    # A checkpoint without the setting (written before it existed) was an AdamW run.
    path = tmp_path / "adamw" / CHECKPOINT
    state = runs["adamw"][1]
    del state["config"]["optimizer"]
    torch.save(state, path)
    with pytest.raises(ValueError, match=r"optimizer=None \(now 'sgd'\)"):
        train(copy.deepcopy(model), tokenizer, task, config(steps=2, optimizer="sgd", learning_rate=0.05),
              out_dir=tmp_path / "adamw", resume=True)
    _, records = train(copy.deepcopy(model), tokenizer, task, config(steps=2, learning_rate=0.05),
                       out_dir=tmp_path / "adamw", resume=True)
    assert [r["step"] for r in records if r["type"] == "train"] == [1, 2]
