"""OARGRPOTrainer on TRL: LoRA, the advantages TRL's loss receives, parity with plain GRPO.

A tiny Llama and a character-level tokenizer are built in-process. Completions come from a
scripted `rollout_func` (TRL's public hook), so every group has answers that are right,
wrong and missing, and the advantages are never all zero; everything after generation
(rewards, advantages, OAR, loss, optimiser) is the real trainer's.
"""
import copy
import dataclasses
import math
import os
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func warns that it is experimental

import pytest
import torch
from datasets import Dataset
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast
from trl import GRPOConfig, GRPOTrainer

from oar_lite.course import toy
from oar_lite.attribution import CreditConfig, token_weights
from oar_lite.grpo import group_advantages
from oar_lite.reward import math_reward
from oar_lite.segment import segment_completion_ids, segments_to_masks
from oar_lite.trl import OARConfig, OARGRPOTrainer
from conftest import assert_refused_or_in_range

torch.set_num_threads(2)

G = 4  # completions per prompt
CHARS = list("0123456789+-*=A?. abcdefghijklmnopqrstuvwxyz")


def char_tokenizer() -> PreTrainedTokenizerFast:
    """One token per character; decode concatenates (so decoded prefixes give exact offsets)."""
    vocab = {t: i for i, t in enumerate(["<pad>", "<s>", "</s>", "<unk>", *CHARS])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    tok.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", bos_token="<s>", eos_token="</s>",
                                   unk_token="<unk>")


def tiny_model(seed: int = 0) -> LlamaForCausalLM:
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=4 + len(CHARS), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                      pad_token_id=0, bos_token_id=1, eos_token_id=2)
    return LlamaForCausalLM(cfg)


PROBLEMS = [(3, 4), (2, 5)]


def dataset() -> Dataset:
    return Dataset.from_list([{"prompt": f"{a}+{b}=?", "answer": str(a + b)} for a, b in PROBLEMS])


def reward(completions, answer, **kwargs):
    return [math_reward(c, ref) for c, ref in zip(completions, answer)]


def scripted_rollout(tokenizer):
    """rollout_func: completion j of each group is candidate j (right, wrong, right, none)."""

    def rollout(prompts, trainer):
        prompt_ids = tokenizer(prompts)["input_ids"]
        completions = []
        for i, prompt in enumerate(prompts):
            a, b = int(prompt[0]), int(prompt[2])
            candidates = [f"{a} plus {b} makes A={a + b}", f"{a}+{b} is A={a + b + 1}",
                          f"add {b} to {a} A={a + b}", f"no idea {a}"]
            completions.append(tokenizer(candidates[i % G])["input_ids"] + [tokenizer.eos_token_id])
        return {"prompt_ids": prompt_ids, "completion_ids": completions, "logprobs": None}

    return rollout


def capturing(base):
    """A subclass of ``base`` that keeps a copy of every batch `_compute_loss` receives and its loss."""

    class Capturing(base):
        def _compute_loss(self, model, inputs):
            loss = super()._compute_loss(model, inputs)
            self.seen.append(({k: v.detach().clone() if torch.is_tensor(v) else v for k, v in inputs.items()},
                              loss.detach().clone()))
            return loss

    return Capturing


def config(cls=OARConfig, tmp_path=None, **overrides):
    kwargs = dict(output_dir=str(tmp_path or "unused"), per_device_train_batch_size=len(PROBLEMS) * G,
                  num_generations=G, max_completion_length=32, max_steps=2, learning_rate=1e-2,
                  logging_steps=1, report_to="none", save_strategy="no", bf16=False, use_cpu=True,
                  gradient_checkpointing=False, seed=0, disable_tqdm=True, dataloader_num_workers=0)
    kwargs.update(overrides)
    return cls(**kwargs)


def build(trainer_cls, args, model=None, **kwargs):
    tokenizer = char_tokenizer()
    trainer = capturing(trainer_cls)(model=model if model is not None else tiny_model(), reward_funcs=reward,
                                     args=args, train_dataset=dataset(), processing_class=tokenizer,
                                     rollout_func=scripted_rollout(tokenizer), **kwargs)
    trainer.seen = []
    return trainer


def run(trainer_cls, args, model=None, **kwargs):
    trainer = build(trainer_cls, args, model, **kwargs)
    trainer.train()
    return trainer


def snapshot(trainer) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in trainer.accelerator.unwrap_model(trainer.model).named_parameters()}


# ----------------------------------------------------------------------------- LoRA

def test_lora_two_steps_change_adapter_not_base(tmp_path):
    from peft import LoraConfig

    lora = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], lora_dropout=0.0)
    trainer = build(OARGRPOTrainer, config(tmp_path=tmp_path, oar_method="oar-g"), peft_config=lora)
    before = snapshot(trainer)
    trainer.train()
    after = snapshot(trainer)
    assert trainer.state.global_step == 2
    adapter = [k for k in before if "lora_" in k]
    base = [k for k in before if "lora_" not in k]
    assert adapter and len(base) == len(tiny_model().state_dict())
    assert all(torch.equal(before[k], after[k]) for k in base), "a base weight changed"
    assert all(not torch.equal(before[k], after[k]) for k in adapter if "lora_B" in k)
    assert any(not torch.equal(before[k], after[k]) for k in adapter if "lora_A" in k)  # moves from step 2
    logs = [h for h in trainer.state.log_history if "oar/weight_mean" in h]
    assert len(logs) == 2 and all(abs(h["oar/weight_mean"] - 1) < 1e-4 for h in logs)  # mass preserved
    assert all(h["oar/frac_no_answer"] == pytest.approx(0.25) for h in logs)  # 1 of 4 candidates has none


