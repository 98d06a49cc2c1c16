"""Every TRL setting either trains with OAR acting or is refused at construction (docs/trl.md,
"What OAR does under each TRL setting"), modelled on TRL's own GRPO trainer tests
(tests/test_grpo_trainer.py: loss types, importance-sampling levels, iterations, several
rewards, LoRA and PeftModel, KL, reward scaling, masks, tools) on tiny models built here.

A case that trains runs `OARGRPOTrainer` and, with the same settings, plain GRPO
(``oar_method="uniform"``), one SGD step (two where the setting needs them) each. The recorder
checks that every row TRL's loss received carries the advantages OAR computed for it, A_i * w_t
over ``[B, C]`` (rows are matched by their ids: TRL shuffles and splits a generation batch),
with weights that are not all 1; and that the parameter change differs from plain GRPO's by more
than rounding. A refused case names what it refuses and what to use instead. Settings a TRL
release lacks are selected by version (``trl``: a specifier, stated in the case). Completions
come from a scripted ``rollout_func`` (tests/test_trl.py), so each group has right, wrong and
missing answers. Run by ``make test-slow`` and, against the oldest supported TRL, by
``make test-trl-oldest``.
"""
from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field

import pytest
import torch
import trl
from conftest import tiny_hybrid
from packaging.specifiers import SpecifierSet
from test_trl import CHARS, G, PROBLEMS, char_tokenizer, config, dataset, reward, scripted_rollout, tiny_model

from oar_lite.reward import math_reward
from oar_lite.trl import LIGER_REPLACES_LOSS, OARGRPOTrainer

pytestmark = pytest.mark.slow

TRL_VERSION = trl.__version__


class Recorder(OARGRPOTrainer):
    """`OARGRPOTrainer` that keeps, per scored row, the sequence advantage and OAR's weights,
    and every batch `_compute_loss` receives."""

    def _oar_weights(self, output):
        weights, reasoning, no_answer = super()._oar_weights(output)
        for row in range(weights.shape[0]):
            self.scored[row_key(output, row)] = dict(
                sequence=float(output["advantages"][row]), weights=weights[row].detach().clone(),
                reasoning=reasoning[row].clone(), tool_mask=output.get("tool_mask", [None] * weights.shape[0])[row])
        return weights, reasoning, no_answer

    def _compute_loss(self, model, inputs):
        self.received.append({k: v.detach().clone() if torch.is_tensor(v) else v for k, v in inputs.items()})
        return super()._compute_loss(model, inputs)


def row_key(batch, row) -> tuple:
    return tuple(batch["prompt_ids"][row].tolist()), tuple(batch["completion_ids"][row].tolist())


def tool_rollout(tokenizer):
    """rollout_func of a tool-calling batch: TRL's ``env_mask`` (its tool mask) is 0 on a tool's
    output. Completion 0 calls a tool whose output holds a wrong ``A=`` and then answers; completion 1's
    only ``A=`` is in the tool's output (no answer of its own); 2 answers without a tool; 3 none."""

    def rollout(prompts, trainer):
        prompt_ids = tokenizer(prompts)["input_ids"]
        completions, masks = [], []
        for i, prompt in enumerate(prompts):
            a, b = int(prompt[0]), int(prompt[2])
            parts = [[(f"{a} plus {b} ", 1), (f" calc says A={a + b + 2} ", 0), (f"so A={a + b}", 1)],
                     [(f"{a}+{b} is ", 1), (f" tool A={a + b} ", 0), (" done", 1)],
                     [(f"add {b} to {a} A={a + b}", 1)], [(f"no idea {a}", 1)]][i % G]
            ids, mask = [], []
            for text, own in parts:
                piece = tokenizer(text, add_special_tokens=False)["input_ids"]
                ids, mask = ids + piece, mask + [own] * len(piece)
            completions.append(ids + [tokenizer.eos_token_id])
            masks.append(mask + [1])
        return {"prompt_ids": prompt_ids, "completion_ids": completions, "logprobs": None, "env_mask": masks}

    return rollout


def truncating_rollout(tokenizer):
    """rollout_func whose third completion of each group has no end-of-text token: truncated."""
    scripted = scripted_rollout(tokenizer)

    def rollout(prompts, trainer):
        out = scripted(prompts, trainer)
        for i in range(2, len(prompts), G):
            out["completion_ids"][i] = out["completion_ids"][i][:-1]
        return out

    return rollout


def length_reward(completions, **kwargs):
    return [min(len(c), 20) / 20 for c in completions]


def saved_model(tmp_path):
    """The tiny Llama saved to a folder, its path: TRL loads the reference model of ``beta > 0`` from it."""
    path = tmp_path / "tiny-llama"
    tiny_model().save_pretrained(path)
    return str(path)


