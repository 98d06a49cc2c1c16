"""SmolLM2-135M-Instruct on the word-problem bank: accuracy, mixed groups, speed, OAR cost.

What it measures (numbers go to benchmarks/RESULTS.md, "SmolLM2 baseline"):

1. accuracy with greedy decoding, and with sampling (temperature T, groups of G), on
   ``--prompts`` problems of `oar_lite.problems.make_problems`; the share of prompts whose
   group has mixed rewards (the only prompts that give GRPO a signal);
2. sampling throughput at a fixed completion length (completions/s, tokens/s);
3. the time of OAR-P (batched, answer-position-only logits, prefix KV reuse, mode
   ``last``) and OAR-G on one completion of 100-200 tokens.

Run (offline, from the repository root)::

    HF_HUB_OFFLINE=1 .venv/bin/python -m benchmarks.smollm2_baseline --threads 1
    HF_HUB_OFFLINE=1 .venv/bin/python -m benchmarks.smollm2_baseline --threads 2 --only speed

Writes ``benchmarks/results/smollm2_baseline[_<tag>].json`` and prints a summary.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch
from tqdm.auto import tqdm

from benchmarks import common
from oar_lite.attribution import gradient_scores, perturbation_scores
from oar_lite.models import load_smollm2
from oar_lite.problems import format_prompt, make_problems
from oar_lite.reward import math_reward
from oar_lite.rollout import sample_completions


def run_bank(model, tok, problems, *, temperature, group_size, max_new_tokens, shots, chunk_rows, seed):
    """Sample ``group_size`` completions per problem in chunks; rewards and lengths per row."""
    prompts = [format_prompt(p, tok, shots=shots) for p in problems]
    per_chunk = max(1, chunk_rows // group_size)
    rows, tokens, start = [], 0, time.perf_counter()
    for i in tqdm(range(0, len(problems), per_chunk), desc=f"T={temperature} G={group_size}", leave=False):
        chunk = problems[i : i + per_chunk]
        r = sample_completions(model, tok, prompts[i : i + per_chunk], group_size=group_size,
                               max_new_tokens=max_new_tokens, temperature=temperature,
                               add_special_tokens=False, seed=seed + i)
        for k, (text, ids, seg) in enumerate(zip(r.completions, r.completion_ids, r.segments)):
            p = chunk[k // group_size]
            rows.append({"problem": i + k // group_size, "template": p.template, "steps": p.steps,
                         "answer": p.answer, "reward": math_reward(text, p.answer), "parsed": seg is not None,
                         "tokens": len(ids), "reasoning_tokens": seg.reasoning.stop if seg else None,
                         "ended": bool(ids) and ids[-1] == tok.eos_token_id,
                         "completion": text})
        tokens += int(r.completion_mask.sum())
    seconds = time.perf_counter() - start
    return rows, {"seconds": seconds, "completion_tokens": tokens}


def summarize(rows, group_size, timing):
    rewards = [r["reward"] for r in rows]
    groups = [rewards[i : i + group_size] for i in range(0, len(rewards), group_size)]
    by_steps = {}
    for s in sorted({r["steps"] for r in rows}):
        sel = [r["reward"] for r in rows if r["steps"] == s]
        by_steps[s] = sum(sel) / len(sel)
    return {
        "completions": len(rows),
        "accuracy": sum(rewards) / len(rewards),
        "accuracy_by_steps": by_steps,
        "parsed": sum(r["parsed"] for r in rows) / len(rows),
        "ended_with_eos": sum(r["ended"] for r in rows) / len(rows),
        "mean_tokens": statistics.mean(r["tokens"] for r in rows),
        "prompts_any_correct": sum(any(g) for g in groups) / len(groups),
        "prompts_mixed": sum(0 < sum(g) < len(g) for g in groups) / len(groups),
        "seconds": timing["seconds"],
        "completions_per_s": len(rows) / timing["seconds"],
        "tokens_per_s": timing["completion_tokens"] / timing["seconds"],
    }


def throughput(model, tok, *, batch, length, prompt, repeats=1):
    """Completions/s and tokens/s when sampling exactly ``length`` tokens for ``batch`` rows."""
    enc = tok([prompt] * batch, return_tensors="pt", add_special_tokens=False)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        with torch.no_grad():
            model.generate(**enc, do_sample=True, temperature=1.0, top_k=0, max_new_tokens=length,
                           min_new_tokens=length, pad_token_id=tok.pad_token_id)
        best = min(best, time.perf_counter() - start)
    return {"batch": batch, "length": length, "prompt_tokens": enc["input_ids"].shape[1], "seconds": best,
            "completions_per_s": batch / best, "tokens_per_s": batch * length / best}


def typical_completion(model, tok, rows, problems, *, shots, lo=100, hi=200, seed=0):
    """A completion whose reasoning (tokens before "The answer is") has ``lo``-``hi`` tokens:
    from ``rows`` if one exists, else sampled zero-shot (longer, chattier solutions)."""
    for r in rows:
        if r["reasoning_tokens"] is not None and lo <= r["reasoning_tokens"] <= hi:
            return format_prompt(problems[r["problem"]], tok, shots=shots), r
    for i, p in enumerate(problems):
        prompt = format_prompt(p, tok, shots=0)
        out = sample_completions(model, tok, [prompt], group_size=4, max_new_tokens=hi + 20, temperature=0.7,
                                 add_special_tokens=False, seed=seed + i)
        for text, seg in zip(out.completions, out.segments):
            if seg is not None and lo <= seg.reasoning.stop <= hi:
                return prompt, {"completion": text, "answer": p.answer}
    raise RuntimeError(f"no parsed completion of {lo}-{hi} tokens found")


def time_attribution(model, tok, prompt, completion, *, batch_size, repeats=2):
    """Seconds for OAR-P (``last``) and OAR-G (``answer_mean`` and ``last``) on one sequence,
    and for one plain forward pass over it (best of ``repeats``)."""
    from oar_lite.segment import segment_completion_ids

    p_ids = tok(prompt, add_special_tokens=False)["input_ids"]
    c_ids = tok(completion, add_special_tokens=False)["input_ids"]
    seg = segment_completion_ids(tok, c_ids)
    if seg is None:
        raise RuntimeError("completion has no parseable answer after re-tokenisation")
    seg = seg.shift(len(p_ids))  # reasoning = the completion's tokens before the marker
    ids = torch.tensor(p_ids + c_ids)
    reasoning, R = seg.reasoning, seg.reasoning.stop - seg.reasoning.start
    out = {"prompt_tokens": len(p_ids), "completion_tokens": len(c_ids), "reasoning_tokens": R,
           "answer": seg.answer_text}

    def best_of(fn):
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        return min(times)

    stats = {}
    out["oar_p_last_s"] = best_of(lambda: perturbation_scores(model, ids, reasoning, seg.answer, mode="last",
                                                              pad_token_id=tok.pad_token_id,
                                                              batch_size=batch_size, stats=stats))
    out["oar_p_forward_tokens"] = stats["forward_tokens"]
    out["naive_forward_tokens"] = (R + 1) * seg.answer.start  # one pass of x[:answer.start] per token
    g = torch.Generator().manual_seed(0)
    out["oar_g_answer_mean_s"] = best_of(lambda: gradient_scores(model, ids, reasoning, seg.answer,
                                                                 mode="answer_mean", generator=g))
    out["oar_g_last_s"] = best_of(lambda: gradient_scores(model, ids, reasoning, seg.answer, mode="last", generator=g))
    with torch.no_grad():
        out["one_forward_s"] = best_of(lambda: model(ids[None]))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=2)
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
    ap.add_argument("--only", choices=["all", "accuracy", "speed", "oar"], default="all")
    ap.add_argument("--tag", default="")
    ap.add_argument("--out", default=str(common.DEFAULT_OUT))
    args = ap.parse_args(argv)

    torch.set_num_threads(args.threads)
    report = {"args": vars(args), "machine": common.machine("cpu")}
    start = time.perf_counter()
    model, tok = load_smollm2()
    report["load_s"] = time.perf_counter() - start
    problems = make_problems(args.prompts, seed=args.seed, steps=args.steps)
    rows = []

    if args.only in ("all", "accuracy"):
        greedy_rows, t = run_bank(model, tok, problems, temperature=0, group_size=1, max_new_tokens=args.max_new_tokens,
                                  shots=args.shots, chunk_rows=args.chunk_rows, seed=args.seed)
        report["greedy"] = summarize(greedy_rows, 1, t)
        print("greedy", json.dumps(report["greedy"]), flush=True)
        rows, t = run_bank(model, tok, problems, temperature=args.temperature, group_size=args.group_size,
                           max_new_tokens=args.max_new_tokens, shots=args.shots, chunk_rows=args.chunk_rows,
                           seed=args.seed)
        report["sampled"] = summarize(rows, args.group_size, t)
        print("sampled", json.dumps(report["sampled"]), flush=True)
        report["greedy_rows"], report["sampled_rows"] = greedy_rows, rows

    if args.only in ("all", "speed"):
        prompt = format_prompt(problems[0], tok, shots=args.shots)
        report["speed"] = []
        for b in args.speed_batches:
            report["speed"].append(throughput(model, tok, batch=b, length=args.speed_length, prompt=prompt))
            print("speed", json.dumps(report["speed"][-1]), flush=True)

    if args.only in ("all", "oar"):
        prompt, row = typical_completion(model, tok, rows, problems, shots=args.shots)
        report["oar"] = time_attribution(model, tok, prompt, row["completion"], batch_size=args.oar_batch_size)
        report["oar"]["completion"] = row["completion"]
        print("oar", json.dumps({k: v for k, v in report["oar"].items() if k != "completion"}), flush=True)

    report["loadavg_end"] = common.loadavg()
    report["total_s"] = time.perf_counter() - start
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"smollm2_baseline{'_' + args.tag if args.tag else ''}.json"
    path.write_text(json.dumps(report, indent=1))
    print(f"wrote {path} in {report['total_s']:.0f} s "
          f"(load average {report['machine']['loadavg_start']} -> {report['loadavg_end']})")


if __name__ == "__main__":
    main()
