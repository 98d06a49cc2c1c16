"""OAR-P three ways on the same sequences: the project's batched version, the naive
per-position loop, and Captum's ``LLMAttribution(FeatureAblation)``; same scores, then
time, peak memory and the tokens each one runs through the model.

Making the quantities equal. Captum's LLM wrapper attributes the *log-probability of
the target tokens*: with the answer tokens a_1..a_A as target and the pad token as
baseline, feature ablation of reasoning token t gives

    captum_t = sum_k log p(a_k | x) - sum_k log p(a_k | x^(t)) = A * (phi - phi^(t)),

where phi is the mean answer log-probability, OAR's ``answer_joint`` outcome. OAR-P in
mode ``answer_joint`` scores ``max(0, phi - phi^(t))``, so the benchmark asserts
``max(0, captum_t / A) == oar_p_t`` up to float error. (The ``last`` and ``answer_mean``
modes score a KL divergence between distributions, which Captum's wrapper has no target
for.) Captum perturbs only the reasoning positions: `SpanTokenInput` is Captum's
``TextTokenInput`` with its interpretable mask set to a span of positions instead of a
list of token ids to skip. The model input is ``x[:answer.start]`` (prompt, reasoning,
conclude marker), the target the answer tokens.

Captum is timed with ``forward_in_tokens=False``: one teacher-forced pass per
perturbation, the same work per perturbation as the naive loop (the fair comparison).
Its LLM wrapper takes one perturbation per forward pass (``perturbations_per_eval=1``:
the target is concatenated to a batch of 1). ``--implementations captum_tokens`` adds
``forward_in_tokens=True, use_cached_outputs=False`` (A growing passes per perturbation).
Captum's default, ``forward_in_tokens=True, use_cached_outputs=True``, is *wrong* with
transformers 5.x: Captum keeps the prefix in a KV cache and expects
``prepare_inputs_for_generation`` to cut the input to the new token from
``cache_position``; transformers 5 cuts on ``next_sequence_length`` instead, which
Captum never sets, so from the second answer token on the whole sequence is fed again
on top of the cache. The benchmark records the size of that error on the first
sequence of each model (``captum_default_max_abs_diff``) and does not time it.

Work (issue 7, item 3): the naive loop runs (R + 1) full passes of T tokens; with prefix
reuse, a perturbed copy of position t need only recompute positions t..end, so the ideal
is ``end + sum_t (end - t)``, about ``R * T / 2`` when the reasoning fills the sequence.
The batched version (``perturbation_scores`` at its defaults) reuses the prefix per chunk
of consecutive positions (`oar_lite.attribution.plan_passes`: a token budget per pass
chosen by device, and at most ``max_waste`` extra work, 15% by default), and counts the tokens it runs
(``stats["forward_tokens"]``). ``fixed64`` is the chunking before issue 17 (chunks of 64
copies from the first reasoning position, no budget): same scores, more tokens.
``batch1`` (``--implementations batched batch1``) calls `perturbation_scores_batch` on the
one row itself (issue 40 item 5 compared it with the one-sequence path this replaced).

Run (offline, from the repository root)::

    .venv/bin/python -m benchmarks.oar_p_implementations --model toy smollm2 --repeats 5
    .venv/bin/python -m benchmarks.oar_p_implementations --model smollm2 --device cuda

Targets: `TARGET_VS_CAPTUM`, `TARGET_OVER_IDEAL`. Writes ``benchmarks/results/oar_p_implementations.json`` and prints markdown tables.
"""
from __future__ import annotations

import functools

import torch

from benchmarks import common
from oar_lite.lab import report as tables

IMPLEMENTATIONS = ("batched", "batch1", "fixed64", "naive", "captum", "captum_tokens")
DEFAULT_IMPLEMENTATIONS = ("batched", "fixed64", "naive", "captum")
TARGET_VS_CAPTUM = {"smollm2": 5.0, "toy": 4.0}  # issue 17: OAR-P at its defaults this many times faster, scores equal to 1e-5
TARGET_OVER_IDEAL = 1.15  # issue 17: OAR-P's tokens run <= 1.15x the ideal count


