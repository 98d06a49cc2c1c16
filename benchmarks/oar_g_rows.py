"""What would close OAR-G's gap to the 1.10x step target: scoring all rows of a batch in
one pass instead of one row at a time.

`oar_lite.attribution.token_weights` scores each row on its own: for OAR-G that is, per
row, a clean forward pass and a forward + backward pass at batch size 1. On small models
and CPUs the per-call overhead and the batch-1 matrix products dominate. This benchmark
measures, on the rollouts of one training step, the project's per-row loop against
`gradient_scores_rows`, a prototype that does the same work for every scored row at once
(one clean forward pass and one forward + backward pass over the padded batch, position
ids from the attention mask so padding changes nothing, LM head only at the positions
P_final needs) and asserts that both give the same scores, up to float error. The
prototype lives here, not in `oar_lite`, until it is wanted there.

Run (offline, from the repository root)::

    .venv/bin/python -m benchmarks.oar_g_rows --model toy --threads 1
    .venv/bin/python -m benchmarks.oar_g_rows --model smollm2 --prompts 2 --group-size 4

Writes ``benchmarks/results/oar_g_rows.json`` and prints a markdown table.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torch

from benchmarks import common


def gradient_scores_rows(model, input_ids: torch.Tensor, attention_mask: torch.Tensor, reasoning: list[slice],
                         answer: list[slice], *, mode: str = "answer_mean", noise_std: float = 1e-3,
                         generator: torch.Generator | None = None) -> list[torch.Tensor]:
    """OAR-G for B rows at once (prototype): the scores `gradient_scores` gives each row alone.

    Args:
        input_ids, attention_mask: ``[B, T]`` rows (left or right padding; one contiguous
            run of attended tokens per row).
        reasoning, answer: per row, half-open spans into the padded row.
        mode, noise_std: as `oar_lite.attribution.gradient_scores`.
        generator: noise RNG; rows draw their noise in order, as the per-row loop of
            `token_weights` does with one generator.

    Returns:
        B tensors ``[R_i]``.
    """
    from oar_lite.attribution import _divergence, _outcome, _outcome_span, eval_mode

    B = input_ids.shape[0]
    if not (len(reasoning) == len(answer) == B == attention_mask.shape[0]):
        raise ValueError(f"expected one reasoning and one answer span per row ({B}), "
                         f"got {len(reasoning)} and {len(answer)}")
    spans = [_outcome_span(a, mode) for a in answer]  # (end, keep) per row
    T = max(end for end, _ in spans)
    ids, attn = input_ids[:, :T], attention_mask[:, :T]
    position_ids = (attn.long().cumsum(-1) - 1).clamp(min=0)
    wanted = sorted({p for end, keep in spans for p in range(end - keep, end)})
    keep_idx = torch.tensor(wanted, device=ids.device)
    column = {p: i for i, p in enumerate(wanted)}

    def outcomes(logits):  # logits [B, len(wanted), V] -> per-row P_final
        res = []
        for i, (end, keep) in enumerate(spans):
            cols = [column[p] for p in range(end - keep, end)]
            res.append(_outcome(logits[i:i + 1, cols], input_ids[i, answer[i]], mode))
        return res

    with eval_mode(model):
        with torch.no_grad():
            clean = outcomes(model(input_ids=ids, attention_mask=attn, position_ids=position_ids,
                                   logits_to_keep=keep_idx, use_cache=False).logits)
            embeds = model.get_input_embeddings()(ids).detach()
            noisy = embeds.clone()
            for i, r in enumerate(reasoning):
                noise_device = generator.device if generator is not None else embeds.device
                noise = torch.randn((r.stop - r.start, embeds.shape[-1]), generator=generator, device=noise_device)
                noisy[i, r] += (noise_std * noise).to(embeds.device, embeds.dtype)
        noisy.requires_grad_(True)
        with torch.enable_grad():
            logits = model(inputs_embeds=noisy, attention_mask=attn, position_ids=position_ids,
                           logits_to_keep=keep_idx, use_cache=False).logits
            objective = sum(_divergence(c, o, mode).sum() for c, o in zip(clean, outcomes(logits)))
            (grad,) = torch.autograd.grad(objective, noisy)
    return [(grad[i, r].float() * embeds[i, r].float()).sum(-1).abs().detach() for i, r in enumerate(reasoning)]


def gradient_scores_loop(model, input_ids, attention_mask, reasoning, answer, *, mode="answer_mean",
                         noise_std=1e-3, generator=None) -> list[torch.Tensor]:
    """The project's way, as `token_weights` runs it: each row unpadded, one at a time."""
    from oar_lite.attribution import gradient_scores, mask_to_span

    out = []
    for i in range(input_ids.shape[0]):
        valid = mask_to_span(attention_mask[i].bool())
        off = valid.start
        out.append(gradient_scores(model, input_ids[i, valid], slice(reasoning[i].start - off, reasoning[i].stop - off),
                                   slice(answer[i].start - off, answer[i].stop - off), mode=mode,
                                   noise_std=noise_std, generator=generator))
    return out


