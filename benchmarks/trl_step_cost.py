"""OAR-P's step under TRL at GSM8K lengths: `OARGRPOTrainer` steps of SmolLM2-135M-Instruct + LoRA,
plain GRPO against OAR-P with its default token budget and with other ``oar_token_budget`` values.

Each method is one `OARGRPOTrainer` (the laptop recipe, `oar_lite.lab.recipes`: LoRA rank 16 on
every linear layer, gradient checkpointing, 2 prompts x 4 completions, one optimizer step per
generation) sharing one model; round ``r`` trains one step per method from the same adapter with
a fresh optimizer, on the same two prompts and the same sampling seed, so the methods sample the
same completions and only OAR's scoring differs (checked: ``same_rollouts``). Rounds are
interleaved, order rotated (`benchmarks.common.interleaved`); the ratio to GRPO is taken within a
round. CPU seconds of the process (one torch thread) for the whole ``trainer.train()`` call, and
for OAR's scoring alone (``_oar_weights``).

Completions that reach GSM8K lengths: SmolLM2 writes about 90 tokens on the course's prompts
(benchmarks/RESULTS.md, "OAR-P on SmolLM2 + LoRA"), so the prompt here shows one worked example
written out at length (`LONG_SHOT`, about 220 tokens): the model then writes 100-256 tokens.
The reward is the cost-only `benchmarks.step_cost.spread_reward` (its values mean nothing; every
group gets a spread). OAR scores every completion that states an answer, whatever its reward.

What the budget changes: ``oar_token_budget`` bounds the tokens OAR-P holds per forward pass
(memory); it packs the same perturbed copies into more or fewer passes and changes no score beyond
rounding. Its price in quality is measured twice: on the benchmark's own completions (each budget's
scores and weights against the default budget's, same rows: Spearman and largest difference), and
with ``--ground-truth``, as AUC against the Monte-Carlo labels on SmolLM2
(`oar_lite.lab.ground_truth`), rescoring the shipped completions with each budget.

Run (offline, from the repository root)::

    python -m benchmarks.trl_step_cost --max-completion-length 256 --budgets 1024 16384 \\
        --warmup 0 --repeats 2 --ground-truth --no-progress --out $RUNS/trl_step_cost_256.json

Writes ``benchmarks/results/trl_step_cost.json`` (or ``--out``) after every round, and prints a
markdown table.
"""
from __future__ import annotations

import hashlib
import statistics
import tempfile
import time

import torch

from benchmarks import common
from benchmarks.step_cost import spread_reward

GRPO = "grpo"
OAR_P = "oar-p"

INSTRUCTION = 'Solve it step by step, explaining each step in full sentences, then write "The answer is" and the number.'
LONG_SHOT = (
    "Kim buys 4 pens at $3 each and 2 notebooks at $5 each. She pays with $30. How many dollars does she get back?",
    "Let me work through this problem carefully, one step at a time.\n"
    "First, I need to find out how much Kim spends on the pens. She buys 4 pens, and each pen costs $3. "
    "So the pens cost 4 * 3 = 12 dollars in total.\n"
    "Next, I need to find out how much she spends on the notebooks. She buys 2 notebooks, and each notebook costs $5. "
    "So the notebooks cost 2 * 5 = 10 dollars in total.\n"
    "Now I add the two amounts to get everything she spends. The pens and the notebooks together cost "
    "12 + 10 = 22 dollars.\n"
    "Finally, she pays with a $30 bill, so the change she gets back is what she paid minus what she spent. "
    "That is 30 - 22 = 8 dollars.\n"
    "Let me check the result: 22 dollars spent plus 8 dollars back makes 30 dollars, which is what she paid, "
    "so the answer is consistent.\n"
    "The answer is 8.",
)
"""One worked example written out at length (about 220 SmolLM2 tokens): shown before the question,
it makes SmolLM2 write 100-256 tokens instead of about 90."""

FIRST_SEED = 1000
"""Round ``r`` samples with seed ``FIRST_SEED + r`` and trains on the problems ``2r, 2r + 1``."""


