"""Monte-Carlo ground truth on SmolLM2: P(correct | prefix) at every reasoning token.

    nice -n 10 env OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \\
        .venv/bin/python scripts/mc_ground_truth.py --phase all

As in Pivotal Token Search (Abdin et al. 2024, the Phi-4 report): for a sampled
completion of one of the project's word problems, every prefix ``prompt +
completion[:t]`` (t = 0 .. R, R reasoning tokens) gets ``K`` sampled continuations, and
the share that ends with the right answer (`oar_lite.reward.math_reward`) estimates
P(correct | prefix). Token t moves it from ``p[t]`` to ``p[t + 1]``; tokens where it
jumps are pivotal. The same completions are then scored by the credit methods
(OAR-P, OAR-G, entropy, Captum IG, random), and everything is written to one JSON file,
`oar_lite.lab.ground_truth.GROUND_TRUTH_PATH`, that `oar_lite.lab.ground_truth.ground_truth_table` reads.

Phases (``--phase all`` runs them in order; each writes into ``--work`` and skips what is
there, so a killed run resumes where it stopped):

1. ``select``: up to ``--problems`` problems of ``--steps`` steps (`oar_lite.course.problems.make_problems`),
   ``--group-size`` completions each at temperature 1, until enough problems have both a
   right and a wrong usable completion; keeps completions that end, give a
   parseable answer and have at most ``--max-reasoning`` reasoning tokens; takes one right
   and one wrong completion from each problem that has both, then fills up with others.
2. ``mc``: pass 1, ``--k`` rollouts at every prefix; pass 2, ``--k-extra`` more where the
   first estimate is strictly between 0 and 1 (where the Monte-Carlo error is). Each
   continuation is capped at the completion's remaining length + ``--slack`` tokens
   (at most ``--max-new-tokens``).
3. ``score``: the methods of ``--methods`` on each completion (`oar_lite.attribution.token_scores`).
4. ``assemble``: writes the data file with all settings, seeds and CPU seconds.

``--phase rescore`` (separately; the model, not ``--work``) scores the completions of the data
file (``--out``) with ``--methods`` again, on their prompts rebuilt as the file was made: a method
the file lacks is added to every completion, one it has is compared with what it stores and left
as it is; the file's settings record each rescore (methods added, largest differences, command)::

    python scripts/mc_ground_truth.py --phase rescore --methods grail entropy oar-g:answer_mean oar-p:last

``--phase report`` (separately; no model) prints the table of `oar_lite.lab.ground_truth.ground_truth_table`
and the summary, and draws docs/ground_truth.png.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import torch

from oar_lite.lab import ground_truth, stats
from oar_lite.lab.credit import route_options
from oar_lite.attribution import takes, token_scores
from oar_lite.course.models import load_smollm2, smollm2_cache_path
from oar_lite.course.problems import format_prompt, make_problems
from oar_lite.reward import math_reward
from oar_lite.seeding import derive_seed
from oar_lite.segment import segment_completion_ids
from oar_lite.settings import parser

METHODS = ("oar-p:last", "oar-p:answer_mean", "oar-g:answer_mean", "entropy", "captum-ig:answer_joint", "random")


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def write_json(path: Path, obj) -> None:
    """Atomic write (a killed run never leaves half a file)."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(obj, indent=1))
    os.replace(tmp, path)


def read_json(path: Path, default):
    return json.loads(path.read_text()) if path.exists() else default


