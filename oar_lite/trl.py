"""OAR inside TRL: `OARConfig(GRPOConfig)` and `OARGRPOTrainer(GRPOTrainer)` (OAR-SPEC section 7).

The trainer changes one thing in TRL's GRPO: each generation batch is scored once with the
current policy, and TRL's loss receives ``[B, C]`` token advantages A_i * w_t (C: completion
length) instead of ``[B]`` sequence ones. Everything else (sampling, vLLM, rewards, clipping,
KL, LoRA through ``peft_config``, accelerate/DeepSpeed/FSDP, checkpoints) is TRL's. Under
``accelerate launch`` each process scores only its own rows. Usage: docs/trl.md.
"""
from __future__ import annotations

import dataclasses
import inspect
import math
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch

TRL_SUPPORTED = ">=1.6,<1.17"
"""The TRL releases `OARGRPOTrainer` is made for (as ``pyproject.toml``): it relies on internals
that change between releases (``_generate_and_score_completions``' output, ``_compute_loss``
taking ``[B, C]`` advantages, ``_metrics``, ``_logs``, ``_dist``; tests/test_trl.py's guard
names each); huggingface/trl#4525 asks for a hook, #7298 (open) proposes one."""


TRL_EXTRA = ("trl", "peft", "accelerate")
"""What `oar_lite.trl` imports beyond the library (``pip install 'oar-lite[trl]'`` installs them)."""


def check_trl_installed() -> None:
    """ImportError naming ``pip install 'oar-lite[trl]'`` if a module of `TRL_EXTRA` cannot be imported."""
    import importlib

    for name in TRL_EXTRA:
        try:
            importlib.import_module(name)
        except ImportError as err:
            raise ImportError(f"oar_lite.trl needs {name}, which cannot be imported ({err}); install the TRL extra: "
                              f"pip install 'oar-lite[trl]' (trl{TRL_SUPPORTED} with peft and accelerate)") from err


def check_trl_version(version: str | None = None) -> str:
    """Raise ImportError unless TRL ``version`` (default: the installed one) is in
    `TRL_SUPPORTED`; returns the version. ``OAR_LITE_ANY_TRL=1`` makes it a warning."""
    import os
    import warnings
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed_version

    from packaging.specifiers import SpecifierSet

    if version is None:
        try:
            version = installed_version("trl")
        except PackageNotFoundError:
            raise ImportError("oar_lite.trl needs TRL, which the library alone does not install: "
                              "pip install 'oar-lite[trl]'") from None
    if SpecifierSet(TRL_SUPPORTED).contains(version, prereleases=True):
        return version
    message = (f"oar_lite.trl supports trl{TRL_SUPPORTED}, but trl {version} is installed: OARGRPOTrainer overrides "
               f"TRL internals that change between releases. Install a supported one with "
               f"pip install 'trl{TRL_SUPPORTED}' (or set OAR_LITE_ANY_TRL=1 to try this one anyway)")
    if os.environ.get("OAR_LITE_ANY_TRL") == "1":
        warnings.warn(message, stacklevel=2)
        return version
    raise ImportError(message)


check_trl_installed()
check_trl_version()

from accelerate.utils import gather_object  # noqa: E402
from trl import GRPOConfig, GRPOTrainer  # noqa: E402  (after the version check, which names the range)
from trl.models import unwrap_model_for_generation as _trl_unwrap_model_for_generation  # noqa: E402

if "gradient_checkpointing_kwargs" in inspect.signature(_trl_unwrap_model_for_generation).parameters:
    unwrap_model_for_generation = _trl_unwrap_model_for_generation
else:  # TRL < 1.16 takes no such argument: it re-enables gradient checkpointing with default kwargs
    def unwrap_model_for_generation(model, accelerator, gradient_checkpointing_kwargs=None, **kwargs):
        return _trl_unwrap_model_for_generation(model, accelerator, **kwargs)

