"""Can SmolLM2-135M-Instruct carry the course on a CPU: how often does it solve the
word-problem bank, how many prompts give GRPO a signal, and what do sampling and OAR cost?
Results: benchmarks/RESULTS.md, "SmolLM2 baseline".

Three parts (``--only``): accuracy, greedy and sampled (temperature T, groups of G), on
``--prompts`` problems of `oar_lite.course.problems.make_problems`, with the share of prompts whose
group has mixed rewards (the only prompts that give GRPO a signal); sampling throughput at
a fixed completion length; OAR-P (mode ``last``), OAR-G and one plain forward pass on one
completion with ``--reasoning`` tokens of reasoning, in interleaved rounds::

    python -m benchmarks.smollm2_baseline --threads 1 --tag threads1
    python -m benchmarks.smollm2_baseline --only oar --tag oar
"""
from __future__ import annotations

import statistics

import torch
from tqdm.auto import tqdm

from benchmarks import common
from oar_lite.attribution import gradient_scores, perturbation_scores
from oar_lite.course.problems import format_prompt, make_problems
from oar_lite.lab.report import markdown_table
from oar_lite.reward import math_reward
from oar_lite.rollout import sample_completions


def run_bank(model, tok, problems, *, temperature, group_size, max_new_tokens, shots, chunk_rows, seed):
    """Sample ``group_size`` completions per problem in chunks; one row per completion, and
    the seconds and completion tokens of the sampling."""
    prompts = [format_prompt(p, tok, shots=shots) for p in problems]
    per_chunk = max(1, chunk_rows // group_size)
    rows, tokens, seconds = [], 0, 0.0
    for i in tqdm(range(0, len(problems), per_chunk), desc=f"T={temperature} G={group_size}", leave=False):
        chunk = problems[i : i + per_chunk]
        s, r = common.timed(lambda: sample_completions(
            model, tok, prompts[i : i + per_chunk], group_size=group_size, max_new_tokens=max_new_tokens,
            temperature=temperature, add_special_tokens=False, seed=seed + i))
        for k, (text, ids, seg) in enumerate(zip(r.completions, r.completion_ids, r.segments)):
            p = chunk[k // group_size]
            rows.append({"problem": i + k // group_size, "template": p.template, "steps": p.steps,
                         "answer": p.answer, "reward": math_reward(text, p.answer), "parsed": seg is not None,
                         "tokens": len(ids), "reasoning_tokens": seg.reasoning.stop if seg else None,
                         "ended": bool(ids) and ids[-1] == tok.eos_token_id, "completion": text})
        seconds, tokens = seconds + s, tokens + int(r.completion_mask.sum())
    return rows, {"seconds": seconds, "completion_tokens": tokens}


def summarize(rows, group_size, timing):
    """Accuracy (overall and by the problems' step count), format, length, and the shares of
    prompts whose group of ``group_size`` has a right answer and has mixed rewards."""
    def mean(key, steps=None):
        return statistics.mean(r[key] for r in rows if steps in (None, r["steps"]))

    groups = [[r["reward"] for r in rows[i : i + group_size]] for i in range(0, len(rows), group_size)]
    return {"group_size": group_size, "completions": len(rows), "accuracy": mean("reward"),
            "accuracy_by_steps": {s: mean("reward", s) for s in sorted({r["steps"] for r in rows})},
            "parsed": mean("parsed"), "ended_with_eos": mean("ended"), "mean_tokens": mean("tokens"),
            "prompts_any_correct": statistics.mean(any(g) for g in groups),
            "prompts_mixed": statistics.mean(0 < sum(g) < len(g) for g in groups), "seconds": timing["seconds"],
            "completions_per_s": len(rows) / timing["seconds"],
            "tokens_per_s": timing["completion_tokens"] / timing["seconds"]}


def throughput(model, tok, *, batch, length, prompt, device):
    """Completions/s and tokens/s when sampling exactly ``length`` tokens for ``batch`` rows."""
    enc = tok([prompt] * batch, return_tensors="pt", add_special_tokens=False).to(device)
    with torch.no_grad():
        seconds, _ = common.timed(lambda: model.generate(
            **enc, do_sample=True, temperature=1.0, top_k=0, max_new_tokens=length, min_new_tokens=length,
            pad_token_id=tok.pad_token_id), device)
    return {"batch": batch, "length": length, "prompt_tokens": enc["input_ids"].shape[1], "seconds": seconds,
            "completions_per_s": batch / seconds, "tokens_per_s": batch * length / seconds}


def typical_completion(model, tok, rows, problems, *, shots, lo, hi, seed=0):
    """A completion whose reasoning (tokens before "The answer is") has ``lo``-``hi`` tokens:
    from ``rows`` if one exists, else sampled zero-shot (longer, chattier solutions)."""
    for r in rows:
        if r["reasoning_tokens"] is not None and lo <= r["reasoning_tokens"] <= hi:
            return format_prompt(problems[r["problem"]], tok, shots=shots), r["completion"]
    for i, p in enumerate(problems):
        prompt = format_prompt(p, tok, shots=0)
        out = sample_completions(model, tok, [prompt], group_size=4, max_new_tokens=hi + 20, temperature=0.7,
                                 add_special_tokens=False, seed=seed + i)
        for text, seg in zip(out.completions, out.segments):
            if seg is not None and lo <= seg.reasoning.stop <= hi:
                return prompt, text
    raise RuntimeError(f"no parsed completion of {lo}-{hi} tokens found")


def time_attribution(model, tok, prompt, completion, *, batch_size, warmup, repeats, device, progress):
    """OAR-P (``last``), OAR-G (``answer_mean`` and ``last``) and one plain forward pass on
    one sequence, in interleaved rounds; OAR-P's tokens through the model against the naive loop's."""
    from oar_lite.segment import segment_completion_ids

    p_ids = tok(prompt, add_special_tokens=False)["input_ids"]
    c_ids = tok(completion, add_special_tokens=False)["input_ids"]
    seg = segment_completion_ids(tok, c_ids)
    if seg is None:
        raise RuntimeError("completion has no parseable answer after re-tokenisation")
    seg = seg.shift(len(p_ids))  # reasoning = the completion's tokens before the marker
    ids, R = torch.tensor(p_ids + c_ids, device=device), seg.reasoning.stop - seg.reasoning.start
    stats, g = {}, torch.Generator(device=device).manual_seed(0)

    def forward(_):
        with torch.no_grad():
            return model(ids[None])

    runs = common.interleaved({
        "oar-p last": lambda _: perturbation_scores(model, ids, seg.reasoning, seg.answer, mode="last",
                                                    pad_token_id=tok.pad_token_id, batch_size=batch_size, stats=stats),
        "oar-g answer_mean": lambda _: gradient_scores(model, ids, seg.reasoning, seg.answer, mode="answer_mean",
                                                       generator=g),
        "oar-g last": lambda _: gradient_scores(model, ids, seg.reasoning, seg.answer, mode="last", generator=g),
        "one forward": forward}, warmup=warmup, repeats=repeats, device=device, progress=progress)
    return {"prompt_tokens": len(p_ids), "completion_tokens": len(c_ids), "reasoning_tokens": R,
            "answer": seg.answer_text, "completion": completion,
            "time": {k: common.spread([s for s, _ in v]) for k, v in runs.items()},
            "oar_p_forward_tokens": stats["forward_tokens"],
            "naive_forward_tokens": (R + 1) * seg.answer.start}  # one pass of x[:answer.start] per token


def render(report: dict) -> str:
    a, lines = report["settings"], []
    acc = [("greedy" if k == "greedy" else f"sampled T={a['temperature']}, G={a['group_size']}", report[k])
           for k in ("greedy", "sampled") if k in report]
    if acc:
        lines += [f"Accuracy on {a['prompts']} problems (seed {a['seed']}, {a['shots']} worked examples, up to "
                  f"{a['max_new_tokens']} new tokens):", "", *markdown_table(
                      ["decoding", "completions", "accuracy", "by steps (steps: accuracy)", "answer found",
                       "ended with EOS", "mean tokens", "prompts any correct", "prompts mixed", "completions/s",
                       "tokens/s"],
                      [[name, s["completions"], f"{s['accuracy']:.3f}",
                        ", ".join(f"{k}: {v:.2f}" for k, v in s["accuracy_by_steps"].items()), f"{s['parsed']:.2f}",
                        f"{s['ended_with_eos']:.2f}", f"{s['mean_tokens']:.0f}", f"{s['prompts_any_correct']:.2f}",
                        f"{s['prompts_mixed']:.2f}", f"{s['completions_per_s']:.3f}", f"{s['tokens_per_s']:.1f}"]
                       for name, s in acc]), ""]
    if "speed" in report:
        lines += [f"Sampling exactly {a['speed_length']} new tokens:", "", *markdown_table(
            ["rows per generate", "prompt tokens", "seconds", "completions/s", "tokens/s"],
            [[s["batch"], s["prompt_tokens"], f"{s['seconds']:.1f}", f"{s['completions_per_s']:.3f}",
              f"{s['tokens_per_s']:.1f}"] for s in report["speed"]]), ""]
    if "oar" in report:
        o = report["oar"]
        lines += [f"One completion: {o['prompt_tokens']} prompt + {o['completion_tokens']} completion tokens, "
                  f"{o['reasoning_tokens']} reasoning; OAR-P ran {o['oar_p_forward_tokens']} tokens (naive loop "
                  f"{o['naive_forward_tokens']}); {common.rounds(report)}:", "",
                  *markdown_table(["call", "seconds"], [[k, common.fmt(t, "")] for k, t in o["time"].items()]), ""]
    return "\n".join(lines)


def main(argv=None) -> dict:
    ap = common.parser(__doc__, "smollm2_baseline.json", warmup=0, repeats=2)
    ap.add_argument("--prompts", type=int, default=32, help="problems for the accuracy runs")
    ap.add_argument("--seed", type=int, default=1234, help="seed of the problem bank")
    ap.add_argument("--steps", type=int, nargs="+", default=None, help="only templates with these step counts")
    ap.add_argument("--shots", type=int, default=2)
    ap.add_argument("--group-size", type=int, default=8)
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--chunk-rows", type=int, default=32, help="rows per generate call")
    ap.add_argument("--speed-length", type=int, default=128)
    ap.add_argument("--speed-batches", type=int, nargs="+", default=[1, 8, 32])
    ap.add_argument("--oar-batch-size", type=int, default=64)
    ap.add_argument("--reasoning", type=int, nargs=2, default=[100, 200], metavar=("MIN", "MAX"),
                    help="reasoning tokens of the completion OAR scores")
    ap.add_argument("--only", choices=["all", "accuracy", "speed", "oar"], default="all")
    ap.add_argument("--tag", default="", help="appended to the JSON's file name")
    args = ap.parse_args(argv)
    if args.tag:
        args.out = args.out.with_stem(f"{args.out.stem}_{args.tag}")
    device, report = common.start(args, "smollm2_baseline", argv, settings=vars(args))
    report["load_s"], (model, tok) = common.timed(lambda: common.load("smollm2", device))
    problems = make_problems(args.prompts, seed=args.seed, steps=args.steps)
    rows = []
    if args.only in ("all", "accuracy"):
        for name, temperature, group_size in (("greedy", 0, 1), ("sampled", args.temperature, args.group_size)):
            rows, timing = run_bank(model, tok, problems, temperature=temperature, group_size=group_size,
                                    max_new_tokens=args.max_new_tokens, shots=args.shots, chunk_rows=args.chunk_rows,
                                    seed=args.seed)
            report[name], report[f"{name}_rows"] = summarize(rows, group_size, timing), rows
            common.write_json(report, args.out)  # partial results survive an interrupted run
    if args.only in ("all", "speed"):
        prompt = format_prompt(problems[0], tok, shots=args.shots)
        report["speed"] = [throughput(model, tok, batch=b, length=args.speed_length, prompt=prompt, device=device)
                           for b in args.speed_batches]
    if args.only in ("all", "oar"):
        prompt, completion = typical_completion(model, tok, rows, problems, shots=args.shots, lo=args.reasoning[0],
                                                hi=args.reasoning[1])
        report["oar"] = time_attribution(model, tok, prompt, completion, batch_size=args.oar_batch_size,
                                         warmup=args.warmup, repeats=args.repeats, device=device,
                                         progress=not args.no_progress)
    return common.finish(report, args.out, render)


if __name__ == "__main__":
    main()