def long_prompt(question: str) -> list[dict]:
    """The chat messages of one question after `LONG_SHOT` (TRL's conversational format)."""
    return [{"role": "user", "content": f"{LONG_SHOT[0]}\n{INSTRUCTION}"},
            {"role": "assistant", "content": LONG_SHOT[1]},
            {"role": "user", "content": f"{question}\n{INSTRUCTION}"}]


def trl_spread_reward(completions, **kwargs) -> list[float]:
    """`benchmarks.step_cost.spread_reward` as a TRL reward function."""
    texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
    return [spread_reward(text, {}) for text in texts]


def method_names(budgets) -> list[str]:
    """``["grpo", "oar-p", "oar-p@<budget>", ...]``."""
    return [GRPO, OAR_P, *(f"{OAR_P}@{b}" for b in budgets)]


def _budget(method: str) -> int | None:
    return int(method.split("@")[1]) if "@" in method else None


def make_trainers(model, tokenizer, methods, *, prompts: int, group_size: int, max_completion_length: int,
                  lora_rank: int, out_dir: str):
    """One `OARGRPOTrainer` per method (timed: `bench` records each step's CPU seconds), all on one
    peft model; returns ``(trainers, adapter parameters)``."""
    from peft import get_peft_model

    from oar_lite.attribution import PLAIN_GRPO
    from oar_lite.lab.recipes import lora_adapter, recipe_config
    from oar_lite.trl import OARGRPOTrainer

    class TimedTrainer(OARGRPOTrainer):
        """Records the CPU seconds of generation + scoring and of OAR's weights, the completions and the scores."""

        def _generate_and_score_completions(self, inputs):
            start = time.process_time()
            output = super()._generate_and_score_completions(inputs)
            self.bench["generate_and_score"] = time.process_time() - start
            lengths = output["completion_mask"].sum(1)
            self.bench["completion_lengths"] = lengths.tolist()
            self.bench["rollouts"] = hashlib.sha1(output["completion_ids"].cpu().numpy().tobytes()).hexdigest()
            return output

        def _oar_weights(self, output):
            start = time.process_time()
            weights, reasoning, no_answer = super()._oar_weights(output)
            self.bench["attribute"] = time.process_time() - start
            self.bench["scored"] = [(s.detach().clone(), w.detach().clone()) for s, w in self._oar_scored]
            self.bench["reasoning_lengths"] = reasoning.sum(1).tolist()
            return weights, reasoning, no_answer

    from datasets import Dataset

    model = get_peft_model(model, lora_adapter(lora_rank))
    placeholder = Dataset.from_list([{"prompt": long_prompt("What is 1 + 1?")}] * prompts)
    trainers = {}
    for m in methods:
        budget = _budget(m)
        config = recipe_config(
            "laptop", f"{out_dir}/{m}", steps=1, oar_method=PLAIN_GRPO if m == GRPO else OAR_P,
            answer_formats=["answer_is"], seed=0, device="cpu", prompts_per_step=prompts, num_generations=group_size,
            micro_batch=prompts * group_size, max_completion_length=max_completion_length, save_strategy="no",
            logging_steps=1, disable_tqdm=True, dataloader_num_workers=0,
            **({"oar_token_budget": budget} if budget is not None else {}))
        trainer = TimedTrainer(model=model, reward_funcs=[trl_spread_reward], args=config, train_dataset=placeholder,
                               processing_class=tokenizer)
        trainer.bench = {}
        trainers[m] = trainer
    params = {n: p for n, p in model.named_parameters() if p.requires_grad}
    return trainers, params