def test_arca_adapter_residual_is_uniform_until_the_adapter_learns(tmp_path):
    """``oar_method="adapter-residual"`` (ARCA's signal) under OARGRPOTrainer with LoRA: the
    trainer scores with the peft model, so the adapter can be switched off. Step 1's adapter is
    fresh (B = 0): every residual is 0 and every weight 1, the advantages are GRPO's; after one
    update the residuals differ and the weights do too."""
    from peft import LoraConfig

    lora = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], lora_dropout=0.0)
    trainer = run(OARGRPOTrainer, config(tmp_path=tmp_path, oar_method="adapter-residual"), peft_config=lora)
    (first, _), (second, _) = trainer.seen

    def rows_with_unequal_advantages(inputs):
        adv, valid = inputs["advantages"], inputs["completion_mask"].bool()
        return sum(float(adv[r, valid[r]].max() - adv[r, valid[r]].min()) > 1e-6 for r in range(adv.shape[0]))

    assert first["advantages"].dim() == 2 and rows_with_unequal_advantages(first) == 0
    assert rows_with_unequal_advantages(second) > 0


# ----------------------------------------------------------------------------- advantages

def test_trl_receives_sequence_advantage_times_weights(tmp_path):
    args = config(tmp_path=tmp_path, oar_method="oar-p", max_steps=1)
    model = tiny_model()
    policy_at_generation = copy.deepcopy(model).eval()  # one step: the batch is scored before any update
    trainer = run(OARGRPOTrainer, args, model=model)
    (inputs, _), = trainer.seen
    adv = inputs["advantages"]
    prompt_ids, prompt_mask = inputs["prompt_ids"], inputs["prompt_mask"]
    completion_ids, completion_mask = inputs["completion_ids"], inputs["completion_mask"]
    B, C = completion_ids.shape
    P = prompt_ids.shape[1]
    assert adv.shape == (B, C)
    tokenizer = char_tokenizer()

    # Sequence advantages from scratch: reward each completion, group rows by prompt.
    prompts = tokenizer.batch_decode(prompt_ids, skip_special_tokens=True)
    texts = tokenizer.batch_decode(completion_ids, skip_special_tokens=True)
    answers = {f"{a}+{b}=?": str(a + b) for a, b in PROBLEMS}
    order = sorted(range(B), key=lambda i: prompts[i])
    rewards = torch.tensor([math_reward(texts[i], answers[prompts[i]]) for i in order])
    seq_adv = torch.empty(B)
    seq_adv[order] = group_advantages(rewards, G)

    # Weights from scratch with the core, on the policy as it was when the batch was scored.
    segments = [segment_completion_ids(tokenizer, ids[: int(n) - 1]) for ids, n in
                zip(completion_ids.tolist(), completion_mask.sum(1).tolist())]
    reasoning, answer = segments_to_masks(segments, P, P + C)
    weights = token_weights(policy_at_generation, torch.cat([prompt_ids, completion_ids], 1),
                            torch.cat([prompt_mask, completion_mask], 1), reasoning, answer,
                            method="oar-p:last", pad_token_id=tokenizer.pad_token_id)[:, P:]
    reasoning = reasoning[:, P:]

    assert sum(s is None for s in segments) == B // G  # the "no idea" rows
    assert (seq_adv.abs() > 0.1).all()
    assert (weights[reasoning] - 1).abs().max() > 0.05, "weights are all 1: the test would not see OAR"
    expected = seq_adv[:, None] * weights
    valid = completion_mask.bool()
    torch.testing.assert_close(adv[valid & reasoning], expected[valid & reasoning], rtol=1e-4, atol=1e-5)
    outside = valid & ~reasoning
    torch.testing.assert_close(adv[outside], seq_adv[:, None].expand(B, C)[outside], rtol=1e-4, atol=1e-5)
    log = trainer.state.log_history[0]
    assert log["oar/frac_no_answer"] == pytest.approx(0.25)
    assert 0 < log["oar/frac_suppressed"] < 1 and 0 < log["oar/frac_boosted"] < 1
    assert log["oar/attribution_seconds"] > 0


def test_trls_entropy_top_as_a_method_gives_zero_one_weights(tmp_path):
    """``oar_method="entropy-top"`` (TRL's top_entropy_quantile as an OAR method): on every row
    with an answer, each reasoning token's advantage is the sequence advantage or 0, and the
    tokens kept are the top ones by the policy's entropy (rho = 1 - oar_quantile)."""
    args = config(tmp_path=tmp_path, oar_method="entropy-top", oar_quantile=0.5, max_steps=1)
    model = tiny_model()
    policy_at_generation = copy.deepcopy(model).eval()
    trainer = run(OARGRPOTrainer, args, model=model)
    (inputs, _), = trainer.seen
    adv, completion_ids, completion_mask = inputs["advantages"], inputs["completion_ids"], inputs["completion_mask"]
    P = inputs["prompt_ids"].shape[1]
    tokenizer = char_tokenizer()
    segments = [segment_completion_ids(tokenizer, ids[: int(n) - 1]) for ids, n in
                zip(completion_ids.tolist(), completion_mask.sum(1).tolist())]
    reasoning, answer = segments_to_masks(segments, P, P + completion_ids.shape[1])
    ids = torch.cat([inputs["prompt_ids"], completion_ids], 1)
    mask = torch.cat([inputs["prompt_mask"], completion_mask], 1)
    weights = token_weights(policy_at_generation, ids, mask, reasoning, answer, method="entropy-top", quantile=0.5)
    reasoning = reasoning[:, P:]
    kept = 0
    for row in range(adv.shape[0]):
        if segments[row] is None:
            continue
        seq = adv[row, completion_mask[row].bool() & ~reasoning[row]][0]
        ratio = adv[row, reasoning[row]] / seq
        expected = weights[row, P:][reasoning[row]]
        assert set(expected.tolist()) <= {0.0, 1.0}
        torch.testing.assert_close(ratio, expected, rtol=1e-4, atol=1e-5)
        kept += int(expected.sum())
    assert 0 < kept < int(reasoning.sum()), "every token kept or none: the test would not see the mask"