from .attribution import (CREDIT_FIELDS, CREDIT_RANGES, PLAIN_GRPO, WEIGHTINGS, CreditConfig,  # noqa: E402
                          Method, credit_settings, method_of, token_weights)
from .settings import check_number, settings_of  # noqa: E402
from .grpo import UPDATE, token_advantages  # noqa: E402
from .reshape import effective_share  # noqa: E402
from .rollout import SAMPLING_SETTINGS  # noqa: E402
from .seeding import derive_seed  # noqa: E402
from .segment import FORMATS, Segments, check_formats, segment_completion_ids, segments_to_masks  # noqa: E402

LIGER_REPLACES_LOSS = hasattr(GRPOTrainer, "compute_liger_loss")
"""Whether this TRL's ``use_liger_kernel=True`` computes the loss with Liger's fused GRPO loss
(``GRPOTrainer.compute_liger_loss``, TRL < 1.14), which takes one advantage per sequence,
instead of `_compute_loss`. From TRL 1.14 on, Liger only speeds up the log-probabilities (1.14)
or patches layer kernels (1.15, deprecated), and `_compute_loss` reads OAR's token advantages."""

_LIGER_MESSAGE = (
    "use_liger_kernel=True is not supported by OARGRPOTrainer with this TRL: here Liger's fused GRPO loss "
    "(GRPOTrainer.compute_liger_loss) replaces GRPOTrainer._compute_loss and takes one advantage per sequence [B], so "
    "OAR's token weights would be silently dropped. Set use_liger_kernel=False, install trl>=1.14 (where Liger no "
    f"longer replaces the loss), or use trl.GRPOTrainer for plain GRPO with Liger (oar_method={PLAIN_GRPO!r} is "
    "TRL's GRPO untouched)."
)

TOKEN_RATIO_LOSSES = ("cispo", "vespo")
"""TRL loss types whose per-token loss multiplies the advantage by the token's log-probability
(a sequence-level ratio, if any, is a detached or separate factor): token weights act under
``importance_sampling_level="sequence"`` too. In the others (grpo, bnpo, dr_grpo, dapo, sapo,
luspo) the advantage multiplies the importance ratio, one per sequence at that level."""


# Each numeric ``oar_`` field's range: its `CreditConfig` field's, checked under the name the user wrote.
OAR_NUMERIC_RANGES = {f"oar_{name}": allowed for name, allowed in CREDIT_RANGES.items()}

# TRL's numeric fields that the loss depends on, checked before TRL's checks (which let NaN and
# infinities through), with the ranges of the library's settings of the same meaning;
# ``max_grad_norm=0`` turns clipping off, as in Hugging Face.
TRL_NUMERIC_RANGES: dict[str, dict] = {
    "learning_rate": UPDATE["learning_rate"].range,
    "weight_decay": UPDATE["weight_decay"].range,
    "max_grad_norm": dict(low=0),
    "temperature": SAMPLING_SETTINGS["temperature"].range,
    "top_p": SAMPLING_SETTINGS["top_p"].range,
    "beta": UPDATE["beta"].range,
    "epsilon": UPDATE["clip_eps"].range,
    "epsilon_high": UPDATE["clip_eps_high"].range,
    "num_iterations": UPDATE["num_iterations"].range,
    "num_generations": dict(integer=True, low=2, optional=True),
}


def _oar(name: str, **changed):
    """The field ``oar_<name>``: `CreditConfig`'s setting ``<name>`` (its meaning and its default)."""
    declared = settings_of(CreditConfig)[name]
    return field(default=declared.default, metadata={"help": declared.help})