def peft_model(tmp_path):
    from peft import LoraConfig, get_peft_model

    return get_peft_model(tiny_model(), LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"],
                                                   lora_dropout=0.0))


def lora():
    from peft import LoraConfig

    return LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], lora_dropout=0.0)


@dataclass
class Case:
    """One TRL setting: ``settings`` for the config; ``refused``, a pattern of the refusal (None:
    it trains with OAR acting); ``trl``, the TRL versions that have the setting."""

    settings: dict = field(default_factory=dict)
    methods: tuple = ("oar-g",)
    refused: str | None = None
    trl: str = ""
    model: object = None  # a builder, given tmp_path; default the tiny Llama
    peft: object = None  # a builder of peft_config
    rollout: object = None  # a builder of rollout_func, default the scripted one
    rewards: tuple | None = None
    steps: int = 1


SEQUENCE_REFUSAL = r"importance_sampling_level='sequence'.*OAR would change nothing.*loss is exactly .* Use " \
                   r"importance_sampling_level='token'"
ENTROPY_REFUSAL = r"top_entropy_quantile=0\.5.*mass OAR preserves is not the mass trained\. Use top_entropy_quantile=1\.0"

CASES = {
    # loss types at token level (TRL's default level), as TRL's test_training_loss_types
    **{f"loss_{loss}": Case(dict(loss_type=loss)) for loss in ("grpo", "bnpo", "dr_grpo", "dapo", "sapo", "vespo")},
    "loss_cispo": Case(dict(loss_type="cispo", epsilon_high=5.0), methods=("oar-g", "oar-p")),
    "loss_luspo_token_level": Case(dict(loss_type="luspo")),
    # sequence-level importance sampling: one ratio per sequence (GSPO, luspo)
    "gspo": Case(dict(loss_type="grpo", importance_sampling_level="sequence"), refused=SEQUENCE_REFUSAL),
    "gspo_dapo": Case(dict(loss_type="dapo", importance_sampling_level="sequence"), refused=SEQUENCE_REFUSAL),
    "gspo_sapo": Case(dict(loss_type="sapo", importance_sampling_level="sequence"), refused=SEQUENCE_REFUSAL),
    "luspo": Case(dict(loss_type="luspo", importance_sampling_level="sequence"), refused=SEQUENCE_REFUSAL),
    "gspo_without_mass_preservation": Case(dict(loss_type="grpo", importance_sampling_level="sequence",
                                                oar_preserve_mass=False)),
    "cispo_sequence_level": Case(dict(loss_type="cispo", importance_sampling_level="sequence", epsilon_high=5.0),
                                 methods=("oar-g", "oar-p")),
    "vespo_sequence_level": Case(dict(loss_type="vespo", importance_sampling_level="sequence")),
    # more steps per generation batch
    "num_iterations_2": Case(dict(num_iterations=2), steps=2),
    "steps_per_generation_2": Case(dict(per_device_train_batch_size=G, steps_per_generation=2), steps=2),
    # rewards and their scaling
    "several_rewards": Case(dict(reward_weights=[1.0, 0.5]), rewards=(reward, length_reward)),
    "scale_rewards_batch": Case(dict(scale_rewards="batch")),
    "scale_rewards_none": Case(dict(scale_rewards="none")),
    # adapters and the KL term
    "lora": Case(peft=lora, methods=("oar-g", "oar-p")),
    "peft_model": Case(model=peft_model),
    "kl_beta": Case(dict(beta=0.1), model=saved_model),
    # masks
    "mask_truncated_completions": Case(dict(mask_truncated_completions=True), rollout=truncating_rollout),
    "entropy_filter": Case(dict(top_entropy_quantile=0.5), refused=ENTROPY_REFUSAL),
    "entropy_filter_without_mass_preservation": Case(dict(top_entropy_quantile=0.5, oar_preserve_mass=False)),
    "off_policy_mask": Case(dict(off_policy_mask_threshold=0.5, num_iterations=2), steps=2),
    "tools": Case(rollout=tool_rollout, methods=("oar-g", "oar-p")),
    # a hybrid Mamba/attention model (OAR's passes without prefix reuse)
    "hybrid_model": Case(model=lambda tmp_path: tiny_hybrid(dtype=torch.float32, vocab_size=4 + len(CHARS)),
                         methods=("oar-g", "oar-p")),
}


def _skip_unless_trl_has(case: Case) -> None:
    if case.trl and not SpecifierSet(case.trl).contains(TRL_VERSION, prereleases=True):
        pytest.skip(f"TRL {TRL_VERSION} has not this setting (trl{case.trl})")