# ----------------------------------------------------------------------------- parity with GRPO

def _final_params(trainer):
    return {k: v.detach().clone() for k, v in trainer.accelerator.unwrap_model(trainer.model).state_dict().items()}


@pytest.fixture(scope="module")
def stock_grpo(tmp_path_factory):
    return run(GRPOTrainer, config(GRPOConfig, tmp_path=tmp_path_factory.mktemp("grpo")))


def test_method_uniform_is_plain_grpo(stock_grpo, tmp_path):
    oar = run(OARGRPOTrainer, config(tmp_path=tmp_path, oar_method="uniform"))
    assert len(oar.seen) == len(stock_grpo.seen) == 2
    for (ours, our_loss), (theirs, their_loss) in zip(oar.seen, stock_grpo.seen):
        assert ours["advantages"].dim() == 1
        assert torch.equal(ours["advantages"], theirs["advantages"])
        assert torch.equal(our_loss, their_loss)
    for k, v in _final_params(stock_grpo).items():
        assert torch.equal(_final_params(oar)[k], v), k


def test_uniform_weights_match_grpo_and_oar_g_differs(stock_grpo, tmp_path, scorer_registry):
    from oar_lite.attribution import register_scorer, uniform_weights

    register_scorer("z-ones", uniform_weights)  # every weight 1, but through the scoring path ('uniform' skips it)
    uniform = run(OARGRPOTrainer, config(tmp_path=tmp_path / "u", oar_method="z-ones"))
    oar_g = run(OARGRPOTrainer, config(tmp_path=tmp_path / "g", oar_method="oar-g"))
    assert uniform.seen[0][0]["advantages"].dim() == 2
    theirs = _final_params(stock_grpo)
    for k, v in _final_params(uniform).items():  # [B, C] path with w = 1: the same update
        torch.testing.assert_close(v, theirs[k], rtol=1e-5, atol=1e-6)
    moved = sum(not torch.allclose(v, theirs[k], rtol=1e-5, atol=1e-6) for k, v in _final_params(oar_g).items())
    assert moved > 0, "OAR-G weights left the update unchanged"
    assert oar_g.seen[0][0]["advantages"].dim() == 2


# ----------------------------------------------------------------------------- refusals and validation

def test_liger_kernel_is_left_to_the_trainer_and_trls_checks():
    """OARConfig accepts use_liger_kernel (TRL checks it first); the trainer refuses it only where
    TRL's fused Liger loss replaces `_compute_loss` (tests/test_trl_matrix.py trains or refuses it)."""
    import trl.trainer.grpo_trainer as grpo_module

    from oar_lite.trl import LIGER_REPLACES_LOSS

    assert config(use_liger_kernel=True).use_liger_kernel
    assert LIGER_REPLACES_LOSS == hasattr(grpo_module.GRPOTrainer, "compute_liger_loss")


@pytest.mark.parametrize("kw, says", [
    (dict(loss_type="grpo", importance_sampling_level="sequence"),
     r"importance_sampling_level='sequence' with loss_type='grpo' \(GSPO; luspo needs it\).*exactly grpo's without "
     r"OAR.*Use importance_sampling_level='token'.*loss_type in \['cispo', 'vespo'\].*oar_method='uniform' for GSPO"),
    (dict(loss_type="luspo", importance_sampling_level="sequence"), r"loss_type='luspo'.*OAR would change nothing"),
    (dict(top_entropy_quantile=0.2), r"top_entropy_quantile=0\.2 with oar_method='oar-g' and oar_preserve_mass=True.*"
                                     r"Use top_entropy_quantile=1\.0 with OAR.*oar_preserve_mass=False"),
])
def test_settings_under_which_oar_would_change_nothing_are_refused(kw, says):
    with pytest.raises(ValueError, match=says):
        config(oar_method="oar-g", **kw)
    config(oar_method="uniform", **kw)  # plain GRPO: TRL's setting as it is
    config(oar_method="oar-g", oar_preserve_mass=False, **kw)  # no mass promised: OAR acts (the matrix trains it)


def test_sequence_level_is_taken_by_losses_whose_token_log_probs_carry_the_weights():
    for loss in ("cispo", "vespo"):
        assert config(oar_method="oar-p", loss_type=loss, importance_sampling_level="sequence").loss_type == loss


def _python(code: str):
    import subprocess
    import sys

    root = Path(__file__).resolve().parent.parent
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=root,
                          env={**os.environ, "PYTHONPATH": str(root)})


@pytest.mark.parametrize("missing", ["trl", "peft"])
def test_import_without_the_trl_extra_says_how_to_install_it(missing):
    proc = _python(f"import sys; sys.modules[{missing!r}] = None\nimport oar_lite.trl")
    assert proc.returncode != 0
    assert f"oar_lite.trl needs {missing}" in proc.stderr and "pip install 'oar-lite[trl]'" in proc.stderr, \
        proc.stderr[-2000:]