@dataclass
class OARConfig(GRPOConfig):
    """`trl.GRPOConfig` plus the OAR settings, named ``oar_*`` (meanings: their ``help``, docs/trl.md).

    Each `CreditConfig` field but the method has its ``oar_`` twin, with the default and the
    meaning `CreditConfig` declares. A field that differs from its default while the method
    does not take it is a ValueError (``oar_noise_std`` with ``oar_method="oar-p"``; any
    reshaping with ``"uniform"``). TRL's own fields keep their meaning (``beta`` is the KL
    coefficient; OAR's boost is ``oar_boost``). `oar_credit` turns the ``oar_*`` fields into a
    `CreditConfig`.
    """

    oar_method: str = field(
        default="oar-g",
        metadata={"help": f"Token credit method, in the grammar of every surface (name[:mode]): "
                          f"'{PLAIN_GRPO}' (plain GRPO: TRL's loss untouched), 'oar-p', 'oar-g', or another registered "
                          "scorer (oar_lite.attribution.SCORERS: the course's oracles, the lab's baselines and controls "
                          "once oar_lite.lab.scorers is imported); the P_final mode after a colon ('oar-p:answer_mean'; "
                          "default: the scorer's, 'last' for oar-p, 'answer_mean' for oar-g)."},
    )
    oar_quantile: float = _oar("quantile")
    oar_boost: float = _oar("boost")
    oar_floor: float = _oar("floor")
    oar_preserve_mass: bool = _oar("preserve_mass")
    oar_noise_std: float = _oar("noise_std")
    oar_batch_size: int | None = _oar("batch_size")
    oar_token_budget: int | None = _oar("token_budget")
    oar_answer_formats: list[str] = field(
        default_factory=lambda: list(FORMATS),
        metadata={"help": f"Answer formats to look for, in order of preference; a subset of {list(FORMATS)}."},
    )

    def __post_init__(self):
        self._check_oar_fields()  # before TRL's checks, which let NaN and infinities through
        super().__post_init__()
        self._check_trl_combination()  # after them: TRL's own errors come first

    def _check_trl_combination(self) -> None:
        """ValueError for a TRL setting under which OAR's token weights would change nothing, or
        not what ``oar_preserve_mass`` promises (docs/trl.md, "What OAR does under each TRL setting")."""
        if self.oar_method == PLAIN_GRPO or method_of(self.oar_method).name in WEIGHTINGS:
            return  # plain GRPO; a method with its own weighting (the lab's) promises no mass
        if not self.oar_preserve_mass:
            return
        level = getattr(self, "importance_sampling_level", "token")
        if level == "sequence" and self.loss_type not in TOKEN_RATIO_LOSSES:
            raise ValueError(
                f"importance_sampling_level='sequence' with loss_type={self.loss_type!r} (GSPO; luspo needs it) and "
                f"oar_method={self.oar_method!r}: OAR would change nothing. With one importance ratio per sequence, "
                f"every token of a completion shares it, so the token advantages A_i * w_t enter its loss only through "
                f"their mean over the completion's loss tokens, and oar_preserve_mass=True makes that mean 1: the loss "
                f"is exactly {self.loss_type}'s without OAR, after OAR's scoring passes. Use "
                f"importance_sampling_level='token' (TRL's default), or loss_type in {list(TOKEN_RATIO_LOSSES)} (their "
                f"per-token log-probabilities carry the weights at either level), or oar_method={PLAIN_GRPO!r} for "
                f"GSPO as it is. (With oar_preserve_mass=False the weights would act only as one scale of A_i per "
                f"completion, their mean, not as token credit.)")
        if getattr(self, "top_entropy_quantile", 1.0) < 1.0:
            raise ValueError(
                f"top_entropy_quantile={self.top_entropy_quantile} with oar_method={self.oar_method!r} and "
                f"oar_preserve_mass=True: TRL's entropy filter zeroes the loss of the low-entropy tokens inside "
                f"_compute_loss, after OAR reshaped them (from the policy at loss time, per micro-batch), so the "
                f"weights of the tokens the loss keeps no longer average 1 per completion and the mass OAR "
                f"preserves is not the mass trained. Use top_entropy_quantile=1.0 with OAR; or "
                f"oar_preserve_mass=False to combine the two knowingly (the filter then masks OAR's weights); or "
                f"oar_method={PLAIN_GRPO!r} for TRL's entropy filter alone.")

    def _check_oar_fields(self) -> None:
        try:  # the mode follows a colon
            method_of(self.oar_method)
        except ValueError as err:
            raise ValueError(f"oar_method={self.oar_method!r}: {err}") from None
        for name, allowed in {**OAR_NUMERIC_RANGES, **TRL_NUMERIC_RANGES}.items():
            if hasattr(self, name):  # TRL versions differ in their fields
                check_number("OARConfig", name, getattr(self, name), **allowed)
        self.oar_answer_formats = list(check_formats(self.oar_answer_formats, "oar_answer_formats"))
        taken = credit_settings(self.oar_method)
        defaults = {f.name: f.default for f in dataclasses.fields(OARConfig) if f.name.startswith("oar_")}
        refused = {f"oar_{k}": getattr(self, f"oar_{k}") for k in CREDIT_FIELDS
                   if k != "method" and k not in taken and getattr(self, f"oar_{k}") != defaults[f"oar_{k}"]}
        if self.oar_method == PLAIN_GRPO and self.oar_answer_formats != list(FORMATS):
            refused["oar_answer_formats"] = self.oar_answer_formats  # plain GRPO looks for no answer
        if refused:
            raise ValueError(f"OARConfig got {', '.join(f'{k}={v!r}' for k, v in refused.items())}, which "
                             f"oar_method={self.oar_method!r} does not take; it takes "
                             f"{[f'oar_{k}' for k in sorted(taken)] or 'none of the oar_ settings (plain GRPO)'}")
        self.oar_credit  # builds (and so checks) the CreditConfig the trainer will use

    @property
    def oar_method_spec(self) -> str:
        """The method as `oar_lite.attribution.token_weights` takes it, e.g. ``"oar-p:last"``."""
        method = method_of(self.oar_method)
        return str(Method(method.name, method.run_mode))

    @property
    def oar_credit(self) -> CreditConfig | None:
        """The ``oar_*`` fields as one `CreditConfig` (None for plain GRPO, ``oar_method="uniform"``):
        each ``oar_<name>`` field the method takes sets the `CreditConfig` field ``<name>``, the
        method is `oar_method_spec`."""
        if self.oar_method == PLAIN_GRPO:
            return None
        taken = credit_settings(self.oar_method)
        settings = {name: getattr(self, f"oar_{name}") for name in CREDIT_FIELDS if name in taken}
        return CreditConfig(**{**settings, "method": self.oar_method_spec})