def _sample_problem(args, model, tokenizer, i: int, problem) -> tuple[list[dict], list[dict]]:
    """Problem ``i``'s group of ``--group-size`` completions at T = 1, split into the usable
    right and wrong ones (ended, a parseable answer, 3 .. ``--max-reasoning`` reasoning tokens)."""
    eos = tokenizer.eos_token_id
    prompt_ids = tokenizer(format_prompt(problem, tokenizer), add_special_tokens=False)["input_ids"]
    rows = ground_truth.sample_continuations(model, tokenizer, prompt_ids, k=args.group_size,
                                       max_new_tokens=args.sample_tokens, seed=derive_seed(args.seed, i))
    texts = [tokenizer.decode(row, skip_special_tokens=True) for row in rows]
    group_correct = sum(math_reward(text, problem.answer) == 1.0 for text in texts)
    right, wrong = [], []
    for row, text in zip(rows, texts):
        seg = segment_completion_ids(tokenizer, row)
        if len(row) >= args.sample_tokens or seg is None or not 3 <= seg.reasoning.stop <= args.max_reasoning:
            continue  # unfinished, no parseable answer, or too long
        correct = math_reward(text, problem.answer) == 1.0
        rec = {"problem_index": i, "question": problem.question, "answer": problem.answer,
               "template": problem.template, "steps": problem.steps, "prompt_ids": prompt_ids,
               "completion_ids": row + [eos], "completion": text,
               "reasoning": [seg.reasoning.start, seg.reasoning.stop],
               "answer_span": [seg.answer.start, seg.answer.stop], "correct": correct,
               "group_correct": group_correct}
        (right if correct else wrong).append(rec)
    log(f"select: problem {i} {problem.template}: {len(right)} right, {len(wrong)} wrong usable "
        f"({group_correct}/{len(rows)} right in the group)")
    return right, wrong


def select(args, model, tokenizer) -> list[dict]:
    """Round 1 (``--completions`` from at most ``--problems`` problems: mixed pairs, then
    fill-ups), then round 2 (``--extra-completions`` more, mixed pairs only, from the
    problems after round 1's). Each round's samples are kept, so a killed run resumes."""
    path = args.work / "selection.json"
    chosen = read_json(path, None)
    if chosen is None:
        chosen = _select_round_one(args, model, tokenizer)
        write_json(path, chosen)
    for rec in chosen:
        rec.setdefault("selection_round", 1)
    if args.extra_completions and sum(r["selection_round"] == 2 for r in chosen) < args.extra_completions:
        chosen = [r for r in chosen if r["selection_round"] == 1] + _select_round_two(args, model, tokenizer)
        write_json(path, chosen)
    return chosen


def _select_round_one(args, model, tokenizer) -> list[dict]:
    """Problems in order until ``--completions / 2`` have both a usable right and a usable
    wrong completion (or ``--problems`` are sampled); one right and one wrong from each
    such problem, then the others' first wrong, then first right (wrong first, shorter first)."""
    t0 = time.process_time()
    problems = make_problems(args.problems, seed=args.problem_seed, steps=args.steps)
    by_problem = [tuple(x) for x in read_json(args.work / "sampled.json", [])]  # per problem: (right, wrong)
    for i, problem in enumerate(problems):
        if i < len(by_problem):
            continue
        if 2 * sum(bool(r and w) for r, w in by_problem) >= args.completions:
            break  # enough problems with both a right and a wrong completion
        by_problem.append(_sample_problem(args, model, tokenizer, i, problem))
        write_json(args.work / "sampled.json", by_problem)
    chosen = []
    for right, wrong in by_problem:  # one right and one wrong from each mixed problem first
        if right and wrong and len(chosen) + 2 <= args.completions:
            chosen += [right[0], wrong[0]]
    rest = [r for right, wrong in by_problem for r in (wrong[:1] + right[:1]) if r not in chosen]
    rest.sort(key=lambda r: (r["correct"], r["reasoning"][1]))  # wrong ones first, then shorter
    chosen += rest[: args.completions - len(chosen)]
    log(f"select round 1: {len(chosen)} completions ({sum(c['correct'] for c in chosen)} right), "
        f"{time.process_time() - t0:.0f} CPU s")
    return [{**r, "selection_round": 1} for r in chosen]