def test_trl_path_does_not_load_the_readable_trainer():
    proc = _python("import sys, oar_lite.trl\nprint(sorted(m for m in sys.modules if m.startswith('oar_lite')))")
    assert proc.returncode == 0, proc.stderr[-2000:]
    loaded = proc.stdout
    assert "'oar_lite.trl'" in loaded
    for module in ("oar_lite.train", "oar_lite.checkpoint", "oar_lite.evaluate", "oar_lite.course", "oar_lite.lab"):
        assert f"'{module}'" not in loaded, f"import oar_lite.trl loads {module}"


def test_plain_grpo_config_is_refused():
    with pytest.raises(ValueError, match="OARConfig"):
        OARGRPOTrainer(model=tiny_model(), reward_funcs=reward, args=config(GRPOConfig),
                       train_dataset=dataset(), processing_class=char_tokenizer())


@pytest.mark.parametrize("field, value, message", [
    ("oar_method", "oar-x", "oar_method"),
    ("oar_method", "oar-p:first", "oar_method"),
    ("oar_method", "entropy:last", "oar_method"),
    ("oar_quantile", 1.5, "oar_quantile"),
    ("oar_boost", -1.0, "oar_boost"),
    ("oar_floor", 2.0, "oar_floor"),
    ("oar_noise_std", -1e-3, "oar_noise_std"),
    ("oar_batch_size", 0, "oar_batch_size"),
    ("oar_token_budget", 0, "oar_token_budget"),
    ("oar_answer_formats", ["latex"], "oar_answer_formats"),
    ("oar_answer_formats", "boxed", "oar_answer_formats"),
])
def test_config_validation(field, value, message):
    with pytest.raises(ValueError, match=message):
        config(**{field: value})


def test_token_budget_reaches_the_credit_config():
    assert config(oar_method="oar-p").oar_credit.token_budget is None  # the device's budget
    credit = config(oar_method="oar-p", oar_token_budget=2048, oar_batch_size=8).oar_credit
    assert (credit.token_budget, credit.batch_size) == (2048, 8)


def test_config_defaults_and_modes():
    assert config(oar_method="oar-p").oar_method_spec == "oar-p:last"
    assert config(oar_method="oar-g").oar_method_spec == "oar-g:answer_mean"
    assert config(oar_method="oar-g:answer_joint").oar_method_spec == "oar-g:answer_joint"
    assert config(oar_method="inverted:oar-p:answer_mean").oar_method_spec == "inverted:oar-p:answer_mean"
    assert config(oar_method="entropy").oar_method_spec == "entropy"
    # the controls of issue 13 wrap any scorer, in the trainer as in token_weights
    assert config(oar_method="inverted:oar-g").oar_method_spec == "inverted:oar-g:answer_mean"
    assert config(oar_method="shuffled:oracle").oar_method_spec == "shuffled:oracle"
    for bad in ("inverted", "inverted:none", "inverted:oar-x", "inverted:uniform"):
        with pytest.raises(ValueError, match="oar_method"):
            config(oar_method=bad)
    with pytest.raises(ValueError, match=r"oar_method='none': unknown method 'none' \(plain GRPO is spelled 'uniform'\)"):
        config(oar_method="none")
    with pytest.raises(ValueError, match="no P_final mode"):
        config(oar_method="entropy:last")
    # one grammar on every surface: the mode is part of the method, no field of its own
    with pytest.raises(TypeError, match="oar_mode"):
        config(oar_method="oar-g", oar_mode="answer_joint")
    args = config()
    assert args.beta == 0.0 and args.oar_boost == 1.0  # TRL's KL coefficient and OAR's boost stay apart
    own = OARConfig.__dict__["__annotations__"]  # the fields OARConfig itself declares
    trl_fields = {f.name for f in dataclasses.fields(GRPOConfig)}
    assert own and all(name.startswith("oar_") and name not in trl_fields for name in own)


# ----------------------------------------------------------------------------- the shipped toy model

@pytest.mark.slow
@pytest.mark.skipif(not (toy.MODEL_DIR / "config.json").exists(), reason="the toy model is not built yet")
def test_toy_model_two_lora_steps_with_real_generation(tmp_path):
    from peft import LoraConfig


    model, tokenizer = toy.load_model()
    problems = toy.make_problems(4, seed=0, digits=4)  # long enough that groups disagree
    data = Dataset.from_list([{"prompt": p["prompt"], "answer": p["answer"]} for p in problems])

    def toy_reward(completions, answer, **kwargs):
        return toy.rewards(completions, answer)

    args = config(tmp_path=tmp_path, oar_method="oar-g", oar_answer_formats=list(toy.FORMATS), num_generations=4,
                  per_device_train_batch_size=8, max_completion_length=toy.max_new_tokens(4), learning_rate=1e-3)
    trainer = capturing(OARGRPOTrainer)(model=model, reward_funcs=toy_reward, args=args, train_dataset=data,
                                        processing_class=tokenizer,
                                        peft_config=LoraConfig(r=4, target_modules=["q_proj", "v_proj"]))
    trainer.seen = []
    before = snapshot(trainer)
    trainer.train()
    after = snapshot(trainer)
    assert all(torch.equal(before[k], after[k]) for k in before if "lora_" not in k)
    logs = [h for h in trainer.state.log_history if "oar/frac_no_answer" in h]
    assert len(logs) == 2 and min(h["oar/frac_no_answer"] for h in logs) < 1  # the toy model writes A=...
    if any(h["frac_reward_zero_std"] < 1 for h in logs):  # some group had a reward spread: a gradient
        assert any(not torch.equal(before[k], after[k]) for k in before if "lora_B" in k)
    assert all(inputs["advantages"].dim() == 2 for inputs, _ in trainer.seen)