# ----------------------------------------------------------------------------- Captum

def _span_token_input_class():
    from captum.attr import TextTokenInput

    class SpanTokenInput(TextTokenInput):
        """Captum's ``TextTokenInput`` over given token ids, whose interpretable features
        are the tokens of one span of positions (the reasoning); the others stay fixed."""

        def __init__(self, input_ids: torch.Tensor, span: slice, tokenizer, baseline: int):
            # Not TextTokenInput.__init__: that re-tokenises text and selects by token id.
            self.inp_tensor = input_ids[None].cpu()
            mask = torch.zeros_like(self.inp_tensor, dtype=torch.bool)
            mask[0, span] = True
            self.itp_mask = mask
            self.itp_tensor = self.inp_tensor[mask][None]
            self.skip_tokens = None
            self.values = tokenizer.convert_ids_to_tokens(self.itp_tensor[0].tolist())
            self.tokenizer = tokenizer
            self.n_itp_features = len(self.values)
            self.baselines = int(baseline)

    return SpanTokenInput


def captum_scores(model, tokenizer, input_ids: torch.Tensor, reasoning: slice, answer: slice, *,
                  pad_token_id: int, forward_in_tokens: bool = False, use_cached_outputs: bool = False) -> torch.Tensor:
    """Captum's ``LLMAttribution(FeatureAblation)`` over the reasoning tokens: ``[R]``
    sequence attributions ``sum_k log p(a_k | x) - sum_k log p(a_k | x^(t))``."""
    from captum.attr import FeatureAblation, LLMAttribution

    from oar_lite.attribution import eval_mode

    inp = _span_token_input_class()(input_ids[: answer.start], reasoning, tokenizer, pad_token_id)
    llm = LLMAttribution(FeatureAblation(model), tokenizer)
    with eval_mode(model):
        result = llm.attribute(inp, target=input_ids[answer].cpu(), forward_in_tokens=forward_in_tokens,
                               use_cached_outputs=use_cached_outputs)
    return result.seq_attr.detach().float().cpu()


# ----------------------------------------------------------------------------- sequences

def sample_sequences(model_name: str, model, tokenizer, n: int, *, min_reasoning: int, max_reasoning: int,
                     seed: int = 0, shots: int = 1, max_new_tokens: int | None = None, device="cpu"):
    """``n`` sampled completions with a parseable answer and ``min..max`` reasoning tokens,
    as ``(input_ids [T], reasoning, answer)`` with the padding stripped."""
    from oar_lite.rollout import sample_completions

    if model_name == "toy":
        from oar_lite.course import toy

        prompts = [p["prompt"] for p in toy.load_eval_set()[: 4 * n]]
        formats, special, new = toy.FORMATS, True, max_new_tokens or 66
    else:
        from oar_lite.course.problems import format_prompt, make_problems
        from oar_lite.segment import FORMATS

        prompts = [format_prompt(p, tokenizer, shots=shots) for p in make_problems(4 * n, seed=seed)]
        formats, special, new = FORMATS, False, max_new_tokens or 160
    found = []
    for i in range(0, len(prompts), 4):
        r = sample_completions(model, tokenizer, prompts[i:i + 4], group_size=2, max_new_tokens=new,
                               temperature=1.0, formats=formats, add_special_tokens=special, seed=seed + i)
        for row, seg in enumerate(r.segments):
            if seg is None:
                continue
            R = seg.reasoning.stop - seg.reasoning.start
            if not min_reasoning <= R <= max_reasoning:
                continue
            valid = r.attention_mask[row].bool()
            off = int(valid.nonzero()[0])
            ids = r.input_ids[row][valid].to(device)
            seg = seg.shift(r.prompt_length - off)
            found.append((ids, seg.reasoning, seg.answer))
            if len(found) == n:
                return found
    if not found:
        raise RuntimeError(f"no sampled completion had a parseable answer and {min_reasoning}-{max_reasoning} "
                           "reasoning tokens")
    return found


# ----------------------------------------------------------------------------- the benchmark

