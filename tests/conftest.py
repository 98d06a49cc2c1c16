"""Shared fixtures: tiny deterministic causal LMs built in-process (nothing downloaded)."""
import isolation  # first: the session's HOME and caches are set before any library reads them

isolation.install()
from isolation import pytest_make_collect_report, pytest_runtest_call, pytest_runtest_setup, pytest_runtest_teardown  # noqa: F401

import contextlib
import dataclasses
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import pytest
import torch
from hypothesis import settings as hypothesis_settings
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

import oar_lite as ol

# Property tests draw the same examples on every run, so a CI result can be reproduced; set
# HYPOTHESIS_PROFILE=explore to draw fresh ones (and add what fails as an @example).
hypothesis_settings.register_profile("reproducible", derandomize=True)
hypothesis_settings.register_profile("explore", derandomize=False)
hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "reproducible"))
from oar_lite.course import toy
from oar_lite.lab import scorers as _lab_scorers  # noqa: F401  (every test sees the same registry: the lab's methods)
from oar_lite.train import TrainConfig

torch.set_num_threads(2)

VOCAB = 40
PAD = 0


def tiny_llama(seed: int = 0, dtype=torch.float64) -> LlamaForCausalLM:
    """A 2-layer Llama with a 40-token vocabulary (float64 so exactness checks are tight)."""
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                      pad_token_id=PAD, bos_token_id=1, eos_token_id=2)
    return LlamaForCausalLM(cfg).to(dtype).eval()


def tiny_gpt2(seed: int = 0, dtype=torch.float64) -> GPT2LMHeadModel:
    """A 2-layer GPT-2 (learned absolute positions, a different attention implementation)."""
    torch.manual_seed(seed)
    cfg = GPT2Config(vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=4, n_positions=128,
                     bos_token_id=1, eos_token_id=2, pad_token_id=PAD)
    return GPT2LMHeadModel(cfg).to(dtype).eval()


def tiny_qwen2(seed: int = 0, dtype=torch.float64):
    """A 2-layer Qwen2 (biases on q, k, v, grouped keys and values): another model type of
    `oar_lite.attribution.kv.ARCHITECTURES`."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    cfg = Qwen2Config(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128, pad_token_id=PAD)
    return Qwen2ForCausalLM(cfg).to(dtype).eval()


def tiny_hybrid(seed: int = 0, dtype=torch.float64, vocab_size: int = VOCAB, pad_token_id: int = PAD):
    """A 3-block Nemotron-H: a Mamba-2 block, an attention block and an MLP block
    (``hybrid_override_pattern="M*-"``), in transformers' reference PyTorch kernels (no
    mamba_ssm or causal_conv1d needed). Its cache holds a recurrent and a convolution state
    (``LinearAttentionLayer``), which cannot be cut back or row-selected like keys and values."""
    import warnings

    from transformers import NemotronHConfig, NemotronHForCausalLM

    torch.manual_seed(seed)
    cfg = NemotronHConfig(vocab_size=vocab_size, hidden_size=32, intermediate_size=64, num_hidden_layers=3,
                          hybrid_override_pattern="M*-", num_attention_heads=4, num_key_value_heads=2, head_dim=8,
                          mamba_num_heads=4, mamba_head_dim=8, ssm_state_size=8, n_groups=1, mamba_chunk_size=16,
                          max_position_embeddings=128, pad_token_id=pad_token_id, bos_token_id=1, eos_token_id=2,
                          tie_word_embeddings=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return NemotronHForCausalLM(cfg).to(dtype).eval()


@pytest.fixture(scope="session")
def tok():
    """The toy world's tokenizer."""
    return toy.build_tokenizer()


@pytest.fixture(scope="session")
def shipped():
    """The shipped toy model and its tokenizer."""
    return toy.load_model()


@pytest.fixture(scope="session")
def llama():
    return tiny_llama()


@pytest.fixture(scope="session", params=["llama", "gpt2"])
def any_model(request):
    return tiny_llama() if request.param == "llama" else tiny_gpt2()