def test_accuracy_reward_reads_text_and_chat_completions():
    from oar_lite.trl import accuracy_reward

    reward = accuracy_reward(["answer_is", "boxed"])
    completions = ["3 + 4 = 7. The answer is 7.", [{"role": "assistant", "content": "So \\boxed{1,234}"}],
                   "The answer is 8.", "no answer here"]
    assert reward(completions, answer=["7", 1234, "7", "7"], extra=[0] * 4) == [1.0, 1.0, 0.0, 0.0]
    with pytest.raises(ValueError, match="unknown or no answer formats"):
        accuracy_reward(["boxed", "latex"])
    with pytest.raises(ValueError, match="the string"):
        accuracy_reward("boxed")


def test_gsm8k_example_keeps_the_final_number_and_asks_with_shots():
    from oar_lite.course.problems import INSTRUCTION
    from oar_lite.course.problems import gsm8k_example

    row = gsm8k_example({"question": "Tom has 1,200 apples and buys 34. How many now?",
                         "answer": "He has 1200 + 34 = <<1200+34=1234>>1234 apples.\n#### 1,234"}, shots=2)
    assert row["answer"] == "1234"
    assert [m["role"] for m in row["prompt"]] == ["user", "assistant", "user", "assistant", "user"]
    assert row["prompt"][-1]["content"].startswith("Tom has 1,200 apples") and INSTRUCTION in row["prompt"][-1]["content"]
    with pytest.raises(ValueError, match="#### <number>"):
        gsm8k_example({"question": "q", "answer": "no marker"})


def test_same_seed_same_lora_adapter(tmp_path):
    """The adapter is made inside TRL's __init__; the seed is set before it (issue 15)."""
    from peft import LoraConfig

    adapters = []
    for noise in (1, 2):
        model = tiny_model()
        torch.manual_seed(noise)  # whatever the global RNG holds before the trainer is built
        lora = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], lora_dropout=0.0)
        trainer = build(OARGRPOTrainer, config(tmp_path=tmp_path / str(noise), oar_method="oar-g"), model=model,
                        peft_config=lora)
        adapters.append({k: v for k, v in snapshot(trainer).items() if "lora_A" in k})
    assert adapters[0] and all(torch.equal(adapters[0][k], adapters[1][k]) for k in adapters[0])


numbers = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-(10**40), 10**40),
                    st.sampled_from([0, 0.0, -0.0, 1, 2, 1e-300, 1e300]))


def oar_config(**kw):
    from oar_lite.trl import OARConfig

    method = "oar-p" if "oar_batch_size" in kw else "oar-g"  # a method that takes the field
    return OARConfig(output_dir="/tmp/oar-validation", report_to="none", use_cpu=True, oar_method=method, **kw)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(field=st.sampled_from(["oar_quantile", "oar_boost", "oar_floor", "oar_noise_std", "oar_batch_size"]),
       value=numbers)
def test_oar_config_property(field, value):
    from oar_lite.trl import OAR_NUMERIC_RANGES

    assert_refused_or_in_range(oar_config, "OARConfig", field, value, OAR_NUMERIC_RANGES)


@pytest.mark.parametrize("field", ["oar_quantile", "oar_boost", "oar_floor", "oar_noise_std", "oar_batch_size"])
@pytest.mark.parametrize("value", [math.nan, math.inf, -1.0])
def test_oar_config_refuses_nan_inf_negative(field, value):
    with pytest.raises(ValueError, match=rf"OARConfig\.{field}="):
        oar_config(**{field: value})


@pytest.mark.parametrize("field", ["learning_rate", "beta", "epsilon", "temperature", "top_p", "max_grad_norm",
                                   "weight_decay"])
@pytest.mark.parametrize("value", [math.nan, math.inf, -1.0])
def test_oar_config_refuses_bad_trl_fields(field, value):
    with pytest.raises(ValueError, match=rf"OARConfig\.{field}="):
        oar_config(**{field: value})


def test_oar_config_builds_the_credit_config():
    from oar_lite.trl import OARConfig

    args = OARConfig(output_dir="/tmp/oar-config", report_to="none", use_cpu=True, oar_method="oar-p",
                     oar_quantile=0.4, oar_boost=2.0, oar_batch_size=16)
    assert args.oar_credit == CreditConfig(method="oar-p:last", quantile=0.4, boost=2.0, batch_size=16)
    plain = OARConfig(output_dir="/tmp/oar-config", report_to="none", use_cpu=True, oar_method="uniform")
    assert plain.oar_credit is None
    oar_g = OARConfig(output_dir="/tmp/oar-config", report_to="none", use_cpu=True, oar_method="oar-g", oar_noise_std=0.0)
    assert oar_g.oar_credit == CreditConfig(method="oar-g:answer_mean", noise_std=0.0)  # OAR-P's batch size not passed
    args = OARConfig(output_dir="/tmp/oar-config", report_to="none", use_cpu=True, oar_method="oar-p", oar_batch_size=None)
    assert args.oar_credit.batch_size is None  # None: the token budget alone decides, as in CreditConfig