def score_agreement(reference: list, other: list) -> dict:
    """Each scored row's scores and weights under a budget against the default budget's, same
    rows: the smallest Spearman rank correlation of the scores, the largest absolute difference
    of the scores and of the weights."""
    from oar_lite.lab.stats import rank_agreement

    if len(reference) != len(other):
        raise ValueError(f"different rows scored: {len(reference)} and {len(other)}")
    rhos = [rank_agreement(a.double(), b.double()) for (a, _), (b, _) in zip(reference, other) if a.numel() > 1]
    rhos = [r for r in rhos if r == r]  # NaN: constant scores
    return {"rows": len(reference),
            "min_spearman": min(rhos) if rhos else None,
            "max_abs_score_diff": max((float((a - b).abs().max()) for (a, _), (b, _) in zip(reference, other)), default=0.0),
            "max_abs_weight_diff": max((float((a - b).abs().max()) for (_, a), (_, b) in zip(reference, other)), default=0.0)}


def ground_truth_auc(model, tokenizer, budgets, *, mode: str = "last", completions: int | None = None) -> dict:
    """OAR-P's AUC (pivotal tokens against the other reasoning tokens, `oar_lite.lab.ground_truth`)
    over the shipped SmolLM2 ground-truth completions, rescored with each token budget (None: the
    default), and the scores' largest difference to the default budget's; CPU seconds of each rescoring.
    ``completions``: only the first that many (default: all)."""
    from oar_lite.attribution import perturbation_scores
    from oar_lite.lab.ground_truth import PIVOT_THRESHOLD, load_ground_truth, probability_jumps, rebuilt_sequence
    from oar_lite.lab.stats import roc_auc

    data = load_ground_truth()
    out, reference = {}, None
    for budget in [None, *budgets]:
        start, aucs, scores = time.process_time(), [], []
        for c in data["completions"][:completions]:
            ids, _, reasoning, answer = rebuilt_sequence(c, tokenizer)
            s = perturbation_scores(model, ids, reasoning, answer, mode=mode, pad_token_id=tokenizer.pad_token_id,
                                    token_budget=budget)
            delta, _ = probability_jumps(c)
            pivotal = delta.abs() >= PIVOT_THRESHOLD
            auc = roc_auc(s, pivotal)
            if auc == auc:
                aucs.append(auc)
            scores.append(s)
        name = "default" if budget is None else str(budget)
        out[name] = {"auc": statistics.mean(aucs), "completions_with_auc": len(aucs),
                     "cpu_seconds": time.process_time() - start}
        if reference is None:
            reference = scores
        out[name]["max_abs_score_diff_vs_default"] = max(float((a - b).abs().max()) for a, b in zip(reference, scores))
        print(f"[ground truth] budget {name}: AUC {out[name]['auc']:.4f} over {len(aucs)} completions, "
              f"largest score difference to the default {out[name]['max_abs_score_diff_vs_default']:.2e}", flush=True)
    return out


def render(report: dict) -> str:
    res = report.get("result")
    if not res:
        return "(no rounds finished)"
    s = report["settings"]
    rows = []
    for m, r in res["methods"].items():
        rows.append([m, common.fmt(r["step"], ""), common.fmt(r["ratio_vs_grpo"], "x") if m != GRPO else "1",
                     f"{r['attribute']['median']:.1f}" if r["attribute"] else "-",
                     f"{r['completion_tokens']:.0f}", f"{r['reasoning_tokens']:.0f}" if r["reasoning_tokens"] else "-",
                     f"{r['rows_scored']:.1f}/{s['prompts'] * s['group_size']}"])
    from oar_lite.lab import report as tables

    lines = [f"SmolLM2-135M-Instruct + LoRA rank {s['lora_rank']} through OARGRPOTrainer, {s['prompts']} prompts x "
             f"{s['group_size']} completions, up to {s['max_completion_length']} tokens; {common.rounds(report)}; "
             f"same rollouts across methods: {res['same_rollouts']}; {common.machine_line(report['machine'])}.", "",
             *tables.markdown_table(["method", "step (CPU s)", "vs GRPO (paired)", "OAR scoring (CPU s, median)",
                                     "completion tokens (mean)", "reasoning tokens scored (mean)", "rows scored"], rows)]
    if res.get("agreement"):
        lines += ["", "Budgets against the default budget, same rows: " + "; ".join(
            f"{m}: min Spearman {'-' if a['min_spearman'] is None else format(a['min_spearman'], '.6f')}, largest "
            f"score difference {a['max_abs_score_diff']:.1e}, largest weight difference {a['max_abs_weight_diff']:.1e} "
            f"({a['rows']} rows)" for m, a in res["agreement"].items())]
    if report.get("ground_truth"):
        lines += ["", "Ground-truth AUC (OAR-P `last`): " + "; ".join(
            f"budget {b}: {g['auc']:.4f} ({g['completions_with_auc']} completions, largest score difference "
            f"{g['max_abs_score_diff_vs_default']:.1e})" for b, g in report["ground_truth"].items())]
    return "\n".join(lines)