def _train(case: Case, method: str, tmp_path, cls=Recorder):
    tokenizer = char_tokenizer()
    settings = {**case.settings}
    if method == "uniform":  # plain GRPO takes no oar_ setting
        settings = {k: v for k, v in settings.items() if not k.startswith("oar_")}
    args = config(tmp_path=tmp_path / method, oar_method=method, optim="sgd", learning_rate=0.1, max_steps=case.steps,
                  **settings)
    rollout = (case.rollout or scripted_rollout)(tokenizer)
    model = case.model(tmp_path) if case.model else tiny_model()
    trainer = cls(model=model, reward_funcs=list(case.rewards or [reward]), args=args,
                  train_dataset=dataset(), processing_class=tokenizer, rollout_func=rollout,
                  **({"peft_config": case.peft()} if case.peft else {}))
    trainer.scored, trainer.received = {}, []
    before = {k: v.detach().clone() for k, v in trainer.model.named_parameters() if v.requires_grad}
    trainer.train()
    after = dict(trainer.model.named_parameters())
    change = torch.cat([(after[k].detach() - v).flatten() for k, v in before.items()])
    return trainer, change


def assert_oar_acted(trainer, change, plain_change) -> None:
    """The loss received A_i * w_t for every row, some weights are not 1, and the update differs
    from plain GRPO's by more than rounding."""
    assert trainer.received, "TRL's loss was never called"
    reshaped = 0
    for batch in trainer.received:
        advantages = batch["advantages"]
        assert advantages.dim() == 2 and advantages.shape == batch["completion_ids"].shape, advantages.shape
        for row in range(advantages.shape[0]):
            scored = trainer.scored[row_key(batch, row)]
            expected = scored["sequence"] * scored["weights"].to(advantages.device)
            torch.testing.assert_close(advantages[row], expected, rtol=1e-5, atol=1e-6)
            loss_tokens = batch["completion_mask"][row].bool() & scored["reasoning"].to(advantages.device)
            if abs(scored["sequence"]) > 1e-6 and loss_tokens.any():
                reshaped += int((scored["weights"][loss_tokens] - 1).abs().max() > 0.05)
    assert reshaped > 0, "no row the loss trained on had weights other than 1"
    assert plain_change.abs().max() > 0, "plain GRPO did not move the parameters: the comparison would say nothing"
    relative = float((change - plain_change).norm() / plain_change.norm())
    assert relative > 1e-3, f"the update differs from plain GRPO's by {relative:.2e} of its size: OAR did not act"


@pytest.mark.parametrize("name", list(CASES))
def test_trl_setting_trains_with_oar_acting_or_is_refused(name, tmp_path):
    case = CASES[name]
    _skip_unless_trl_has(case)
    if case.refused:
        with pytest.raises(ValueError, match=case.refused):
            config(tmp_path=tmp_path, oar_method="oar-g", **case.settings)
        config(tmp_path=tmp_path, oar_method="uniform", **case.settings)  # plain GRPO takes it as TRL does
        return
    _, plain_change = _train(case, "uniform", tmp_path)
    for method in case.methods:
        trainer, change = _train(case, method, tmp_path)
        assert_oar_acted(trainer, change, plain_change)
        if name == "tools":
            assert_tool_output_left_alone(trainer)
        if name == "mask_truncated_completions":
            truncated = [k for k, s in trainer.scored.items() if k[1][-1] != char_tokenizer().eos_token_id
                         and char_tokenizer().eos_token_id not in k[1]]
            assert truncated and all(torch.equal(trainer.scored[k]["weights"], torch.ones_like(
                trainer.scored[k]["weights"])) for k in truncated)  # not in the loss: not scored


def assert_tool_output_left_alone(trainer) -> None:
    """A tool's output keeps weight 1 and is out of the reasoning whose mass is kept; an ``A=``
    found only in a tool's output is no answer (that row keeps A_i on every token)."""
    tool_rows = only_tool_answer = 0
    for (prompt, completion), scored in trainer.scored.items():
        tool = scored["tool_mask"]
        if tool is None or bool(tool.bool().all()):
            continue
        tool = tool.bool().to(scored["weights"].device)
        tool_rows += 1
        assert torch.equal(scored["weights"][~tool], torch.ones(int((~tool).sum()))), "a tool token was reshaped"
        assert not (scored["reasoning"] & ~tool).any()
        own = scored["weights"][scored["reasoning"]]
        if own.numel():
            assert float(own.sum()) == pytest.approx(own.numel(), abs=1e-3)  # mass over the model's own tokens
        else:
            only_tool_answer += 1
            assert torch.equal(scored["weights"], torch.ones_like(scored["weights"]))
    assert tool_rows == 2 * len(PROBLEMS) and only_tool_answer == len(PROBLEMS)