def token_counts(input_ids, reasoning: slice, answer: slice, batched_tokens: int) -> dict:
    """Tokens through the model: measured (batched) and the analytic counts of the others."""
    T, end, A = input_ids.numel(), answer.stop - 1, answer.stop - answer.start
    R = reasoning.stop - reasoning.start
    bounds = common.token_bounds(T, reasoning, end)
    return {"T": T, "R": R, "A": A, "end": end, "batched": batched_tokens, "naive": bounds["naive"],
            "captum": (R + 1) * (answer.start + A), "ideal_prefix_reuse": bounds["ideal"], "half_RT": bounds["half_RT"]}


def measure_sequence(model, tokenizer, ids, reasoning, answer, *, implementations, warmup, repeats, batch_size,
                     device, tolerance: float, progress: bool, check_captum_default: bool = False,
                     extra_batch_sizes=(), extra_max_waste=(), token_budget: int | None = None) -> dict:
    from oar_lite.attribution import perturbation_scores, perturbation_scores_batch, perturbation_scores_naive

    pad = tokenizer.pad_token_id
    A = answer.stop - answer.start
    stats: dict = {}
    fixed_stats: dict = {}
    extra_stats: dict = {b: {} for b in extra_batch_sizes}
    waste_stats: dict = {w: {} for w in extra_max_waste}
    oar_p = functools.partial(perturbation_scores, model, ids, reasoning, answer, mode="answer_joint", pad_token_id=pad)
    captum = functools.partial(captum_scores, model, tokenizer, ids, reasoning, answer, pad_token_id=pad)
    calls = {
        "batched": lambda: oar_p(batch_size=batch_size, token_budget=token_budget, stats=stats),
        # the padded-batch scorer on this one row (B = 1): what token_scores would run without the per-row path
        "batch1": lambda: perturbation_scores_batch(model, ids[None], torch.ones_like(ids)[None], [reasoning], [answer],
                                                    mode="answer_joint", pad_token_id=pad, batch_size=batch_size,
                                                    token_budget=token_budget)[0],
        "fixed64": lambda: oar_p(batch_size=64, token_budget=10**12, max_waste=float("inf"), stats=fixed_stats),
        "naive": lambda: perturbation_scores_naive(model, ids, reasoning, answer, mode="answer_joint",
                                                   pad_token_id=pad),
        "captum": captum,
        "captum_tokens": lambda: captum(forward_in_tokens=True),
    }
    implementations = list(implementations)
    for b in extra_batch_sizes:  # the batched version with other chunk sizes: tokens vs time vs memory
        calls[f"batched_bs{b}"] = lambda b=b: oar_p(batch_size=b, stats=extra_stats[b])
        implementations.append(f"batched_bs{b}")
    for w in extra_max_waste:  # the default with other waste bounds: fewer, larger passes against more tokens
        calls[f"batched_w{w:g}"] = (lambda w=w: oar_p(batch_size=batch_size, token_budget=token_budget, max_waste=w,
                                                      stats=waste_stats[w]))
        implementations.append(f"batched_w{w:g}")
    runs = common.timed_then_memory({k: calls[k] for k in implementations}, warmup=warmup, repeats=repeats,
                                    device=device, progress=progress)
    times = {k: runs[k]["seconds"] for k in implementations}
    scores = {k: runs[k]["result"].float().cpu() for k in implementations}
    # Same quantity: Captum's attribution is A * (phi - phi~); OAR-P clamps phi - phi~ at 0.
    for k in ("captum", "captum_tokens"):
        if k in scores:
            scores[k] = (scores[k] / A).clamp(min=0)
    ref = scores.get("batched", next(iter(scores.values())))
    scale = float(ref.abs().max()) or 1.0
    agreement = {k: float((s - ref).abs().max()) for k, s in scores.items()}
    for k, err in agreement.items():
        if err > tolerance * max(scale, 1.0):
            raise AssertionError(f"{k} scores differ from the batched OAR-P by {err:.3g} (max |score| {scale:.3g}); "
                                 f"expected agreement within {tolerance:g} x max(1, max |score|)")
    if check_captum_default:  # Captum's default path: wrong with transformers 5 (module docstring); not timed
        cached = captum(forward_in_tokens=True, use_cached_outputs=True)
        agreement["captum_default_unchecked"] = float(((cached / A).clamp(min=0) - ref).abs().max())
    out = {"tokens": {**token_counts(ids, reasoning, answer, stats.get("forward_tokens", 0)),
                      "fixed64": fixed_stats.get("forward_tokens")},
           "max_pass_tokens": stats.get("max_pass_tokens"),
           "tokens_by_batch_size": {b: st.get("forward_tokens") for b, st in extra_stats.items()},
           "work_by_max_waste": {f"{w:g}": [st.get("forward_tokens"), st.get("forward_passes")]
                                 for w, st in waste_stats.items()},
           "forward_passes": stats.get("forward_passes"), "max_abs_score": scale, "max_abs_diff": agreement,
           "time": {k: common.spread(v) for k, v in times.items()},
           "peak_mib": {k: (common.spread(runs[k]["peak_mib"]) if runs[k]["peak_mib"] else None)
                        for k in implementations}}
    if "batched" in implementations:
        out["speedup"] = common.paired_ratios(times, "batched")
    return out