FSDP2_TESTED_TORCH = ">=2.13,<2.14"
"""The torch releases `fsdp2_unsharded` was tested with (tests/test_scale.py). It restores each
module's reshard settings through torch's private FSDP2 state (there is no public getter, and the
public setters overwrite them), which may change in any release: under FSDP2, other torch versions
are refused (``OAR_LITE_ANY_TORCH=1`` makes that a warning)."""


def check_fsdp2_torch(version: str | None = None) -> None:
    """RuntimeError unless torch ``version`` (default: the installed one) is in
    `FSDP2_TESTED_TORCH`; a warning instead with ``OAR_LITE_ANY_TORCH=1``."""
    import os
    import warnings

    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

    version = version or torch.__version__
    if SpecifierSet(FSDP2_TESTED_TORCH).contains(Version(version).base_version):
        return
    message = (f"OARGRPOTrainer under FSDP2 holds each layer's parameters whole while OAR scores, and restores the "
               f"layers' reshard settings through torch's private FSDP2 state (FSDPState._auto_reshard_after_forward, "
               f"FSDPParamGroup.post_forward_mesh_info and reshard_after_backward; torch has no public getter for them). "
               f"That was tested with torch{FSDP2_TESTED_TORCH} only, and torch {version} is installed: install a "
               f"tested torch, train without FSDP2 (DDP or DeepSpeed ZeRO), or set OAR_LITE_ANY_TORCH=1 to try this one")
    if os.environ.get("OAR_LITE_ANY_TORCH") == "1":
        warnings.warn(message, stacklevel=3)
        return
    raise RuntimeError(message)


