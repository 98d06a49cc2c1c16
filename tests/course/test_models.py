"""Model loaders: SmolLM2 offline from its wheel (converted once, then cached), and the
hub loader's offline error path (no network is touched)."""
import contextlib
import json
import os

import pytest
import torch

import oar_lite.course.models as models
from oar_lite.course.models import (
    SMOLLM2_INSTALL,
    OfflineModelError,
    cache_root,
    default_dtype,
    hub_reachable,
    load_hub_model,
    load_smollm2,
    smollm2_cache_path,
)
from oar_lite.rollout import sample_completions
from oar_lite.segment import segment_completion_ids

try:
    models.smollm2_gguf_path()
    HAVE_WHEEL = True
except FileNotFoundError:
    HAVE_WHEEL = False
needs_wheel = pytest.mark.skipif(not HAVE_WHEEL, reason=f"SmolLM2 wheel not installed: {SMOLLM2_INSTALL}")


# ----------------------------------------------------------------------------- SmolLM2

@contextlib.contextmanager
def one_thread():
    """Run the 135M model on one thread. On a machine whose cores other jobs also use, two
    OpenMP threads wait on each other and run 4-30x slower than one (benchmarks/RESULTS.md)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@pytest.fixture(scope="session")
def smollm2_cache(tmp_path_factory):
    """A fresh cache folder holding one conversion of the GGUF file (about 20-30 s, once)."""
    folder = tmp_path_factory.mktemp("oar-lite-cache")
    with one_thread():
        model, tokenizer = load_smollm2(cache=folder)
    return folder, model, tokenizer


@pytest.fixture
def smollm2(smollm2_cache):
    with one_thread():
        yield smollm2_cache


@pytest.mark.slow
@needs_wheel
def test_conversion_writes_a_cache_and_the_second_load_uses_it(smollm2, monkeypatch):
    folder, first, _ = smollm2
    cached = smollm2_cache_path(folder)
    assert (cached / "model.safetensors").is_file() and (cached / "tokenizer.json").is_file()
    assert json.loads((cached / "oar_lite_source.json").read_text())["file"] == models.SMOLLM2_GGUF

    def no_conversion(*args, **kwargs):
        raise AssertionError("converted the GGUF file again instead of loading the cache")

    monkeypatch.setattr(models, "_convert_gguf", no_conversion)
    second, tokenizer = load_smollm2(cache=folder)  # would raise if it converted
    with pytest.raises(AssertionError, match="converted the GGUF"):
        load_smollm2(cache=folder, refresh=True)  # the patch is live: refresh does convert

    ids = torch.tensor([tokenizer("The answer is 42.")["input_ids"]])
    with torch.no_grad():
        torch.testing.assert_close(second(ids).logits, first(ids).logits, rtol=0, atol=0)
    assert sum(p.numel() for p in second.parameters()) == 134_515_008
    assert second.dtype == torch.float32 and not second.training


@pytest.mark.slow
@needs_wheel
def test_tokenizer_has_a_distinct_pad_token_and_the_chat_template(smollm2):
    _, model, tok = smollm2
    assert tok.eos_token == "<|im_end|>"
    assert tok.pad_token_id is not None and tok.pad_token_id != tok.eos_token_id
    assert model.config.pad_token_id == tok.pad_token_id == model.generation_config.pad_token_id
    text = tok.apply_chat_template([{"role": "user", "content": "2+2?"}], tokenize=False, add_generation_prompt=True)
    assert text.endswith("<|im_start|>assistant\n") and "<|im_start|>user\n2+2?<|im_end|>" in text
    # Digits are single tokens: "1234" is four tokens, as in SmolLM2's own tokenizer.
    assert len(tok("1234", add_special_tokens=False)["input_ids"]) == 4


@pytest.mark.slow
@needs_wheel
def test_left_padded_batch_generates_what_each_prompt_generates_alone(smollm2):
    _, model, tok = smollm2
    system = {"role": "system", "content": "Be brief."}
    prompts = [tok.apply_chat_template([system, {"role": "user", "content": q}], tokenize=False, add_generation_prompt=True)
               for q in ("What is 2 + 3?", "Tom has 4 apples and buys 5 more. How many apples does he have now?")]
    batch = sample_completions(model, tok, prompts, max_new_tokens=6, temperature=0, add_special_tokens=False)
    assert batch.input_ids.shape[0] == 2 and batch.prompt_length > len(tok(prompts[0])["input_ids"])
    for row, prompt in enumerate(prompts):
        alone = sample_completions(model, tok, [prompt], max_new_tokens=6, temperature=0, add_special_tokens=False)
        assert batch.completion_ids[row] == alone.completion_ids[0]


@pytest.mark.slow
@needs_wheel
def test_token_segments_of_a_real_completion(smollm2):
    _, _, tok = smollm2
    text = "The pens cost 4 * 3 = 12 dollars.\nShe gets back 20 - 12 = 8 dollars.\nThe answer is 8."
    ids = tok(text, add_special_tokens=False)["input_ids"]
    seg = segment_completion_ids(tok, ids)
    assert tok.decode(ids[seg.answer]) == "8"
    assert tok.decode(ids[seg.reasoning]).endswith("dollars.\n")
    assert segment_completion_ids(tok, tok("It costs 12 dollars.", add_special_tokens=False)["input_ids"]) is None


def test_missing_wheel_error_prints_the_install_command(monkeypatch):
    monkeypatch.setattr(models.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(FileNotFoundError) as info:
        load_smollm2(cache="/nonexistent")
    assert SMOLLM2_INSTALL in str(info.value) and "--no-deps" in str(info.value)


def test_cache_root_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("OAR_LITE_CACHE", str(tmp_path / "c"))
    assert cache_root() == tmp_path / "c"
    assert cache_root(tmp_path / "x") == tmp_path / "x"
    monkeypatch.delenv("OAR_LITE_CACHE")
    assert cache_root() == cache_root(os.path.expanduser("~/.cache/oar-lite"))


def test_a_cache_from_another_gguf_is_not_used(tmp_path):
    fingerprint = {"file": "a.gguf", "bytes": 10, "package_version": "0.1.2"}
    for name in ("model.safetensors", "config.json"):
        (tmp_path / name).write_text("{}")
    (tmp_path / "oar_lite_source.json").write_text(json.dumps(fingerprint))
    assert models._cache_is_valid(tmp_path, fingerprint)
    assert not models._cache_is_valid(tmp_path, {**fingerprint, "bytes": 11})
    (tmp_path / "model.safetensors").unlink()
    assert not models._cache_is_valid(tmp_path, fingerprint)


@pytest.mark.parametrize("kwargs, needle", [({"device": "no-such-device"}, "device"), ({"dtype": torch.int64}, "dtype")])
def test_load_smollm2_checks_arguments(kwargs, needle):
    with pytest.raises(ValueError, match=needle):
        load_smollm2(**kwargs)


# ----------------------------------------------------------------------------- hub models

def _expect_offline_error(name, cache):
    with pytest.raises(OfflineModelError) as info:
        load_hub_model(name, cache_dir=cache)
    message = str(info.value)
    assert name in message
    assert "load_smollm2" in message and "oar_lite.course.toy.load_model" in message
    return message


@pytest.mark.timeout(60)
def test_hub_loader_offline_mode_names_the_offline_alternatives(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(models, "hub_reachable", lambda *a, **k: pytest.fail("probed the network while offline"))
    message = _expect_offline_error("Qwen/Qwen2.5-0.5B-Instruct", tmp_path)
    assert "offline mode" in message


@pytest.mark.timeout(60)
def test_hub_loader_without_network_fails_instead_of_waiting(monkeypatch, tmp_path):
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(models, "hub_reachable", lambda *a, **k: False)
    message = _expect_offline_error("Qwen/Qwen2.5-Math-1.5B-Instruct", tmp_path)
    assert "not reachable" in message


def test_hub_probe_reports_an_unreachable_endpoint(monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # discard port: nothing listens
    assert hub_reachable(timeout=1.0) is False


def test_default_dtype_follows_the_hardware(monkeypatch):
    assert default_dtype("cpu") == torch.float32
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    assert default_dtype("cuda") == torch.bfloat16
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)
    assert default_dtype("cuda:0") == torch.float16


def test_hub_loader_checks_the_name():
    with pytest.raises(ValueError, match="hub id"):
        load_hub_model("not-a-hub-id")


# ----------------------------------------------------------------------------- damaged model files (issue 15)

def _toy_copy(tmp_path):
    import shutil

    from oar_lite.course import toy

    folder = tmp_path / "toy-model"
    shutil.copytree(toy.MODEL_DIR, folder)
    return folder


def _nan_weights(folder):
    from safetensors.torch import load_file, save_file

    weights = load_file(folder / "model.safetensors")
    name = sorted(weights)[0]
    weights[name] = torch.full_like(weights[name], float("nan"))
    save_file(weights, folder / "model.safetensors", metadata={"format": "pt"})


def test_a_truncated_toy_model_names_the_folder(tmp_path):
    from oar_lite.course import toy

    folder = _toy_copy(tmp_path)
    data = (folder / "model.safetensors").read_bytes()
    (folder / "model.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match=rf"{folder}.*damaged.*restore"):
        toy.load_model(folder)


def test_nan_weights_in_the_toy_model_name_the_file(tmp_path):
    from oar_lite.course import toy

    folder = _toy_copy(tmp_path)
    _nan_weights(folder)
    with pytest.raises(ValueError, match=rf"{folder / 'model.safetensors'} holds NaN"):
        toy.load_model(folder)


@needs_wheel
@pytest.mark.parametrize("damage", ["nan", "truncate"])
def test_a_tampered_smollm2_cache_names_the_file_and_the_fix(tmp_path, damage):
    """A cache folder that passes the fingerprint check but holds damaged weights."""
    from conftest import char_tokenizer, tiny_llama

    cache = tmp_path / "cache"
    folder = smollm2_cache_path(cache)
    tiny_llama(dtype=torch.float32).save_pretrained(folder)
    tokenizer = char_tokenizer()
    tokenizer.chat_template = "{% for m in messages %}{{ m['content'] }}{% endfor %}"
    tokenizer.save_pretrained(folder)
    (folder / "oar_lite_source.json").write_text(json.dumps(models._gguf_fingerprint(models.smollm2_gguf_path())))
    load_smollm2(cache=cache)  # the intact stand-in loads
    if damage == "nan":
        _nan_weights(folder)
    else:
        data = (folder / "model.safetensors").read_bytes()
        (folder / "model.safetensors").write_bytes(data[:100])
    with pytest.raises(ValueError, match=r"refresh=True"):
        load_smollm2(cache=cache)