def summarize(methods, rounds_log: list[dict]) -> dict:
    """Per method: step and scoring seconds, ratio to GRPO within each kept round, lengths, rows scored;
    per budget: agreement with the default budget's scores on the same rows, pooled over rounds."""
    kept = [r for r in rounds_log if not r["warmup"]]
    out = {"methods": {}, "same_rollouts": all(len(set(r["rollouts"].values())) == 1 for r in rounds_log)}
    for m in methods:
        steps = [r["step_seconds"][m] for r in kept]
        attribute = [r["attribute_seconds"][m] for r in kept if r["attribute_seconds"][m] is not None]
        out["methods"][m] = {
            "step": common.spread(steps),
            "ratio_vs_grpo": common.spread([r["step_seconds"][m] / r["step_seconds"][GRPO] for r in kept]),
            "attribute": common.spread(attribute) if attribute else None,
            "completion_tokens": statistics.mean(x for r in kept for x in r["completion_lengths"][m]),
            "reasoning_tokens": statistics.mean(x for r in kept for x in r["reasoning_lengths"][m] if x)
            if m != GRPO and any(any(r["reasoning_lengths"][m]) for r in kept) else None,
            "rows_scored": statistics.mean(r["rows_scored"][m] for r in kept),
        }
    agreement = {}
    for m in methods:
        if _budget(m) is None:
            continue
        per_round = [r["agreement"][m] for r in kept if r["agreement"].get(m)]
        if per_round:
            spearman = [a["min_spearman"] for a in per_round if a["min_spearman"] is not None]
            agreement[m] = {"rows": sum(a["rows"] for a in per_round), "min_spearman": min(spearman) if spearman else None,
                            "max_abs_score_diff": max(a["max_abs_score_diff"] for a in per_round),
                            "max_abs_weight_diff": max(a["max_abs_weight_diff"] for a in per_round)}
    out["agreement"] = agreement
    return out