@pytest.mark.parametrize("kw, says", [
    (dict(oar_method="oar-p", oar_noise_std=0.5), r"oar_noise_std=0\.5, which oar_method='oar-p' does not take; "
                                                  r"it takes \['oar_batch_size'"),
    (dict(oar_method="oar-g", oar_batch_size=4), r"oar_batch_size=4, which oar_method='oar-g' does not take"),
    (dict(oar_method="oar-g", oar_token_budget=4096), r"oar_token_budget=4096, which oar_method='oar-g' does not take"),
    (dict(oar_method="uniform", oar_boost=9.0), r"oar_boost=9\.0, which oar_method='uniform' does not take; it takes "
                                                r"none of the oar_ settings"),
    (dict(oar_method="uniform", oar_answer_formats=["boxed"]), r"oar_answer_formats=\['boxed'\], which "
                                                               r"oar_method='uniform' does not take"),
    (dict(oar_method="oar-g", oar_boost=None), r"OARConfig\.oar_boost=None is out of range: expected a finite number"),
    (dict(oar_method="uniform", oar_answer_formats=["boxed"]),  # issue 47 item 4: plain GRPO looks for no answer
     r"oar_answer_formats=\['boxed'\], which oar_method='uniform' does not take; it takes none of the oar_ settings"),
])
def test_oar_config_refuses_a_setting_its_method_does_not_take(kw, says):
    from oar_lite.trl import OARConfig

    with pytest.raises(ValueError, match=says):
        OARConfig(output_dir="/tmp/oar-config", report_to="none", use_cpu=True, **kw)
    taken = {k: v for k, v in kw.items() if k == "oar_method"}  # the method alone is accepted
    assert OARConfig(output_dir="/tmp/oar-config", report_to="none", use_cpu=True, **taken).oar_method == kw["oar_method"]


def test_format_reward_counts_stated_answers_right_or_wrong():
    from oar_lite.trl import format_reward

    reward = format_reward(["answer_is"])
    assert reward.__name__ == "format"  # TRL logs it as rewards/format/mean
    completions = ["The answer is 7.", [{"role": "assistant", "content": "The answer is 8."}], "7"]
    assert reward(completions, answer=["7", "7", "7"]) == [1.0, 1.0, 0.0]


def test_uniformity_metrics_match_the_weights_of_the_batch(tmp_path):
    """The library's trainer logs the mean effective share of the scored completions and none of
    the lab's measures; the lab's `StudyTrainer` adds tau and the floor as the shipped runs logged
    them (`oar_lite.lab.uniformity`), on the same batch, and changes no other metric."""
    from oar_lite.lab.recipes import StudyTrainer
    from oar_lite.lab.uniformity import weight_uniformity

    model = tiny_model()
    policy_at_generation = copy.deepcopy(model).eval()
    trainer = run(OARGRPOTrainer, config(tmp_path=tmp_path / "library", oar_method="oar-p", max_steps=1), model=model)
    study = run(StudyTrainer, config(tmp_path=tmp_path / "lab", oar_method="oar-p", max_steps=1), model=tiny_model())
    (inputs, _), = trainer.seen
    tokenizer = char_tokenizer()
    prompt_ids, completion_ids = inputs["prompt_ids"], inputs["completion_ids"]
    P, C = prompt_ids.shape[1], completion_ids.shape[1]
    segments = [segment_completion_ids(tokenizer, ids[: int(n) - 1]) for ids, n in
                zip(completion_ids.tolist(), inputs["completion_mask"].sum(1).tolist())]
    reasoning, answer = segments_to_masks(segments, P, P + C)
    weights, scores = token_weights(policy_at_generation, torch.cat([prompt_ids, completion_ids], 1),
                                    torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], 1), reasoning,
                                    answer, method="oar-p:last", pad_token_id=tokenizer.pad_token_id,
                                    return_scores=True)
    rows = weight_uniformity(scores, [w[m] for w, m in zip(weights, reasoning)])
    log, lab = trainer.state.log_history[0], study.state.log_history[0]
    assert len(rows) == 6  # two groups of 4, one row each without an answer
    assert log["oar/effective_share"] == pytest.approx(sum(r["effective_share"] for r in rows) / 6, rel=1e-4)
    assert log["oar/effective_share"] < 1  # OAR-P's weights are not uniform here: the check can fail
    lab_only = {"oar/tau_mean", "oar/frac_tau_zero", "oar/frac_at_floor"}
    assert not lab_only & set(log)
    assert lab["oar/tau_mean"] == pytest.approx(sum(r["tau"] for r in rows) / 6, rel=1e-4, abs=1e-6)
    assert lab["oar/frac_tau_zero"] == pytest.approx(sum(r["tau"] == 0 for r in rows) / 6)
    tokens = sum(r["tokens"] for r in rows)
    assert lab["oar/frac_at_floor"] == pytest.approx(sum(r["at_floor"] * r["tokens"] for r in rows) / tokens, rel=1e-4)
    timed = ("oar/attribution_seconds", "step_time", "train_runtime", "train_samples_per_second",
             "train_steps_per_second")
    assert {k: v for k, v in lab.items() if k not in lab_only | set(timed)} == {
        k: v for k, v in log.items() if k not in timed}


