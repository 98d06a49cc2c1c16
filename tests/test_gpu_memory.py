"""benchmarks/gpu_memory.py: the estimate of notebook 07's GPU memory and time, checked by hand
on a tiny shape, and its parameter counts against transformers' and peft's own models."""
import pytest
import torch

from benchmarks import gpu_memory as gm

TINY = gm.ModelShape("tiny", layers=2, hidden=4, intermediate=8, heads=2, kv_heads=1, head_dim=2, vocab=10)


def test_parameter_count_by_hand_and_as_transformers_builds_it():
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    # embeddings 10 x 4 (tied); per layer q 16, k 8, v 8, o 16, MLP 3 x 32, two norms 8; final norm 4
    assert TINY.parameters == 40 + 2 * (16 + 8 + 8 + 16 + 96 + 8) + 4 == 348
    shape = dict(vocab_size=10, hidden_size=4, intermediate_size=8, num_hidden_layers=2, num_attention_heads=2,
                 num_key_value_heads=1, head_dim=2, tie_word_embeddings=True)
    assert sum(p.numel() for p in LlamaForCausalLM(LlamaConfig(**shape)).parameters()) == TINY.parameters
    qwen = gm.ModelShape("q", 2, 4, 8, 2, 1, 2, 10, qkv_bias=True)
    assert qwen.parameters == 348 + 2 * (4 + 2 + 2)  # q, k and v biases
    assert sum(p.numel() for p in Qwen2ForCausalLM(Qwen2Config(**shape)).parameters()) == qwen.parameters
    untied = gm.ModelShape("u", 2, 4, 8, 2, 1, 2, 10, tied=False)
    assert untied.parameters == 348 + 40
    # the shapes of the table: Qwen2.5-0.5B has 0.49 B parameters (0.36 B without embeddings)
    assert round(gm.MODELS["Qwen/Qwen2.5-0.5B-Instruct"].parameters / 1e6) == 494


def test_lora_count_by_hand_and_as_peft_builds_it():
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaConfig, LlamaForCausalLM

    # rank 1: q 4+4, k 4+2, v 4+2, o 4+4, gate 4+8, up 4+8, down 8+4 = 64 per layer
    assert TINY.lora_parameters(1) == 2 * 64 and TINY.lora_parameters(3) == 3 * 128
    model = LlamaForCausalLM(LlamaConfig(vocab_size=10, hidden_size=4, intermediate_size=8, num_hidden_layers=2,
                                         num_attention_heads=2, num_key_value_heads=1, head_dim=2))
    peft_model = get_peft_model(model, LoraConfig(r=3, target_modules="all-linear"))
    assert sum(p.numel() for p in peft_model.parameters() if p.requires_grad) == TINY.lora_parameters(3)


@pytest.fixture
def tiny(monkeypatch):
    monkeypatch.setitem(gm.MODELS, "tiny", TINY)
    return dict(model="tiny", lora_rank=1, prompts_per_step=1, num_generations=2, micro_batch=1,
                completion_length=3, prompt_length=2, oar_batch_size=2, token_budget=100, lora_dropout=False)