def _select_round_two(args, model, tokenizer) -> list[dict]:
    """Problems after round 1's (index ``len(sampled.json)`` on, at most ``--extra-problems``),
    in order; from each one that has both a usable right and a usable wrong completion, the
    first right and the first wrong one, until ``--extra-completions`` are chosen. No
    fill-ups: a problem no sample gets right (or none wrong) leaves P(correct | prefix) flat."""
    t0 = time.process_time()
    start = len(read_json(args.work / "sampled.json", []))
    if start == 0:
        raise SystemExit("round 2 needs round 1's samples (sampled.json); run --phase select without "
                         "--extra-completions first")
    problems = make_problems(start + args.extra_problems, seed=args.problem_seed, steps=args.steps)
    by_problem = [tuple(x) for x in read_json(args.work / "sampled-round2.json", [])]
    chosen = []
    for j, problem in enumerate(problems[start:]):
        if len(chosen) + 2 > args.extra_completions:
            break
        if j == len(by_problem):
            by_problem.append(_sample_problem(args, model, tokenizer, start + j, problem))
            write_json(args.work / "sampled-round2.json", by_problem)
        right, wrong = by_problem[j]
        if right and wrong:
            chosen += [{**right[0], "selection_round": 2}, {**wrong[0], "selection_round": 2}]
    log(f"select round 2: {len(chosen)} completions from problems {start}..{start + len(by_problem) - 1}, "
        f"{time.process_time() - t0:.0f} CPU s")
    return chosen


def monte_carlo(args, model, tokenizer, chosen: list[dict]) -> dict:
    shard, shards = args.shard
    if args.only:
        path = args.work / f"mc-only-{'-'.join(map(str, args.only))}.json"
    else:
        path = args.work / ("mc.json" if shards == 1 else f"mc-{shard}of{shards}.json")
    done = read_json(path, {})
    for pass_no, k in ((1, args.k), (2, args.k_extra)):
        if k == 0:
            continue
        for i, rec in enumerate(chosen):
            key = f"{i}/{pass_no}"
            if key in done or key in _all_mc(args) or (i not in args.only if args.only else i % shards != shard):
                continue
            R, C = rec["reasoning"][1], len(rec["completion_ids"])
            if pass_no == 1:
                positions = list(range(R + 1))
            else:
                first = {**_all_mc(args), **done}[f"{i}/1"]["counts"]  # pass 1 may be in another shard's file
                positions = [t for t, c in enumerate(first) if 0 < c < args.k]
            t0, w0 = time.process_time(), time.time()
            counts = ground_truth.prefix_success_counts(
                model, tokenizer, rec["prompt_ids"], rec["completion_ids"],
                lambda text, a=rec["answer"]: math_reward(text, a) == 1.0, positions=positions, k=k,
                max_new_tokens=[min(args.max_new_tokens, C - t + args.slack) for t in positions],
                seed=derive_seed(args.seed, 0, pass_no, i)).tolist()
            done[key] = {"positions": positions, "counts": counts, "k": k,
                         "cpu_seconds": time.process_time() - t0, "wall_seconds": time.time() - w0}
            write_json(path, done)
            log(f"mc pass {pass_no}: completion {i + 1}/{len(chosen)} ({len(positions)} prefixes, "
                f"{'right' if rec['correct'] else 'wrong'}): {[round(c / k, 2) for c in counts]} "
                f"{done[key]['cpu_seconds']:.0f} CPU s, load {os.getloadavg()[0]:.1f}")
    return done


def _all_mc(args) -> dict:
    return {k: v for f in sorted(args.work.glob("mc*.json")) for k, v in read_json(f, {}).items()}  # all shards


def score(args, model, tokenizer, chosen: list[dict]) -> dict:
    path = args.work / "scores.json"
    done = read_json(path, {})
    generator = torch.Generator().manual_seed(args.seed)
    for i, rec in enumerate(chosen):
        if args.only_estimated and f"{i}/1" not in _all_mc(args):
            continue  # expensive scorers only where the Monte-Carlo estimate exists
        P = len(rec["prompt_ids"])
        ids = torch.tensor(rec["prompt_ids"] + rec["completion_ids"])
        reasoning = slice(P + rec["reasoning"][0], P + rec["reasoning"][1])
        answer = slice(P + rec["answer_span"][0], P + rec["answer_span"][1])
        options = _scorer_options(args, tokenizer, generator)
        for m in args.methods:
            key = f"{i}/{m}"
            if key in done:
                continue
            generator.manual_seed(derive_seed(args.seed, i))
            t0 = time.process_time()
            s = token_scores(m, model, ids, reasoning, answer, **options[m])
            done[key] = {"scores": [float(x) for x in s.tolist()], "cpu_seconds": time.process_time() - t0}
            write_json(path, done)
            log(f"score: completion {i + 1}/{len(chosen)} {m}: {done[key]['cpu_seconds']:.1f} CPU s")
    return done