@pytest.fixture
def sequence():
    """One sequence [T=30]: prompt 0..4, reasoning 5..21, conclude 22..23, answer 24..26, rest."""
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(3, VOCAB, (30,), generator=g)
    return ids, slice(5, 22), slice(24, 27)


CHARS = list("0123456789+=A ,.abcdefghijklmnopqrstu")  # 37 characters + 3 specials = VOCAB


def char_tokenizer():
    """A character-level PreTrainedTokenizerFast over `CHARS` with <pad>=0, <s>=1, </s>=2."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "<s>": 1, "</s>": 2}
    vocab.update({c: i + 3 for i, c in enumerate(CHARS)})
    assert len(vocab) == VOCAB
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<pad>"))
    tok.pre_tokenizer = pre_tokenizers.Split("", behavior="isolated")
    tok.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", bos_token="<s>", eos_token="</s>")


@pytest.fixture(scope="session")
def chars():
    return char_tokenizer()


def load_script(name: str):
    """``scripts/<name>.py`` as a module (scripts/ is not a package)."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location(name, Path(__file__).resolve().parents[1] / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def recorded(module: torch.nn.Module, what):
    """Inside the block, every forward call of ``module`` appends ``what(inputs, output)`` to
    the list it yields (e.g. how many positions the layer ran on); the hook is removed after."""
    seen = []
    hook = module.register_forward_hook(lambda _module, args, out: seen.append(what(args, out)))
    try:
        yield seen
    finally:
        hook.remove()


def assert_refused_or_in_range(make, owner: str, field: str, value, ranges: dict) -> None:
    """``make(**{field: value})`` either refuses the value with a message naming
    ``owner.field`` and what is expected, or keeps a finite value inside ``ranges[field]``
    (`oar_lite.settings.check_number`'s keywords: low, high, low_open, high_open, integer)."""
    import math

    try:
        config = make(**{field: value})
    except ValueError as err:
        assert f"{owner}.{field}=" in str(err) and "expected" in str(err)
        return
    kept = getattr(config, field)
    assert math.isfinite(kept)
    allowed = ranges[field]
    low, high = allowed.get("low"), allowed.get("high")
    if low is not None:
        assert kept > low if allowed.get("low_open") else kept >= low
    if high is not None:
        assert kept < high if allowed.get("high_open") else kept <= high
    if allowed.get("integer"):
        assert isinstance(kept, int)


def rows_alone(score, model, ids, attn, reasoning, answer, **kw):
    """``score`` (`ol.perturbation_scores` or `ol.gradient_scores`) on each row of a padded
    batch alone, its padding stripped and its spans shifted: the per-row path the batched
    scorers must equal. A list of ``[R_i]`` score tensors."""
    out = []
    for i in range(ids.shape[0]):
        valid = ol.mask_to_span(attn[i].bool())
        off = valid.start
        out.append(score(model, ids[i, valid], slice(reasoning[i].start - off, reasoning[i].stop - off),
                         slice(answer[i].start - off, answer[i].stop - off), **kw))
    return out


def padded_rows(model_dtype_rows, left, right, seed=3, answer_lengths=(3, 3, 3)):
    """Three random rows with ``left`` / ``right`` padding each; spans into the padded rows."""
    g = torch.Generator().manual_seed(seed)
    lengths = [26, 30, 22]
    T = max(n + l + r for n, l, r in zip(lengths, left, right))
    ids = torch.full((3, T), PAD)
    attn = torch.zeros((3, T), dtype=torch.long)
    reasoning, answer = [], []
    for i, (n, p) in enumerate(zip(lengths, left)):
        ids[i, p:p + n] = torch.randint(3, VOCAB, (n,), generator=g)
        attn[i, p:p + n] = 1
        reasoning.append(slice(p + 4 + i, p + n - 6))
        answer.append(slice(p + n - 1 - answer_lengths[i], p + n - 1))
    return ids, attn, reasoning, answer