@contextmanager
def fsdp2_unsharded(model):
    """Under FSDP2 (``fully_shard``), hold every sharded module's parameters whole while OAR
    scores, so that its forward and backward passes make no collective calls; other models:
    nothing. FSDP2 all-gathers a layer's parameters in each forward (and again after a
    backward), and the number of OAR's passes differs between processes (OAR-P's spans, rows
    without an answer): gloo reports "a distributed collective mismatch", NCCL would hang.
    One all-gather per module on entry; on exit each module's reshard settings are restored and
    its parameters resharded (local). Torch versions outside `FSDP2_TESTED_TORCH` are refused
    under FSDP2 (`check_fsdp2_torch`): the settings are read from torch's private state."""
    try:
        from torch.distributed.fsdp import FSDPModule
    except ImportError:  # torch without FSDP2
        yield
        return
    modules = [m for m in model.modules() if isinstance(m, FSDPModule)]
    if modules:
        check_fsdp2_torch()
    saved = []  # torch's private per-module settings (2.13), which the public setters overwrite
    for module in modules:
        state = module._get_fsdp_state()
        saved.append((state, getattr(state, "_auto_reshard_after_forward", None),
                      [(g, g.post_forward_mesh_info, g.reshard_after_backward) for g in state._fsdp_param_groups]))
        module.set_reshard_after_forward(False, recurse=False)
        module.set_reshard_after_backward(False, recurse=False)
    try:
        for module in modules:
            module.unshard()
        yield
    finally:
        for state, auto, groups in saved:
            if auto is not None:
                state._auto_reshard_after_forward = auto
            for group, mesh_info, after_backward in groups:
                group.post_forward_mesh_info = mesh_info
                group.reshard_after_backward = after_backward
        for module in modules:
            module.reshard()