def _scorer_options(args, tokenizer, generator) -> dict:
    """Per method of ``--methods``, its options (`route_options`): the pad token, the generator, and
    OAR-P's and captum-ig's limits where one of them is scored."""
    limits = {"batch_size": args.oar_p_batch, "n_steps": args.ig_steps}
    return route_options(args.methods, {"pad_token_id": tokenizer.pad_token_id, "generator": generator,
                                        **{k: v for k, v in limits.items() if any(k in takes(m) for m in args.methods)}})


def rescore(args, model, tokenizer) -> dict:
    """``--phase rescore``: every completion of the data file scored with ``--methods`` (seeded as
    `score` seeds them), added where the file lacks the method, compared where it has it; returns and
    records ``{"added", "compared": {method: largest absolute difference}, ...}``."""
    data = ground_truth.load_ground_truth(args.out)
    stored = set(data["completions"][0]["scores"]) if data["completions"] else set()
    generator = torch.Generator().manual_seed(args.seed)
    options = _scorer_options(args, tokenizer, generator)
    compared = {m: 0.0 for m in args.methods if m in stored}
    cpu = {m: 0.0 for m in args.methods}
    for i, rec in enumerate(data["completions"]):
        ids, _, reasoning, answer = ground_truth.rebuilt_sequence(rec, tokenizer)
        for m in args.methods:
            generator.manual_seed(derive_seed(args.seed, i))
            t0 = time.process_time()
            s = [round(float(x), 7) for x in token_scores(m, model, ids, reasoning, answer, **options[m]).tolist()]
            cpu[m] += time.process_time() - t0
            if m in compared:
                compared[m] = max(compared[m], max((abs(a - b) for a, b in zip(s, rec["scores"][m])), default=0.0))
            else:
                rec["scores"][m] = s
                rec.setdefault("score_cpu_seconds", {})[m] = round(time.process_time() - t0, 2)
        log(f"rescore: completion {i + 1}/{len(data['completions'])}")
    record = {"added": [m for m in args.methods if m not in compared], "compared": compared,
              "cpu_seconds": {m: round(v, 1) for m, v in cpu.items()}, "seed": args.seed,
              "torch": torch.__version__, "platform": platform.platform(), "threads": torch.get_num_threads(),
              "command": "python scripts/mc_ground_truth.py " + " ".join(sys.argv[1:] if args.argv is None else args.argv)}
    data["settings"]["methods"] = list(data["settings"].get("methods", [])) + record["added"]
    data["settings"].setdefault("rescored", []).append(record)
    write_json(args.out, data)
    log(f"rescore: added {record['added']}; largest differences from the stored scores {compared}")
    return record