def marked(tok, ex, scores):
    """The reasoning tokens (text) whose score is the row's maximum, in order."""
    ids = ex["input_ids"][ex["reasoning"]]
    top = scores.max()
    return [tok.decode([int(i)]) for i, s in zip(ids, scores) if s == top and not bool((scores == top).all())]


@pytest.fixture
def scorer_registry():
    """The method registry (`oar_lite.attribution.registry`), as it was again after the test: a
    test registers its own scorers freely, and no other test sees them."""
    from oar_lite.attribution import registry

    saved = dict(registry.SCORERS), dict(registry.BATCHED), dict(registry.WEIGHTINGS)
    yield registry
    for live, old in zip((registry.SCORERS, registry.BATCHED, registry.WEIGHTINGS), saved):
        live.clear()
        live.update(old)
    registry._parse.cache_clear()


def toy_scores(method, ex, **options):
    return ol.token_scores(method, None, ex["input_ids"], ex["reasoning"], ex["answer"], **options)


def old_flat_form(config: TrainConfig) -> dict:
    """A config as versions before `CreditConfig` stored it: the credit settings beside the others."""
    data = dataclasses.asdict(config)
    credit = data.pop("credit")  # popped first: the flat form has no "credit"
    names = {"batch_size": "attribution_batch_size", "token_budget": "attribution_token_budget"}
    return {**data, **{names.get(k, k): v for k, v in credit.items()}}


def span_masks(attention_mask, reasoning, answer):
    """``(reasoning_mask, answer_mask)`` ``[B, T]`` bool from each row's spans."""
    rm, am = torch.zeros_like(attention_mask, dtype=torch.bool), torch.zeros_like(attention_mask, dtype=torch.bool)
    for i, (r, a) in enumerate(zip(reasoning, answer)):
        rm[i, r], am[i, a] = True, True
    return rm, am


def mixed_state_model():
    """A tiny Llama in a mixed state (training, but one MLP in eval; a ``.grad`` on the LM head;
    a frozen embedding), and its snapshot for `assert_untouched`."""
    model = tiny_llama().train()
    model.model.layers[0].mlp.eval()  # a mixed state, to check every module's own flag is restored
    model.lm_head.weight.grad = torch.full_like(model.lm_head.weight, 0.5)
    model.model.embed_tokens.weight.requires_grad_(False)
    params = {n: (p.requires_grad, None if p.grad is None else p.grad.clone(), p.detach().clone())
              for n, p in model.named_parameters()}
    return model, (params, [m.training for m in model.modules()])


def assert_untouched(model, snapshot):
    """The weights, their ``.grad`` and ``requires_grad``, and every module's mode are as before."""
    params, modes = snapshot
    for n, p in model.named_parameters():
        requires_grad, grad, weight = params[n]
        assert p.requires_grad == requires_grad, f"{n}.requires_grad changed"
        assert torch.equal(p.detach(), weight), f"{n} changed"
        assert p.grad is None if grad is None else torch.equal(p.grad, grad), f"{n}.grad changed or was written"
    assert [m.training for m in model.modules()] == modes


def covered(*axes) -> list:
    """Every combination of ``axes`` (lists of values; a tuple value fills several argnames) as
    ``pytest.param``s for one ``parametrize``. The fast suite keeps a covering set, in which every
    value of every axis appears at least once (as many cases as the longest axis); the other
    combinations repeat the same property on other shapes and are marked ``slow`` (`make test-slow`)."""
    import itertools

    def flat(value):
        return value if isinstance(value, tuple) else (value,)

    def name(value):
        if isinstance(value, torch.dtype):
            return str(value).removeprefix("torch.")
        return getattr(value, "__name__", None) or str(value)

    keep = {tuple(i % len(axis) for axis in axes) for i in range(max(map(len, axes)))}
    params = []
    for index in itertools.product(*(range(len(axis)) for axis in axes)):
        values = [v for axis, i in zip(axes, index) for v in flat(axis[i])]
        params.append(pytest.param(*values, id="-".join(map(name, values)),
                                   marks=() if index in keep else pytest.mark.slow))
    return params