def test_estimate_by_hand(tiny):
    gpu = gm.GPU("unit", half_flops=1e6, bandwidth=1e3, efficiency=1.0, launch_per_layer=0.5)
    e = gm.estimate(gm.Setting(method="oar-g", **tiny), gpu)
    assert e["weights"] == 348 * 4
    assert e["lora"] == 128 * 16
    # KV per token: 2 (k, v) x 2 layers x width 2 x 2 bytes = 16; 2 sequences of 2 + 3 tokens
    assert e["generation"] == 2 * 5 * 16
    # activations per token and layer: 4h + 2kv + h + 4I = 16 + 4 + 4 + 32 = 56 values
    assert e["update"] == 1 * 5 * (2 * 4 + 56) * 2
    assert e["scoring"] == 2 * (5 * 16 + 3 * (2 * 56 * 2 + 4 * 4))
    assert e["peak"] == 348 * 4 + 128 * 16 + 2 * (80 + 720)
    decode = 3 * (348 * 4 / 1e3 + 2 * 0.5)
    assert e["seconds"] == pytest.approx(decode + 6 * 348 * 2 * 5 / 1e6 + 6 * 348 * 2 * 3 / 1e6)

    p = gm.estimate(gm.Setting(method="oar-p", **tiny), gpu)
    assert gm.oar_p_copies(gm.Setting(method="oar-p", **tiny)) == 2
    assert p["scoring"] == 2 * (5 * 16 + 3 * 56 * 2)
    assert p["seconds"] == pytest.approx(decode + 6 * 348 * 2 * 5 / 1e6 + 2 * 348 * 2 * 9 / 2 / 1e6)
    none = gm.estimate(gm.Setting(method="uniform", **tiny), gpu)
    assert none["scoring"] == 0 and none["peak"] == 348 * 4 + 128 * 16 + 640
    with_dropout = gm.estimate(gm.Setting(method="uniform", **{**tiny, "lora_dropout": True}), gpu)
    assert with_dropout["update"] == 5 * (2 * 4 + 56 + 6 * 4 + 8) * 2
    assert gm.oar_p_copies(gm.Setting(method="oar-p", **{**tiny, "token_budget": 7})) == 2
    assert gm.oar_p_copies(gm.Setting(method="oar-p", **{**tiny, "token_budget": 4})) == 1


def test_bad_settings_are_refused(tiny):
    with pytest.raises(ValueError, match="unknown model"):
        gm.Setting(model="gpt-9")
    with pytest.raises(ValueError, match="method"):
        gm.Setting(method="oar-x", **tiny)
    with pytest.raises(ValueError, match="micro_batch"):
        gm.Setting(method="uniform", **{**tiny, "micro_batch": 0})


def test_table_labels_estimates_and_shows_measurements_only_where_measured(tiny):
    settings = [gm.Setting(method="oar-g", **tiny), gm.Setting(method="uniform", **tiny)]
    measured = {"tiny|oar-g": {"peak_gib": 1.25, "seconds_per_step": 2.5, "gpu": "NVIDIA T4"}}
    text = gm.table(settings, measured)
    rows = text.splitlines()
    assert "estimate" in rows[0] and "measured" in rows[0] and len(rows) == 4
    assert "1.2 GiB" in rows[2] and "2.5 (NVIDIA T4)" in rows[2]
    assert rows[3].count("not measured") == 2


def test_the_shipped_page_is_what_the_script_writes(tmp_path):
    """docs/gpu.md is generated: rerun `python -m benchmarks.gpu_memory table --write docs/gpu.md`
    (with --measured when a GPU run has filled the measured columns) after changing the estimate.
    Everything but the two measured columns must be what the script writes now."""
    from pathlib import Path

    fresh = tmp_path / "gpu.md"
    gm.main(["table", "--write", str(fresh)])
    shipped = (Path(__file__).resolve().parent.parent / "docs" / "gpu.md").read_text()

    def without_measurements(text):
        return [line.rsplit(" | ", 2)[0] if line.startswith("| ") else line for line in text.splitlines()]

    assert without_measurements(shipped) == without_measurements(fresh.read_text())


def test_settings_are_notebook_07s_gpu_recipe():
    """The table's default setting is `oar_lite.lab.recipes.RECIPES["gpu"]` with the GPU's OAR-P budget."""
    from oar_lite.attribution.planning import DEFAULT_TOKEN_BUDGET
    from oar_lite.lab.recipes import RECIPES

    gpu, setting = RECIPES["gpu"], gm.Setting("smollm2")
    assert (setting.prompts_per_step, setting.num_generations, setting.micro_batch, setting.completion_length,
            setting.oar_batch_size, setting.token_budget) == (
        gpu["prompts_per_step"], gpu["num_generations"], gpu["micro_batch"], gpu["max_completion_length"],
        gpu["oar_batch_size"], DEFAULT_TOKEN_BUDGET["cuda"])
    assert gpu["gradient_checkpointing"]  # the update's estimate assumes it