class OARGRPOTrainer(GRPOTrainer):
    """`trl.GRPOTrainer` whose loss gets OAR token advantages ``A_i * w_t`` (``[B, C]``).

    Takes what `trl.GRPOTrainer` takes; ``args`` must be an `OARConfig` (``oar_method="uniform"``:
    TRL's GRPO exactly). Logs ``oar/*`` metrics per logging step (`_log_oar_metrics`).
    """

    def __init__(self, model, reward_funcs=None, args: OARConfig | None = None, *pargs, **kwargs):
        if args is None:
            name = model if isinstance(model, str) else model.config._name_or_path or "model"
            args = OARConfig(output_dir=f"{str(name).rstrip('/').split('/')[-1]}-OAR")
        if not isinstance(args, OARConfig):
            raise ValueError(f"args must be an OARConfig (a GRPOConfig with the oar_ fields), got "
                             f"{type(args).__name__}; build it with OARConfig(...)")
        # Seed before TRL builds the peft adapter in its __init__ (older releases seed after it),
        # so a seed gives the same LoRA init on every supported release.
        from transformers.trainer_utils import enable_full_determinism, set_seed

        enable_full_determinism(args.seed) if args.full_determinism else set_seed(args.seed)
        super().__init__(model, reward_funcs, args, *pargs, **kwargs)
        # After TRL's own checks, so that its errors about Liger (not installed, entropy filter...) come first.
        if args.use_liger_kernel and LIGER_REPLACES_LOSS and args.oar_method != PLAIN_GRPO:
            raise ValueError(_LIGER_MESSAGE)

    # ------------------------------------------------------------------ the one override

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        output = super()._generate_and_score_completions(inputs)
        if self.args.oar_method == PLAIN_GRPO:
            return output
        if "pixel_values" in output:
            raise ValueError("OARGRPOTrainer does not score vision-language batches (the attribution forward "
                             f"passes take token ids only); use oar_method={PLAIN_GRPO!r} for multimodal data")
        mode = "train" if self.model.training else "eval"
        start = time.perf_counter()
        weights, reasoning, no_answer = self._oar_weights(output)
        output["advantages"] = token_advantages(output["advantages"], weights.to(output["advantages"].device))
        self._log_oar_metrics(mode, weights, reasoning, no_answer, time.perf_counter() - start)
        self._log_token_advantages(output["advantages"], output["completion_mask"])
        return output

    # ------------------------------------------------------------------ pieces

    TOKEN_ADVANTAGES_COLUMN = "oar_token_advantages"
    """The completions-log column with the advantages the loss receives (docs/trl.md)."""

    def _log_token_advantages(self, advantages: torch.Tensor, completion_mask: torch.Tensor) -> None:
        """Add the advantages the loss receives (``advantages: [B, C]``, this process's rows) to
        TRL's completions log, as the column `TOKEN_ADVANTAGES_COLUMN`: per completion, the list
        of ``A_i * w_t`` (4 decimals) over its ``completion_mask`` tokens, gathered over processes in TRL's row
        order. TRL's own ``advantage`` column is written inside TRL's method, before the
        reshaping, and keeps the sequence advantage ``A_i``."""
        rows = [[round(x, 4) for x in a[: int(n)].tolist()]
                for a, n in zip(advantages.detach().float().cpu(), completion_mask.sum(1).tolist())]
        extra = getattr(self, "_logs", {}).get("extra")
        if extra is None:  # only with OAR_LITE_ANY_TRL=1: a TRL whose completions log is laid out otherwise
            import warnings

            warnings.warn("this TRL has no completions log _logs['extra']: the token advantages OAR trains with "
                          "are not logged (TRL's 'advantage' column shows the sequence advantages)", stacklevel=2)
            return
        extra[self.TOKEN_ADVANTAGES_COLUMN].extend(gather_object(rows))

    def _oar_segments(self, completion_ids: torch.Tensor, completion_mask: torch.Tensor,
                      tool_mask: torch.Tensor | None = None) -> list:
        """Reasoning/answer `Segments` of each local completion (``None``: no answer found).

        With TRL's ``tool_mask`` ``[B, C]`` (0 on the tokens of a tool's output), the answer is
        looked for only after a completion's last tool output (the model's own last turn), so a
        tool's text is never read as the answer; the reasoning runs from the completion's start."""
        tokenizer = getattr(self.processing_class, "tokenizer", self.processing_class)
        trailing = set(getattr(self, "eos_token_ids", None) or [tokenizer.eos_token_id]) | {tokenizer.pad_token_id}
        segments = []
        for row, (ids, n) in enumerate(zip(completion_ids.tolist(), completion_mask.sum(1).tolist())):
            ids = ids[: int(n)]
            # The end-of-text token's text ("</s>", "<|im_end|>") is not part of an answer.
            while ids and ids[-1] in trailing:
                ids = ids[:-1]
            tool = [] if tool_mask is None else (tool_mask[row, : len(ids)] == 0).nonzero().flatten().tolist()
            start = tool[-1] + 1 if tool else 0  # the first token of the model's last turn
            found = segment_completion_ids(tokenizer, ids[start:], self.args.oar_answer_formats) if ids[start:] else None
            if found is not None and start:
                found = Segments(slice(0, found.reasoning.stop + start), slice(found.answer.start + start,
                                 found.answer.stop + start), found.answer_text, found.format)
            segments.append(found)
        return segments

    def _oar_weights(self, output: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor, int]:
        """Token weights ``[B, C]`` for the completion columns of this process's rows, the
        reasoning mask ``[B, C]`` and the number of rows without a parseable answer.
        Computed with the current policy; the weights are detached."""
        prompt_ids, prompt_mask = output["prompt_ids"], output["prompt_mask"]
        completion_ids, completion_mask = output["completion_ids"], output["completion_mask"]
        P, C = prompt_ids.shape[1], completion_ids.shape[1]
        tool_mask = output.get("tool_mask")  # TRL's: 0 on the tokens of a tool's output, [B, C]
        segments = self._oar_segments(completion_ids, completion_mask, tool_mask)
        reasoning_mask, answer_mask = segments_to_masks(segments, P, P + C)
        if tool_mask is not None:  # a tool's output keeps weight 1 and is out of the reshaping and its mass
            reasoning_mask[:, P:] &= tool_mask.bool().cpu()
        device = prompt_ids.device
        args = self.args
        tokenizer = getattr(self.processing_class, "tokenizer", self.processing_class)
        # Reproducible and resume-safe: the noise of OAR-G (and of the lab's random baseline) depends on
        # the seed, the step (as the CPU trainer) and the process, not on how many batches came
        # before in this run.
        generator = torch.Generator().manual_seed(
            derive_seed(int(args.seed), int(self.state.global_step), self.accelerator.process_index))
        with unwrap_model_for_generation(
            self.model_wrapped, self.accelerator, gather_deepspeed3_params=args.ds3_gather_for_generation,
            gradient_checkpointing_kwargs=args.gradient_checkpointing_kwargs,
        ) as policy, self._dist.summon_full_params(self.model_wrapped, recurse=False), \
                fsdp2_unsharded(self.model_wrapped):
            weights, scores = token_weights(
                policy,
                torch.cat([prompt_ids, completion_ids], dim=1),
                torch.cat([prompt_mask, completion_mask], dim=1),
                reasoning_mask.to(device),
                answer_mask.to(device),
                credit=args.oar_credit,
                pad_token_id=tokenizer.pad_token_id,
                generator=generator,
                return_scores=True,
            )
        no_answer = sum(s is None for s in segments)
        # The scored rows' (scores [R_i], weights [R_i]), for the metrics (the lab's uniformity too).
        self._oar_scored = [(s, w[m]) for s, w, m in zip(scores, weights.cpu(), reasoning_mask.cpu())
                            if s is not None and s.numel()]
        return weights[:, P:].detach(), reasoning_mask[:, P:].to(device), no_answer

    def _log_oar_metrics(self, mode: str, weights: torch.Tensor, reasoning: torch.Tensor, no_answer: int,
                         seconds: float) -> None:
        """OAR statistics summed over processes into TRL's metric buffer: the reasoning-token
        weights' mean and std, the shares suppressed (w < 1) and boosted (w > 1); the mean over
        scored completions of the effective share (sum w)^2 / (R sum w^2) (1 for plain GRPO,
        `oar_lite.reshape.effective_share`); the share of completions without a parseable
        answer (they keep A_i) and the slowest scoring time. The lab's trainer adds tau and the
        floor (`oar_lite.lab.recipes.StudyTrainer`)."""
        w = weights[reasoning].double()
        counts = [w.numel(), w.sum().item(), (w * w).sum().item(), (w < 1 - 1e-6).sum().item(),
                  (w > 1 + 1e-6).sum().item(), no_answer, weights.shape[0]]
        local = torch.tensor(counts, dtype=torch.float64, device=self.accelerator.device)
        n, total, squares, suppressed, boosted, no_answer, rows = self.accelerator.gather(local[None]).sum(0).tolist()
        shares = gather_object([effective_share(w) for _, w in getattr(self, "_oar_scored", [])])
        slowest = self.accelerator.gather(torch.tensor([seconds], device=self.accelerator.device)).max().item()
        metrics = self._metrics[mode]
        if n > 0:
            mean = total / n
            metrics["oar/weight_mean"].append(mean)
            metrics["oar/weight_std"].append(math.sqrt(max(squares / n - mean * mean, 0.0)))
            metrics["oar/frac_suppressed"].append(suppressed / n)
            metrics["oar/frac_boosted"].append(boosted / n)
        if shares:  # over the scored completions of all processes
            metrics["oar/effective_share"].append(sum(shares) / len(shares))
        metrics["oar/frac_no_answer"].append(no_answer / rows if rows else 0.0)
        metrics["oar/attribution_seconds"].append(slowest)


# ----------------------------------------------------------------------------- rewards for TRL
# They live in `oar_lite.reward` (importable without TRL); re-exported here. The recipes of the
# project's LoRA runs and the held-out callback are the lab's: `oar_lite.lab.recipes`.
from .reward import accuracy_reward, format_reward  # noqa: E402,F401