@pytest.mark.slow
def test_heldout_callback_measures_at_its_steps_and_resumes(tmp_path):
    from peft import LoraConfig

    from oar_lite.evaluate import evaluate
    from oar_lite.checkpoint import read_jsonl
    from oar_lite.lab.recipes import HeldOutAccuracyCallback

    model, tokenizer = toy.load_model()
    problems = toy.make_problems(4, seed=0, digits=3)
    held = toy.make_problems(6, seed=1, digits=2)
    prompts, answers = [p["prompt"] for p in held], [p["answer"] for p in held]
    data = Dataset.from_list([{"prompt": p["prompt"], "answer": p["answer"]} for p in problems])
    options = dict(max_new_tokens=toy.max_new_tokens(2), formats=toy.FORMATS, add_special_tokens=True, seed=5)
    base = evaluate(model, tokenizer, [{"prompt": p, "answer": a} for p, a in zip(prompts, answers)], **options)
    path = tmp_path / "heldout.jsonl"

    def train(steps):
        callback = HeldOutAccuracyCallback(tokenizer, prompts, answers, at_steps=[0, 2], path=path,
                                           decodings={"greedy": (0.0, 1), "t1": (1.0, 2)}, **options)
        args = config(tmp_path=tmp_path, oar_method="uniform", num_generations=4, per_device_train_batch_size=8,
                      max_completion_length=toy.max_new_tokens(3), learning_rate=1e-3, max_steps=steps)
        trainer = OARGRPOTrainer(model=copy.deepcopy(model), reward_funcs=lambda completions, answer, **kw:
                                 toy.rewards(completions, answer), args=args, train_dataset=data,
                                 processing_class=tokenizer, callbacks=[callback],
                                 peft_config=LoraConfig(r=4, target_modules=["q_proj", "v_proj"]))
        trainer.train()
        return callback

    train(2)
    records = read_jsonl(path)
    assert [(r["step"], r["decoding"]) for r in records] == [(0, "greedy"), (0, "t1"), (2, "greedy"), (2, "t1")]
    assert records[0]["correct"] == base["correct"]  # step 0: the base model (LoRA starts at zero)
    assert [len(c) for c in records[1]["correct"]] == [2] * 6 and records[1]["samples"] == 2
    again = train(2)  # a second run over the same file: every step is already measured
    assert len(read_jsonl(path)) == 4 and again.done == {(0, "greedy"), (0, "t1"), (2, "greedy"), (2, "t1")}


# ----------------------------------------------------------------------------- the TRL guard
# OARGRPOTrainer's one override depends on TRL internals (oar_lite.trl.TRL_SUPPORTED). These
# tests run against the oldest (make test-trl-oldest) and the newest (make test, make
# test-newest) supported TRL and fail, naming the internal, the day a release changes one.

_GUARD = "OARGRPOTrainer relies on it (oar_lite/trl.py; docs/trl.md, 'TRL internals OAR relies on')"


def test_guard_trl_still_has_the_names_the_override_uses(tmp_path):
    import inspect

    from trl.models import unwrap_model_for_generation

    for name, params in {"_generate_and_score_completions": ["inputs"], "_compute_loss": ["model", "inputs"]}.items():
        method = getattr(GRPOTrainer, name, None)
        assert callable(method), f"TRL's GRPOTrainer has no method {name} any more; {_GUARD}"
        found = [p for p in inspect.signature(method).parameters if p != "self"]
        assert found[: len(params)] == params, f"GRPOTrainer.{name} now takes {found}, not {params}; {_GUARD}"
    taken = inspect.signature(unwrap_model_for_generation).parameters
    assert "gather_deepspeed3_params" in taken, f"trl.models.unwrap_model_for_generation takes {list(taken)}; {_GUARD}"
    args = config(tmp_path=tmp_path)
    for name in ("ds3_gather_for_generation", "gradient_checkpointing_kwargs", "use_liger_kernel", "seed",
                 "full_determinism", "log_completions"):
        assert hasattr(args, name), f"GRPOConfig has no field {name} any more; {_GUARD}"
    trainer = build(OARGRPOTrainer, args)
    for name in ("_metrics", "_logs", "_dist", "accelerator", "model_wrapped", "processing_class"):
        assert hasattr(trainer, name), f"GRPOTrainer instances have no attribute {name} any more; {_GUARD}"
    assert callable(getattr(trainer._dist, "summon_full_params", None)), f"GRPOTrainer._dist.summon_full_params; {_GUARD}"
    assert isinstance(trainer._metrics.get("train"), dict), f"GRPOTrainer._metrics['train'] is not a dict; {_GUARD}"
    assert "extra" in trainer._logs and "advantages" in trainer._logs, \
        f"GRPOTrainer._logs (the completions log) has keys {sorted(trainer._logs)}; {_GUARD}"


@pytest.fixture(scope="module")
def _one_step_oar_p(tmp_path_factory):
    out = tmp_path_factory.mktemp("oar-p-log")
    return run(OARGRPOTrainer, config(tmp_path=out, oar_method="oar-p", max_steps=1, log_completions=True))


@pytest.fixture
def one_step_oar_p(_one_step_oar_p):
    """One OAR-P step with TRL's completions log written (log_completions: a parquet file per step),
    trained once per module. Any `TrainingArguments` built by a test run since (its `_setup_devices`)
    clears accelerate's shared `AcceleratorState`, which this trainer's accelerator reads: found by
    `make test-random` (seed 18178). The accelerator is built again when that happened."""
    from accelerate.state import AcceleratorState

    if not AcceleratorState._shared_state:
        _one_step_oar_p.create_accelerator_and_postprocess()
    return _one_step_oar_p