def test_gspo_is_exactly_grpo_under_mass_preservation(tmp_path):
    """Why GSPO is refused: TRL's own loss at sequence level, on a recorded OAR batch, gives the
    same loss and gradient with OAR's [B, C] advantages as with the [B] ones it reshaped."""
    trainer, _ = _train(CASES["loss_grpo"], "oar-g", tmp_path)
    batch = trainer.received[0]
    model = trainer.model
    params = [p for p in model.parameters() if p.requires_grad]
    sequence = torch.tensor([trainer.scored[row_key(batch, r)]["sequence"] for r in range(len(batch["advantages"]))])
    trainer.importance_sampling_level = "sequence"  # as OARConfig would refuse it

    def loss_and_grad(advantages):
        loss = trl.GRPOTrainer._compute_loss(trainer, model, {**batch, "advantages": advantages})
        return loss.detach(), torch.cat([g.flatten() for g in torch.autograd.grad(loss, params)])

    oar_loss, oar_grad = loss_and_grad(batch["advantages"])
    grpo_loss, grpo_grad = loss_and_grad(sequence)
    torch.testing.assert_close(oar_loss, grpo_loss, rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(oar_grad, grpo_grad, rtol=1e-4, atol=1e-7)
    trainer.importance_sampling_level = "token"  # at token level the same advantages change the gradient
    assert (loss_and_grad(batch["advantages"])[1] - loss_and_grad(sequence)[1]).norm() > 1e-3 * grpo_grad.norm()


def test_liger_refused_only_where_trl_replaces_the_loss(tmp_path, monkeypatch):
    """TRL < 1.14 computes the loss with Liger's fused GRPO loss (one advantage per sequence):
    refused there, after TRL's own errors (liger-kernel not installed comes first). From 1.14,
    Liger leaves `_compute_loss` to read OAR's advantages: accepted, and OAR acts (the layer
    kernels themselves, which need liger-kernel and a GPU, are left out: transformers' apply
    step is replaced by a no-op)."""
    import trl.trainer.grpo_trainer as grpo_module

    tokenizer = char_tokenizer()
    args = config(tmp_path=tmp_path, oar_method="oar-g", use_liger_kernel=True, max_steps=1)
    build = dict(model=tiny_model(), reward_funcs=reward, args=args, train_dataset=dataset(), processing_class=tokenizer,
                 rollout_func=scripted_rollout(tokenizer))
    if LIGER_REPLACES_LOSS:
        assert SpecifierSet("<1.14").contains(TRL_VERSION)
        from transformers.utils import is_liger_kernel_available

        if not is_liger_kernel_available():
            with pytest.raises(ImportError, match="liger"):  # TRL's own error keeps its precedence
                OARGRPOTrainer(**build)

        class FusedLoss:  # stands for liger-kernel's loss, so that TRL's checks pass
            def __init__(self, **kwargs):
                pass

        monkeypatch.setattr(grpo_module, "is_liger_kernel_available", lambda: True)
        monkeypatch.setattr(grpo_module, "LigerFusedLinearGRPOLoss", FusedLoss, raising=False)
        with pytest.raises(ValueError, match=r"use_liger_kernel=True is not supported.*replaces "
                                             r"GRPOTrainer\._compute_loss.*trl>=1\.14"):
            OARGRPOTrainer(**build)
        return
    assert SpecifierSet(">=1.14").contains(TRL_VERSION)
    import transformers.trainer

    monkeypatch.setattr(transformers.trainer, "apply_liger_kernel", lambda model, config: None)
    plain = Case()
    _, plain_change = _train(plain, "uniform", tmp_path)
    liger = Case(dict(use_liger_kernel=True))
    trainer, change = _train(liger, "oar-g", tmp_path / "liger")
    assert trainer.args.use_liger_kernel
    assert_oar_acted(trainer, change, plain_change)


def test_matrix_covers_every_loss_type_of_this_trl():
    """The matrix names each loss type this TRL's GRPOConfig describes ("'name': ..." in the field's
    help; a new one is a new case)."""
    import re

    from trl import GRPOConfig

    (help_text,) = [f.metadata["help"] for f in dataclasses.fields(GRPOConfig) if f.name == "loss_type"]
    described = set(re.findall(r"'(\w+)'(?: \(default\))?:", help_text))
    covered = {c.settings.get("loss_type") for c in CASES.values()}
    assert len(described) >= 8 and described <= covered, (described, described - covered)