def assemble(args, tokenizer, chosen: list[dict], mc: dict, scores: dict) -> None:
    completions = []
    for i, rec in enumerate(chosen):
        R = rec["reasoning"][1]
        if f"{i}/1" not in mc:
            log(f"assemble: completion {i} has no Monte-Carlo estimate yet, left out")
            continue
        methods = [m for m in args.methods if f"{i}/{m}" in scores]
        if len(methods) < len(args.methods):
            log(f"assemble: completion {i} lacks scores of {sorted(set(args.methods) - set(methods))}")
        counts, rollouts = list(mc[f"{i}/1"]["counts"]), [mc[f"{i}/1"]["k"]] * (R + 1)
        if f"{i}/2" in mc:
            extra = mc[f"{i}/2"]
            for t, c in zip(extra["positions"], extra["counts"]):
                counts[t] += c
                rollouts[t] += extra["k"]
        se = stats.mc_standard_error(counts, rollouts)
        low, high = stats.wilson_interval(counts, rollouts)
        ids = rec["completion_ids"]
        completions.append({
            **{k: rec[k] for k in ("question", "answer", "template", "steps", "completion", "correct",
                                   "reasoning", "answer_span", "group_correct", "problem_index")},
            "selection_round": rec.get("selection_round", 1), "mc_passes": 2 if f"{i}/2" in mc else 1,
            "prompt_tokens": len(rec["prompt_ids"]), "completion_ids": ids,
            "tokens": [tokenizer.decode([t]) for t in ids],
            "successes": counts, "rollouts": rollouts,
            "p": [round(c / k, 5) for c, k in zip(counts, rollouts)],
            "se": [round(x, 5) for x in se.tolist()],
            "wilson_low": [round(x, 5) for x in low.tolist()], "wilson_high": [round(x, 5) for x in high.tolist()],
            "scores": {m: [round(x, 7) for x in scores[f"{i}/{m}"]["scores"]] for m in methods},
            "score_cpu_seconds": {m: round(scores[f"{i}/{m}"]["cpu_seconds"], 2) for m in methods},
            "mc_cpu_seconds": round(sum(mc[f"{i}/{p}"]["cpu_seconds"] for p in (1, 2) if f"{i}/{p}" in mc), 1),
        })
    settings = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()
                if k not in ("out", "work", "phase", "figure", "threshold", "argv")}
    settings.update({
        "model": "SmolLM2-135M-Instruct (oar_lite.course.models.load_smollm2, float32 from the Q4_1 GGUF)",
        "prefix_definition": "p[t] = P(correct | prompt + completion[:t]), t = 0..R; reasoning token t moves p[t] to p[t+1]",
        "rollout_sampling": "temperature 1, top_p 1, no top-k; continuation cap min(max_new_tokens, remaining completion tokens + slack); "
                            "a rollout is correct when oar_lite.reward.math_reward(completion[:t] + continuation, answer) == 1",
        "refinement": "pass 2 adds k_extra rollouts at prefixes whose pass-1 estimate is strictly between 0 and 1",
        "seeds": "oar_lite.seeding.derive_seed: selection: torch.manual_seed(derive_seed(seed, problem index)); rollouts "
                 "of completion i, pass q, prefix t: torch.manual_seed(derive_seed(derive_seed(seed, 0, q, i), t)) "
                 "(for seed 0, the seeds the shipped file was made with)",
        "standard_error": "se = sqrt(p (1 - p) / K), 0 at p = 0 or 1; wilson_low/high: 95% Wilson score interval, "
                          "which stays informative there (K = 16, p = 0 gives [0, 0.19])",
        "mc_cpu_seconds": round(sum(v["cpu_seconds"] for v in mc.values()), 1),
        "score_cpu_seconds": round(sum(v["cpu_seconds"] for v in scores.values()), 1),
        "torch": torch.__version__, "platform": platform.platform(), "threads": torch.get_num_threads(),
        "command": "python scripts/mc_ground_truth.py " + " ".join(sys.argv[1:]),
    })
    data = {"description": "Monte-Carlo P(correct | prefix) along SmolLM2 completions of oar_lite.course.problems word problems, "
                           "with credit scores of the same tokens (scripts/mc_ground_truth.py; read with "
                           "oar_lite.lab.ground_truth.load_ground_truth / ground_truth_table)",
            "settings": settings, "completions": completions}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_json(args.out, data)
    log(f"assemble: wrote {len(completions)} completions to {args.out} ({args.out.stat().st_size / 1024:.0f} KiB)")