def test_guard_trl_output_keeps_the_keys_and_sequence_advantages(one_step_oar_p):
    """What `_generate_and_score_completions` hands the override: the ids, masks and [B] advantages."""
    trainer = one_step_oar_p
    # TRL's own method (not the override), on a batch of the training data
    output = GRPOTrainer._generate_and_score_completions(trainer, [trainer.train_dataset[i % 2] for i in range(8)])
    for key in ("prompt_ids", "prompt_mask", "completion_ids", "completion_mask", "advantages"):
        assert key in output, f"GRPOTrainer._generate_and_score_completions' output has no {key!r} " \
                              f"(keys: {sorted(output)}); {_GUARD}"
    B = output["completion_ids"].shape[0]
    assert output["advantages"].shape == (B,), \
        f"TRL now hands out advantages of shape {tuple(output['advantages'].shape)}, not [B] = ({B},); {_GUARD}"


def test_guard_trl_loss_reads_token_advantages_per_token(one_step_oar_p):
    """TRL's `_compute_loss` reads [B, T] advantages token by token: [B] and the same values spread
    over [B, T] give the same loss and gradient, and moving one row's advantage from one token to
    another changes the gradient (a loss that averaged or dropped the T axis would not)."""
    trainer = one_step_oar_p
    inputs, _ = trainer.seen[0]
    model = trainer.model
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    B, C = inputs["completion_ids"].shape
    sequence = torch.linspace(-1.0, 1.0, B)

    def loss_and_grad(advantages):
        try:
            loss = GRPOTrainer._compute_loss(trainer, model, {**inputs, "advantages": advantages})
        except Exception as err:  # a shape error: the loss refuses [B, T]
            raise AssertionError(f"TRL's GRPOTrainer._compute_loss fails on advantages of shape "
                                 f"{tuple(advantages.shape)}: {err!r}; {_GUARD}") from err
        return loss.detach(), torch.cat([g.flatten() for g in torch.autograd.grad(loss, params)])

    loss_b, grad_b = loss_and_grad(sequence)
    loss_bt, grad_bt = loss_and_grad(sequence[:, None].expand(B, C).clone())
    torch.testing.assert_close(loss_bt, loss_b, msg=lambda m: f"[B, T] advantages equal along T give another loss "
                                                                f"than [B]: {m}; {_GUARD}")
    torch.testing.assert_close(grad_bt, grad_b, msg=lambda m: f"... another gradient than [B]: {m}; {_GUARD}")
    row = 0
    n = int(inputs["completion_mask"][row].sum())
    assert n >= 2
    first, last = torch.zeros(B, C), torch.zeros(B, C)
    first[row, 0], last[row, n - 1] = 1.0, 1.0
    _, grad_first = loss_and_grad(first)
    _, grad_last = loss_and_grad(last)
    assert grad_first.abs().max() > 0, f"an advantage on one token gives no gradient; {_GUARD}"
    assert not torch.allclose(grad_first, grad_last), \
        f"TRL's loss gives the same gradient whichever token of a row holds the advantage: it no longer reads " \
        f"[B, T] advantages per token, so OAR's token weights would be lost; {_GUARD}"


def test_completions_log_shows_the_advantages_oar_trained_with(one_step_oar_p):
    """The completions table (TRL's parquet file; also its console print and wandb table) has the
    column `oar_token_advantages`: per completion, the advantages the loss received. TRL's own
    `advantage` column keeps A_i: the value of the tokens OAR leaves alone (the answer's)."""
    import pandas as pd

    trainer = one_step_oar_p
    inputs, _ = trainer.seen[0]
    adv, mask = inputs["advantages"], inputs["completion_mask"]
    column = OARGRPOTrainer.TOKEN_ADVANTAGES_COLUMN
    (path,) = Path(trainer.args.output_dir, "completions").glob("*.parquet")
    table = pd.read_parquet(path)
    assert column in table.columns, f"the completions table has no {column!r}: {list(table.columns)}"
    assert len(table) == adv.shape[0]
    # TRL shuffles a generation batch before the loss sees it: match rows by prompt and completion
    tokenizer = char_tokenizer()
    prompts = tokenizer.batch_decode(inputs["prompt_ids"], skip_special_tokens=True)
    completions = tokenizer.batch_decode(inputs["completion_ids"], skip_special_tokens=True)
    row_of = {(p, c): i for i, (p, c) in enumerate(zip(prompts, completions))}
    assert len(row_of) == len(table)
    for prompt, completion, logged, sequence in zip(table["prompt"], table["completion"], table[column],
                                                    table["advantage"]):
        i = row_of[(prompt, completion)]
        trained = adv[i, : int(mask[i].sum())]
        torch.testing.assert_close(torch.tensor(list(logged), dtype=trained.dtype), trained, rtol=0, atol=5e-5)
        assert trained[-1].item() == pytest.approx(sequence, rel=1e-5, abs=1e-6)  # the end of text keeps A_i
    spread = [max(r) - min(r) for r in table[column]]
    assert max(spread) > 0.05, "every logged row is uniform: the test would not see a stale log"


def test_guard_advantage_hook_of_trl_7298_not_released_yet():
    """huggingface/trl#7298 (open) proposes `GRPOTrainer._transform_advantages`, called before TRL
    logs the advantages. When a supported release has it, OAR should reshape there, so that TRL's
    own `advantage` column shows what the loss received (docs/trl.md, 'The advantage hook')."""
    assert not hasattr(GRPOTrainer, "_transform_advantages"), (
        "TRL now has GRPOTrainer._transform_advantages (huggingface/trl#7298): move OARGRPOTrainer's reshaping "
        "into it where its arguments allow (it needs each completion's ids and masks) and update docs/trl.md")