def main(argv=None) -> dict:
    ap = common.parser(__doc__, "trl_step_cost.json", warmup=0, repeats=2)
    ap.add_argument("--max-completion-length", type=int, default=256)
    ap.add_argument("--budgets", type=int, nargs="*", default=[],
                    help="oar_token_budget values to run beside the default budget (OAR-P), each as a method")
    ap.add_argument("--prompts", type=int, default=2, help="prompts per step")
    ap.add_argument("--group-size", type=int, default=4)
    ap.add_argument("--lora-rank", type=int, default=16)
    ap.add_argument("--steps", type=int, nargs="+", default=[2, 3], choices=[1, 2, 3],
                    help="the word problems' step counts")
    ap.add_argument("--ground-truth", action="store_true",
                    help="also rescore the shipped Monte-Carlo ground truth with each budget (AUC)")
    ap.add_argument("--ground-truth-completions", type=int, default=None,
                    help="with --ground-truth, only the first this many completions (default: all)")
    args = ap.parse_args(argv)
    if any(b < 1 for b in args.budgets):
        raise ValueError(f"--budgets must be >= 1 tokens per pass, got {args.budgets}")
    if args.device != "cpu":
        raise ValueError("this benchmark runs on the CPU (--device cpu): the recipe and the clock are the CPU's")
    from transformers import set_seed

    from oar_lite.course.models import load_smollm2
    from oar_lite.course.problems import make_problems

    methods = method_names(args.budgets)
    device, report = common.start(args, "trl_step_cost", argv, settings={
        "prompts": args.prompts, "group_size": args.group_size, "max_completion_length": args.max_completion_length,
        "lora_rank": args.lora_rank, "word_steps": args.steps, "recipe": "laptop", "reward": "spread",
        "budgets": args.budgets, "long_shot": True})
    model, tokenizer = load_smollm2()
    rounds_needed = args.warmup + args.repeats
    problems = make_problems(args.prompts * rounds_needed, seed=7, steps=list(args.steps))
    from datasets import Dataset

    with tempfile.TemporaryDirectory() as out_dir:
        trainers, params = make_trainers(model, tokenizer, methods, prompts=args.prompts, group_size=args.group_size,
                                         max_completion_length=args.max_completion_length, lora_rank=args.lora_rank,
                                         out_dir=out_dir)
        start = {n: p.detach().clone() for n, p in params.items()}
        report["settings"]["bf16"] = trainers[GRPO].args.bf16
        report["settings"]["trainable_parameters"] = sum(p.numel() for p in params.values())

        def run(method, r):
            with torch.no_grad():
                for n, p in params.items():
                    p.copy_(start[n])
            trainer = trainers[method]
            trainer.optimizer, trainer.lr_scheduler, trainer.bench = None, None, {}
            first = args.prompts * (r + args.warmup)
            trainer.train_dataset = Dataset.from_list(
                [{"prompt": long_prompt(p.question)} for p in problems[first:first + args.prompts]])
            set_seed(FIRST_SEED + r)
            trainer.train()
            return dict(trainer.bench)

        rounds_log: list[dict] = []

        def after_round(r, results):
            benches = {m: res for m, (_, res) in results.items()}
            entry = {"round": r, "warmup": r < 0,
                     "step_seconds": {m: t for m, (t, _) in results.items()},
                     "attribute_seconds": {m: b.get("attribute") for m, b in benches.items()},
                     "generate_and_score_seconds": {m: b.get("generate_and_score") for m, b in benches.items()},
                     "completion_lengths": {m: b.get("completion_lengths") for m, b in benches.items()},
                     "reasoning_lengths": {m: b.get("reasoning_lengths", []) for m, b in benches.items()},
                     "rows_scored": {m: len(b.get("scored", [])) for m, b in benches.items()},
                     "rollouts": {m: b.get("rollouts") for m, b in benches.items()},
                     "agreement": {m: score_agreement(benches[OAR_P]["scored"], b["scored"])
                                   for m, b in benches.items() if _budget(m) is not None}}
            rounds_log.append(entry)
            base = entry["step_seconds"][GRPO]
            print(f"round {r}{' (warm-up)' if r < 0 else ''}: " + ", ".join(
                f"{m} {t:.1f} s" + (f" ({t / base:.2f}x, scoring {entry['attribute_seconds'][m]:.1f} s)" if m != GRPO else "")
                for m, t in entry["step_seconds"].items())
                + f"; completion tokens {entry['completion_lengths'][GRPO]}; load {common.loadavg()}", flush=True)
            report["rounds"] = rounds_log
            common.write_json(report, args.out)

        common.interleaved({m: (lambda r, m=m: run(m, r)) for m in methods}, warmup=args.warmup,
                           repeats=args.repeats, progress=not args.no_progress, after_round=after_round)
        report["result"] = summarize(methods, rounds_log)
        report["loadavg"] = common.loadavg()
        common.write_json(report, args.out)
        if args.ground_truth:
            with torch.no_grad():  # the adapter as it started (LoRA B = 0: the base model, which the labels were made with)
                for n, p in params.items():
                    p.copy_(start[n])
            report["ground_truth"] = ground_truth_auc(trainers[GRPO].model, tokenizer, args.budgets,
                                                      completions=args.ground_truth_completions)
    return common.finish(report, args.out, render)


if __name__ == "__main__":
    main()