def measure_rows(model, tokenizer, seqs, *, warmup, repeats, device, tolerance: float, progress: bool,
                 batch_size=None, token_budget: int | None = None) -> dict:
    """All sampled sequences scored together, as `token_weights` scores a training batch:
    `perturbation_scores_batch` on the left-padded rows ("rows", the default path of
    training), against `perturbation_scores` on each row and Captum on each row (summed
    per round). Interleaved rounds; scores checked equal to ``tolerance``."""
    from oar_lite.attribution import perturbation_scores, perturbation_scores_batch

    pad = tokenizer.pad_token_id
    T = max(ids.numel() for ids, _, _ in seqs)
    input_ids = torch.full((len(seqs), T), pad, dtype=seqs[0][0].dtype, device=device)
    attention_mask = torch.zeros((len(seqs), T), dtype=torch.long, device=device)
    reasoning, answer = [], []
    for i, (ids, r, a) in enumerate(seqs):
        off = T - ids.numel()
        input_ids[i, off:], attention_mask[i, off:] = ids, 1
        reasoning.append(slice(r.start + off, r.stop + off))
        answer.append(slice(a.start + off, a.stop + off))
    stats: dict = {}
    calls = {
        "rows": lambda r: perturbation_scores_batch(model, input_ids, attention_mask, reasoning, answer,
                                                    mode="answer_joint", pad_token_id=pad, batch_size=batch_size,
                                                    token_budget=token_budget, stats=stats),
        "per_row": lambda r: [perturbation_scores(model, ids, rs, ans, mode="answer_joint", pad_token_id=pad,
                                                  batch_size=batch_size, token_budget=token_budget)
                              for ids, rs, ans in seqs],
        "captum": lambda r: [(captum_scores(model, tokenizer, ids, rs, ans, pad_token_id=pad)
                              / (ans.stop - ans.start)).clamp(min=0) for ids, rs, ans in seqs],
    }
    runs = common.interleaved(calls, warmup=warmup, repeats=repeats, device=device, progress=progress)
    times = {k: [seconds for seconds, _ in v] for k, v in runs.items()}
    last = {k: [s.float().cpu() for s in v[-1][1]] for k, v in runs.items()}
    scale = max(float(s.abs().max()) for s in last["rows"]) or 1.0
    agreement = {k: max(float((s - ref).abs().max()) for s, ref in zip(v, last["rows"])) for k, v in last.items()}
    for k, err in agreement.items():
        if err > tolerance * max(scale, 1.0):
            raise AssertionError(f"{k} scores differ from perturbation_scores_batch by {err:.3g} (max |score| "
                                 f"{scale:.3g}); expected agreement within {tolerance:g} x max(1, max |score|)")
    ideal = sum(common.token_bounds(ids.numel(), r, a.stop - 1)["ideal"] for ids, r, a in seqs)
    return {"rows": len(seqs), "reasoning_tokens": sum(r.stop - r.start for _, r, _ in seqs),
            "time": {k: common.spread(v) for k, v in times.items()},
            "vs_rows": common.paired_ratios(times, "rows"), "max_abs_diff": agreement, "max_abs_score": scale,
            "tokens": stats.get("forward_tokens"), "ideal_tokens": ideal, "forward_passes": stats.get("forward_passes"),
            "max_pass_held_tokens": stats.get("max_pass_held_tokens"), "loadavg": common.loadavg()}