def report(args) -> None:
    """The table and summary from the data file, and the figure (no model needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from oar_lite.lab.plots import plot_ground_truth

    data = ground_truth.load_ground_truth(args.out)
    summary = ground_truth.ground_truth_summary(data, threshold=args.threshold)
    print(ground_truth.ground_truth_markdown(ground_truth.ground_truth_table(data, threshold=args.threshold)))
    print(json.dumps(summary, indent=1))
    passes = [c.get("mc_passes", 1) for c in data["completions"]]
    print("\n" + error_statement(summary, passes.count(2)) + "\n")
    for r in sorted({c.get("selection_round", 1) for c in data["completions"]}):
        part = {**data, "completions": [c for c in data["completions"] if c.get("selection_round", 1) == r]}
        n_pivot = ground_truth.ground_truth_summary(part, threshold=args.threshold)["completions_with_pivot"]
        print(f"selection round {r}: {len(part['completions'])} completions, {n_pivot} with a pivot")
        if n_pivot:
            print(ground_truth.ground_truth_markdown(ground_truth.ground_truth_table(part, threshold=args.threshold)))
    print("per completion (round, template, right, R, pivots, largest |delta P|, K at 0 < p < 1):")
    for i, c in enumerate(data["completions"]):
        delta, _ = ground_truth.probability_jumps(c)
        ks = sorted({k for k, p in zip(c["rollouts"], c["p"]) if 0 < p < 1})
        print(f"  {i:2d} r{c.get('selection_round', 1)} {c['template']:15s} {'right' if c['correct'] else 'wrong'} "
              f"R={len(delta):2d} pivots={int((delta.abs() >= args.threshold - 1e-9).sum())} "
              f"max={float(delta.abs().max()):.2f} K={ks}")
    # the figure: the completions with the largest total movement of P, one right and one wrong if there are both
    ranked = sorted(data["completions"], key=lambda r: -float(ground_truth.probability_jumps(r)[0].abs().sum()))
    shown = [next((r for r in ranked if not r["correct"]), None), next((r for r in ranked if r["correct"]), None)]
    shown = [r for r in shown if r is not None] or ranked[:2]
    fig, axes = plt.subplots(2, len(shown), figsize=(6.5 * len(shown), 6), sharex="col", squeeze=False,
                             gridspec_kw={"height_ratios": [1.3, 1]})
    for j, rec in enumerate(shown):
        title = f"{rec['question']}\n({'right' if rec['correct'] else 'wrong'}; answer {rec['answer']})"
        plot_ground_truth(axes[:, j], rec, methods=("oar-p:answer_mean", "oar-p:last", "oar-g:answer_mean"),
                          threshold=args.threshold, title="\n".join(_wrap(title, 70)))
    fig.tight_layout()
    args.figure.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.figure, dpi=110)
    print(f"wrote {args.figure}")


def error_statement(summary: dict, refined: int) -> str:
    """The Monte-Carlo error paragraph of benchmarks/RESULTS.md, from `ground_truth.ground_truth_summary`
    and the number of completions whose pass 2 is done (``refined``)."""
    noise = summary["pivotal_tokens"] - summary["pivotal_tokens_beyond_2se"]
    return (f"**Monte-Carlo error** (from the file, `--phase report`). SE = sqrt(p(1-p)/K) per prefix: "
            f"mean {summary['se_mean']:.3f} over all {summary['prefixes']} prefixes, {summary['se_mean_inside']:.3f} over the "
            f"{summary['prefixes_inside']} strictly inside (0, 1), largest {summary['se_max']:.3f}; "
            f"K = {summary['rollouts_min']}-{summary['rollouts_max']} rollouts per prefix, at least "
            f"{summary['rollouts_inside_min']} wherever 0 < p < 1 (pass 2, K = {summary['rollouts_max']} there, done for "
            f"{refined} of the {summary['completions']} completions). At p = 0 or 1 the formula gives 0, so the file also "
            f"holds the 95% Wilson interval. A jump's SE is sqrt(SE[t]^2 + SE[t+1]^2): "
            f"{summary['pivot_delta_se_mean']:.3f} on average over the {summary['pivotal_tokens']} pivotal tokens "
            f"(|delta P| >= {summary['threshold']}) in {summary['completions_with_pivot']} of the {summary['completions']} "
            f"completions; {summary['pivotal_tokens_beyond_2se']} of them jump by more than 2 SE, the other {noise} may be noise.")


def _wrap(text: str, width: int) -> list[str]:
    import textwrap

    return [line for part in text.split("\n") for line in textwrap.wrap(part, width)]


def main(argv=None) -> None:
    ap = parser(__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--phase", default="all", choices=["select", "mc", "score", "assemble", "all", "report", "rescore"])
    ap.add_argument("--threshold", type=float, default=ground_truth.PIVOT_THRESHOLD, help="pivot threshold (report)")
    ap.add_argument("--figure", type=Path, default=Path(__file__).resolve().parent.parent / "docs" / "ground_truth.png")
    ap.add_argument("--out", type=Path, default=ground_truth.GROUND_TRUTH_PATH)
    ap.add_argument("--work", type=Path, default=Path.home() / ".cache" / "oar-lite" / "mc_ground_truth",
                    help="partial results (resumable)")
    ap.add_argument("--completions", type=int, default=10)
    ap.add_argument("--problems", type=int, default=40,
                    help="most problems sampled for the selection (it stops when it has enough mixed ones)")
    ap.add_argument("--extra-completions", type=int, default=0,
                    help="round 2: this many more, one right and one wrong from each later problem that has both")
    ap.add_argument("--extra-problems", type=int, default=40, help="most problems sampled in round 2")
    ap.add_argument("--problem-seed", type=int, default=0)
    ap.add_argument("--steps", type=int, nargs="+", default=[1], help="template steps (1: one-step problems)")
    ap.add_argument("--group-size", type=int, default=8)
    ap.add_argument("--sample-tokens", type=int, default=40, help="length cap of the sampled completions")
    ap.add_argument("--max-reasoning", type=int, default=20, help="longest reasoning (tokens) kept")
    ap.add_argument("--k", type=int, default=16, help="rollouts per prefix, pass 1")
    ap.add_argument("--k-extra", type=int, default=16, help="more rollouts where pass 1 is strictly inside (0, 1)")
    ap.add_argument("--slack", type=int, default=12, help="continuation cap beyond the completion's remaining length")
    ap.add_argument("--max-new-tokens", type=int, default=36)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--methods", nargs="+", default=list(METHODS))
    ap.add_argument("--only", type=int, nargs="+", help="the Monte-Carlo phase does only these completions")
    ap.add_argument("--only-estimated", action="store_true",
                    help="score only completions whose Monte-Carlo pass 1 is done (for slow scorers)")
    ap.add_argument("--oar-p-batch", type=int, default=8)
    ap.add_argument("--ig-steps", type=int, default=8)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--shard", type=lambda s: tuple(int(x) for x in s.split("/")), default=(0, 1),
                    help="'i/n': the Monte-Carlo phase does completions with index %% n == i (run n processes)")
    args = ap.parse_args(argv)
    args.argv = argv
    torch.set_num_threads(args.threads)
    if args.phase == "report":
        return report(args)
    if args.phase == "rescore":
        model, tokenizer = load_smollm2()
        return rescore(args, model, tokenizer)
    args.work.mkdir(parents=True, exist_ok=True)
    if args.phase == "assemble":  # the tokenizer is all it needs
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(smollm2_cache_path())
        chosen = read_json(args.work / "selection.json", None)
        if chosen is None:
            raise SystemExit(f"nothing to assemble: no {args.work / 'selection.json'}; run --phase select first")
        return assemble(args, tokenizer, chosen, _all_mc(args), read_json(args.work / "scores.json", {}))
    model, tokenizer = load_smollm2()
    chosen = select(args, model, tokenizer)
    if args.phase == "select":
        return
    if args.phase in ("mc", "all"):
        monte_carlo(args, model, tokenizer, chosen)
    mc = _all_mc(args)
    scores = score(args, model, tokenizer, chosen) if args.phase in ("score", "all") else read_json(args.work / "scores.json", {})
    if args.phase in ("assemble", "all"):
        assemble(args, tokenizer, chosen, mc, scores)


if __name__ == "__main__":
    main()