def step_rows(model_name: str, model, tok, *, prompts: int, group_size: int, max_new_tokens: int, seed: int):
    """The rows a training step would score: sampled like `train_step`, those with an answer."""
    from oar_lite.rollout import sample_completions
    from oar_lite.train import pick_problems

    from benchmarks.step_cost import make_task

    task = make_task(model_name, tok)
    problems = pick_problems(task.train_problems, prompts, seed=0, step=seed)
    r = sample_completions(model, tok, [p["prompt"] for p in problems], group_size=group_size,
                           max_new_tokens=max_new_tokens, temperature=1.0, formats=task.formats,
                           add_special_tokens=task.add_special_tokens, seed=seed)
    reasoning_mask, answer_mask = r.masks()
    from oar_lite.attribution import mask_to_span

    rows = [i for i in range(len(r)) if answer_mask[i].any() and reasoning_mask[i].any()]
    return (r.input_ids[rows], r.attention_mask[rows], [mask_to_span(reasoning_mask[i]) for i in rows],
            [mask_to_span(answer_mask[i]) for i in rows])


def main(argv=None) -> dict:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="toy", choices=["toy", "smollm2"])
    ap.add_argument("--prompts", type=int, default=None, help="prompts (default: the step_cost setting)")
    ap.add_argument("--group-size", type=int, default=None)
    ap.add_argument("--modes", nargs="+", default=["answer_mean", "answer_joint"])
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--tolerance", type=float, default=1e-3, help="max |diff| / max |score| allowed")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--out", type=Path, default=common.DEFAULT_OUT / "oar_g_rows.json")
    ap.add_argument("--no-progress", action="store_true")
    args = ap.parse_args(argv)
    from benchmarks.step_cost import SETTINGS

    device = common.setup(args.threads, args.device)
    s = SETTINGS[args.model]
    model, tok = common.load(args.model, device)
    ids, attn, reasoning, answer = step_rows(args.model, model, tok, prompts=args.prompts or s["prompts_per_step"],
                                             group_size=args.group_size or s["group_size"],
                                             max_new_tokens=s["max_new_tokens"], seed=1000)
    report = {"command": "python -m benchmarks.oar_g_rows " + " ".join(argv if argv is not None else sys.argv[1:]),
              "machine": common.machine(device), "model": args.model, "rows": len(reasoning),
              "mean_reasoning": sum(r.stop - r.start for r in reasoning) / max(len(reasoning), 1),
              "padded_length": ids.shape[1], "modes": {}}
    for mode in args.modes:
        def run(fn):
            return lambda r: fn(model, ids, attn, reasoning, answer, mode=mode,
                                generator=torch.Generator(device=device).manual_seed(0))
        runs = common.interleaved({"per_row": run(gradient_scores_loop), "batched": run(gradient_scores_rows)},
                                  warmup=args.warmup, repeats=args.repeats, device=device,
                                  progress=not args.no_progress)
        a, b = runs["per_row"][-1][1], runs["batched"][-1][1]
        scale = max(float(x.abs().max()) for x in a)
        diff = max(float((x - y).abs().max()) for x, y in zip(a, b))
        if diff > args.tolerance * scale:
            raise AssertionError(f"{mode}: batched OAR-G differs from the per-row scores by {diff:.3g} "
                                 f"(max |score| {scale:.3g})")
        times = {k: [t for t, _ in v] for k, v in runs.items()}
        report["modes"][mode] = {"time": {k: common.spread(v) for k, v in times.items()},
                                 "speedup": common.spread([p / q for p, q in zip(times["per_row"], times["batched"])]),
                                 "max_abs_diff": diff, "max_abs_score": scale}
    lines = [f"{args.model}: {report['rows']} scored rows of one step (mean reasoning {report['mean_reasoning']:.0f} "
             f"tokens, padded length {report['padded_length']}), {args.repeats} rounds after {args.warmup} warm-up:", "",
             "| mode | per row (project) s | all rows at once (prototype) s | speed-up | max abs diff / max score |",
             "|---|---|---|---|---|"]
    for mode, m in report["modes"].items():
        lines.append(f"| {mode} | {common.fmt(m['time']['per_row'], '', 3)} | {common.fmt(m['time']['batched'], '', 3)} "
                     f"| {common.fmt(m['speedup'], 'x', 1)} | {m['max_abs_diff'] / m['max_abs_score']:.1e} |")
    return common.finish(report, args.out, lambda _: "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