def render(report: dict) -> str:
    names = {"batched": "OAR-P (project, defaults)", "batch1": "OAR-P, the padded-batch scorer with B = 1",
             "fixed64": "OAR-P, chunks of 64 from the first position (before)",
             "naive": "naive loop (full logits)",
             "captum": "Captum FeatureAblation", "captum_tokens": "Captum, token by token, no cache"}
    lines = []
    for res in report["models"]:
        timing, tokens = [], []
        for i, seq in enumerate(res["sequences"]):
            tk, before = seq["tokens"], seq["tokens"].get("fixed64")
            names.update({f"batched_bs{b}": f"OAR-P batched, batch_size {b} ({n} tokens)"
                          for b, n in seq["tokens_by_batch_size"].items()})
            names.update({f"batched_w{w}": f"OAR-P, max_waste {w} ({n} tokens, {p} passes)"
                          for w, (n, p) in seq.get("work_by_max_waste", {}).items()})
            timing += [[i, tk["T"], tk["R"], tk["A"], names[k], common.fmt(t, ""),
                        common.fmt(seq.get("speedup", {}).get(k), "x"), common.fmt(seq["peak_mib"][k], "", 0, "n/a"),
                        f"{seq['max_abs_diff'][k]:.1e}"] for k, t in seq["time"].items()]
            tokens.append([i, tk["T"], tk["R"], tk["batched"], before, tk["ideal_prefix_reuse"], f"{tk['half_RT']:.0f}",
                           tk["naive"], f"{tk['batched'] / tk['ideal_prefix_reuse']:.3f}",
                           before and f"{before / tk['ideal_prefix_reuse']:.2f}", f"{tk['batched'] / tk['naive']:.3f}",
                           seq.get("max_pass_tokens")])
        lines += [f"**{res['model']}**, {len(res['sequences'])} sampled sequence(s), mode answer_joint, "
                  f"batch_size {report['batch_size']}, token_budget {report.get('token_budget')}, "
                  f"{common.rounds(report)} (median [min-max], paired ratios):", "",
                  *tables.markdown_table(["seq", "T", "R", "A", "implementation", "time (s)", "time / batched (paired)",
                                          "peak MiB", "max abs diff vs batched"], timing),
                  "", "Tokens run through the model (item 3):", "",
                  *tables.markdown_table(["seq", "T", "R", "batched (measured)", "chunks of 64 (before)",
                                          "ideal prefix reuse", "R*T/2", "naive (R+1)*T", "batched / ideal",
                                          "before / ideal", "batched / naive", "largest pass (tokens)"], tokens)]
        rows = res.get("rows_together")
        if rows:
            names_rows = {"rows": "OAR-P, rows together (perturbation_scores_batch)",
                          "per_row": "OAR-P, row by row (perturbation_scores)", "captum": "Captum FeatureAblation, row by row"}
            lines += ["", f"All {rows['rows']} sequences scored together ({rows['reasoning_tokens']} reasoning tokens), "
                      f"as token_weights scores a batch; {rows['forward_passes']} passes, {rows['tokens']} tokens "
                      f"({rows['tokens'] / rows['ideal_tokens']:.3f}x the ideal {rows['ideal_tokens']}, clean passes' "
                      f"padding included), largest pass {rows['max_pass_held_tokens']} tokens held:", "",
                      *tables.markdown_table(["implementation", "time (s)", "time / rows together (paired)", "max abs diff"],
                                             [[names_rows[k], common.fmt(t, ""), common.fmt(rows["vs_rows"][k], "x"),
                                               f"{rows['max_abs_diff'][k]:.1e}"] for k, t in rows["time"].items()]),
                      ""]
        bad = res["sequences"][0]["max_abs_diff"].get("captum_default_unchecked") if res["sequences"] else None
        if bad is not None:
            lines.append(f"Captum's default path (`forward_in_tokens=True, use_cached_outputs=True`) on sequence 0: "
                         f"max abs diff {bad:.2e} from the others (not timed; see the note on transformers 5).")
        lines.append("")
    return "\n".join(lines)


def main(argv=None) -> dict:
    ap = common.parser(__doc__, "oar_p_implementations.json")
    ap.add_argument("--model", nargs="+", default=["toy", "smollm2"], choices=["toy", "smollm2"])
    ap.add_argument("--implementations", nargs="+", default=list(DEFAULT_IMPLEMENTATIONS), choices=IMPLEMENTATIONS)
    ap.add_argument("--no-captum-default-check", action="store_true",
                    help="skip the (untimed) run of Captum's default cached path that records its error")
    ap.add_argument("--sequences", type=int, default=2, help="sampled sequences per model")
    ap.add_argument("--rows-together", action="store_true",
                    help="also time all sequences scored at once (perturbation_scores_batch, training's path) "
                         "against row by row and Captum")
    ap.add_argument("--per-sequence", type=int, default=None,
                    help="time the implementations one sequence at a time on the first N sequences (default: all)")
    ap.add_argument("--min-reasoning", type=int, default=20)
    ap.add_argument("--max-reasoning", type=int, default=120)
    ap.add_argument("--shots", type=int, default=1, help="worked examples in SmolLM2's prompt")
    ap.add_argument("--batch-size", type=int, default=None, help="OAR-P's row cap per pass (default: none)")
    ap.add_argument("--token-budget", type=int, default=None, help="OAR-P's tokens per pass (default: by device)")
    ap.add_argument("--extra-batch-sizes", nargs="*", type=int, default=[],
                    help="also time the batched version with these chunk sizes (tokens vs time vs memory)")
    ap.add_argument("--extra-max-waste", nargs="*", type=float, default=[],
                    help="also time the default path with these max_waste bounds (passes vs tokens)")
    ap.add_argument("--tolerance", type=float, default=1e-4,
                    help="allowed max |difference| of scores, relative to max(1, max |score|)")
    args = ap.parse_args(argv)
    from oar_lite.attribution import default_token_budget

    device, report = common.start(args, "oar_p_implementations", argv, batch_size=args.batch_size, models=[])
    report["token_budget"] = args.token_budget or default_token_budget(device)
    for name in args.model:
        model, tok = common.load(name, device)
        seqs = sample_sequences(name, model, tok, args.sequences, min_reasoning=args.min_reasoning,
                                max_reasoning=args.max_reasoning, shots=args.shots, device=device)
        res = {"model": name, "sequences": []}
        if args.rows_together:
            res["rows_together"] = measure_rows(model, tok, seqs, warmup=args.warmup, repeats=args.repeats,
                                                device=device, tolerance=args.tolerance, batch_size=args.batch_size,
                                                token_budget=args.token_budget, progress=not args.no_progress)
        for ids, reasoning, answer in seqs[:args.per_sequence]:
            res["sequences"].append(measure_sequence(
                model, tok, ids, reasoning, answer, implementations=args.implementations, warmup=args.warmup,
                repeats=args.repeats, batch_size=args.batch_size, device=device, tolerance=args.tolerance,
                extra_batch_sizes=args.extra_batch_sizes, extra_max_waste=args.extra_max_waste,
                token_budget=args.token_budget,
                progress=not args.no_progress,
                check_captum_default=not args.no_captum_default_check and not res["sequences"]))
            res["sequences"][-1]["loadavg"] = common.loadavg()
        report["models"].append(res)
        print(f"[{name}] load average now {common.loadavg()}", flush=True)
    return common.finish(report, args.out, render)


if __name__ == "__main__":
    main()
