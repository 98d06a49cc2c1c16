"""Package-shortcut submissions for each exercise that re-implements a package function (or
a computation the package or torch already does): the answer cell filled with a call to it.
`python scripts/course.py check-student` runs each in the student notebook and checks that it
passes the public tests (type and shape) and fails the exercise (the hidden tests disable the
function). tests/test_course.py checks that every exercise whose hidden tests use
`oar_lite.course.exercises.forbid` has one here, and the other way round.

SHORTCUTS holds the plain call, one per exercise; MORE_SHORTCUTS other ways to the answer
without computing it (issue 49): another package function that computes the same number, and a
copy of the blocked function made before the check switches it off (`types.FunctionType` on its
``__code__``, which `forbid` catches and the grade report flags). `check-student` also searches
the whole package for a function that, put in place of the student's, passes the hidden test
(`course.package_shortcuts`): the list of functions each exercise must block is derived there,
not typed here.

WRONG holds well-typed wrong answers: for a question, the source of each of its answer cells, in
order (the prediction cell of a predict-then-measure exercise included). Each has the type and
shape the public checks ask for and a wrong value: it must score 0 (`check-grade` grades them,
`check-student` runs them)."""

SHORTCUTS = {
    # 01: the advantages and the loss's token averaging, read off the package
    "ex01_dr_grpo": '''
def dr_grpo_advantages(rewards, group_size):
    return ol.group_advantages(rewards, group_size, scale="none")
''',
    "ex01_averaging": '''
def token_averaging_weights(mask, loss_type):
    lp = torch.zeros(mask.shape, requires_grad=True)
    loss = ol.policy_loss(lp, lp.detach(), torch.ones(mask.shape[0]), mask.float(), loss_type=loss_type)[0]
    return -torch.autograd.grad(loss, lp)[0] * mask.float()
''',
}
SHORTCUTS.update({
    # 02: OAR-P and its token count, from ol.perturbation_scores
    "ex02_joint": '''
def my_answer_joint_scores(model, ids, reasoning, answer, pad):
    return ol.perturbation_scores(model, ids, reasoning, answer, mode="answer_joint", pad_token_id=pad)
''',
    "ex02_tokens": '''
def predicted_forward_tokens(reasoning, end, batch_size):
    stats = {}
    ol.perturbation_scores(model, ids, reasoning, answer, mode="last", pad_token_id=pad, batch_size=batch_size,
                           stats=stats, token_budget=10**9, max_waste=float("inf"))
    return stats["forward_tokens"]
''',
    # 03: the KL's gradient by autograd instead of the closed form
    "ex03_kl_grad": '''
def kl_gradient(log_p0, z):
    z = z.detach().clone().requires_grad_(True)
    kl = (log_p0.exp() * (log_p0 - torch.log_softmax(z, -1))).sum()
    return torch.autograd.grad(kl, z)[0]
''',
    # 04: the reshaping's zeros and mass factor read off ol.bilevel_weights
    "ex04_floor": '''
def zero_weight_positions(scores, quantile):
    return [i for i, w in enumerate(ol.bilevel_weights(scores, quantile=quantile, floor=0.0).tolist()) if w == 0]
''',
    "ex04_mass": '''
def mass_factor(scores):
    return float(ol.bilevel_weights(scores, preserve_mass=False).mean())
''',
    # 05: steps to target and paired differences from the package's summaries
    "ex05_target": '''
def steps_to_target_by_hand(records, method, seed, target):
    evals = [r for r in records if r["type"] == "eval" and r["method"] == method and r["seed"] == seed]
    steps = sorted(r["step"] for r in evals)
    return report.steps_to_target(evals, target)[0]
''',
    "ex05_paired": '''
def paired_differences(records, method):
    return cmp.summarize(records, target=TARGET)["methods"][method]["paired_diff_vs_grpo"]
''',
    # 06: the SNR and the blame share from the package
    "ex06_snr": '''
def snr(grads):
    return gq.gradient_stats({"uniform": grads})["uniform"]["snr"]
''',
    "ex06_blame": '''
def share_on_wrong(weights, wrong):
    return oracle.blame_share(weights, wrong)
''',
})

MORE_SHORTCUTS = {
    # 06: the lab's answer_mass is the same share (notebook 06's section 11 imports the module in view)
    "ex06_blame": ['''
from oar_lite.lab import concentration


def share_on_wrong(weights, wrong):
    return concentration.answer_mass(weights, wrong)
''', '''
import types

_blame_share = types.FunctionType(oracle.blame_share.__code__, oracle.blame_share.__globals__)


def share_on_wrong(weights, wrong):
    return _blame_share(weights, wrong)
'''],
    # 02: ol.perturbation_scores copied before the check switches it off
    "ex02_joint": ['''
import types

_f = ol.perturbation_scores
_scores = types.FunctionType(_f.__code__, _f.__globals__, "scores", _f.__defaults__, _f.__closure__)
_scores.__kwdefaults__ = dict(_f.__kwdefaults__)


def my_answer_joint_scores(model, ids, reasoning, answer, pad):
    return _scores(model, ids, reasoning, answer, mode="answer_joint", pad_token_id=pad)
'''],
}

WRONG = {
    # 01: GRPO's advantages (divided by the group's std) where Dr. GRPO's are asked for
    "ex01_dr_grpo": ['''
def dr_grpo_advantages(rewards, group_size):
    grouped = rewards.float().view(-1, group_size)
    return ((grouped - grouped.mean(dim=1, keepdim=True)) / (grouped.std(dim=1, keepdim=True) + 1e-4)).flatten()
'''],
    # 01: DAPO's weights for both loss types
    "ex01_averaging": ['''
def token_averaging_weights(mask, loss_type):
    mask = mask.float()
    return mask / mask.sum()
'''],
    # 01: a prediction, then the measurement at temperature 1 instead of 0.3
    "ex01_zero_spread": ['''
predicted_zero_spread = 0.2
exercises.predict("ex01_zero_spread", predicted_zero_spread)
''', '''
hot = ol.sample_completions(model, tok, [p["prompt"] for p in task.train_problems[:16]], group_size=GROUP_SIZE,
                            max_new_tokens=toy.max_new_tokens(4), temperature=1.0, formats=toy.FORMATS, seed=SEED)
hot_groups = torch.tensor(toy.rewards(hot.completions, [p for p in task.train_problems[:16] for _ in range(GROUP_SIZE)]))
hot_groups = hot_groups.view(-1, GROUP_SIZE)
measured_zero_spread = float((hot_groups.min(dim=1).values == hot_groups.max(dim=1).values).float().mean())
exercises.measure("ex01_zero_spread", measured_zero_spread)
'''],
}
WRONG.update({
    # 00: counts the digits of the larger operand; measures greedy decoding at temperature 1
    "ex00_pivotal": ['''
predicted_pivotal = 5
exercises.predict("ex00_pivotal", predicted_pivotal)
''', '''
def count_pivotal(a, b):
    return len(str(max(a, b)))


exercises.measure("ex00_pivotal", count_pivotal(98765, 43210))
'''],
    "ex00_greedy": ['''
predicted_distinct = 8
exercises.predict("ex00_greedy", predicted_distinct)
''', '''
greedy = ol.sample_completions(model, tok, [problem["prompt"]], group_size=GROUP_SIZE,
                               max_new_tokens=toy.max_new_tokens(problem["digits"]), temperature=1.0, formats=toy.FORMATS)
greedy_advantages = ol.group_advantages(torch.tensor(toy.rewards(greedy.completions, [problem] * GROUP_SIZE)), GROUP_SIZE)
exercises.measure("ex00_greedy", len(set(greedy.completions)))
greedy_advantages
'''],
    # 02: the score's sign flipped; every copy runs the whole prefix; pad compared with itself
    "ex02_joint": ['''
def my_answer_joint_scores(model, ids, reasoning, answer, pad):
    def phi(x):
        with torch.no_grad():
            logits = model(input_ids=x[None, : answer.stop - 1]).logits[0, answer.start - 1 :]
        return torch.log_softmax(logits.float(), -1).gather(-1, x[answer][:, None]).mean()

    phi0, scores = phi(ids), []
    for t in range(reasoning.start, reasoning.stop):
        x = ids.clone()
        x[t] = pad
        scores.append(torch.clamp(phi(x) - phi0, min=0))
    return torch.stack(scores)
'''],
    "ex02_tokens": ['''
def predicted_forward_tokens(reasoning, end, batch_size):
    return int(end * (1 + reasoning.stop - reasoning.start))
'''],
    "ex02_replacement": ['''
predicted_replacement_rho = 0.5
exercises.predict("ex02_replacement", predicted_replacement_rho)
''', '''
by_pad = ol.perturbation_scores(model, ids, reasoning, answer, mode="last", pad_token_id=pad)
measured_replacement_rho = float(credit.rank_agreement(by_pad, by_pad))
exercises.measure("ex02_replacement", measured_replacement_rho)
'''],
    # 03: the gradient's sign flipped; ten times the noise; a single draw where 16 are asked
    "ex03_kl_grad": ['''
def kl_gradient(log_p0, z):
    return log_p0.exp() - torch.softmax(z, -1)
'''],
    "ex03_smooth": ['''
def smoothed_oar_g(K, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.stack([ol.gradient_scores(model, input_ids, reasoning, answer, mode="answer_mean",
                                           noise_std=10 * NOISE_STD, generator=g) for _ in range(K)]).mean(0)
'''],
    "ex03_bias": ['''
predicted_bias_rho = 0.5
exercises.predict("ex03_bias", predicted_bias_rho)
''', '''
oar_p = ol.perturbation_scores(model, input_ids, reasoning, answer, mode="answer_mean", pad_token_id=tokenizer.pad_token_id)
measured_bias_rho = float(credit.rank_agreement(smoothed_oar_g(1, 0), oar_p))
exercises.measure("ex03_bias", measured_bias_rho)
'''],
    # 04: every suppressed position; no mass factor; the spread of the scores, not of the weights
    "ex04_floor": ['''
def zero_weight_positions(scores, quantile):
    s = torch.log1p(scores.double())
    span = s.max() - s.min()
    n = (s - s.min()) / (span if span > 0 else 1.0)
    tau = torch.quantile(n, quantile)
    return [i for i, v in enumerate(n.tolist()) if v < tau]
'''],
    "ex04_mass": ['''
def mass_factor(scores):
    return 1.0
'''],
    "ex04_noise": ['''
predicted_noise_std = 0.0
exercises.predict("ex04_noise", predicted_noise_std)
''', '''
row = 1e-4 * torch.rand(40, generator=torch.Generator().manual_seed(0))
measured_noise_std = float(row.std())
exercises.measure("ex04_noise", measured_noise_std)
'''],
    # 05: a censored run counted at its last evaluation; GRPO minus the method; two sampling seeds
    "ex05_target": ['''
def steps_to_target_by_hand(records, method, seed, target):
    evals = sorted((r for r in records if r["type"] == "eval" and r["method"] == method and r["seed"] == seed),
                   key=lambda r: r["step"])
    return float(next((r["step"] for r in evals if r["eval_accuracy"] >= target), evals[-1]["step"]))


steps_to_target = {method: [steps_to_target_by_hand(records, method, seed, TARGET) for seed in SEEDS] for method in METHODS}
'''],
    "ex05_paired": ['''
def paired_differences(records, method):
    final = {(r["method"], r["seed"]): r["eval_accuracy"] for r in records if r["type"] == "eval" and r["step"] == STEPS}
    return [final[("uniform", s)] - final[(method, s)] for s in SEEDS]
'''],
    "ex05_same": ['''
predicted_same = 0.1
exercises.predict("ex05_same", predicted_same)
''', '''
step2 = [p["prompt"] for p in ol.seeding.pick_problems(task.train_problems, PROMPTS_PER_STEP, seed=SEEDS[0], step=2)]
sampled = {m: ol.sample_completions(stepped[m], tokenizer, step2, group_size=GROUP_SIZE, temperature=1.0,
                                    max_new_tokens=config.max_new_tokens, formats=toy.FORMATS, seed=seed).completions
           for m, seed in (("uniform", 2), ("oar-p", 3))}
measured_same = float(np.mean([a == b for a, b in zip(sampled["uniform"], sampled["oar-p"])]))
exercises.measure("ex05_same", measured_same)
'''],
    # 06: the biased 1/N noise; wrong over right instead of over all; uniform weights; 10 batches
    "ex06_snr": ['''
def snr(grads):
    g = grads.double()
    mean = g.mean(0)
    return float(mean.pow(2).sum() / (((g - mean) ** 2).sum() / g.shape[0]))
'''],
    "ex06_blame": ['''
def share_on_wrong(weights, wrong):
    return float(weights[wrong].sum() / weights[~wrong].sum())
'''],
    "ex06_influence": ['''
predicted_influence = 0.9
exercises.predict("ex06_influence", predicted_influence)
''', '''
wrong = oracle.wrong_tokens(ex["input_ids"], ex["reasoning"], ex["answer"])
measured_influence = share_on_wrong(torch.ones(len(wrong)), wrong)
exercises.measure("ex06_influence", measured_influence)
'''],
    "ex06_scratch": ['''
predicted_snr_gain = 3.0
exercises.predict("ex06_scratch", predicted_snr_gain)
''', '''
two = {"uniform": "uniform", "oracle": ("oracle", {"boost": 9.0})}
small = gq.gradient_quality(model, tok, problems, two, batches=10, prompts=2, group_size=4, seed=2)["stats"]
measured_snr_gain = small["oracle"]["snr"] / small["uniform"]["snr"]
exercises.measure("ex06_scratch", measured_snr_gain)
'''],
    # 06: the SNR at 4 prompts over 2 on another seed than the notebook's (a well-typed, different ratio)
    "ex06_batch": ['''
predicted_batch_snr_gain = 2.0
exercises.predict("ex06_batch", predicted_batch_snr_gain)
''', '''
snr_at = {p: gq.gradient_quality(model, tok, problems, {"uniform": "uniform"}, batches=20, prompts=p, group_size=4,
                                 seed=3)["stats"]["uniform"]["snr"] for p in (2, 4)}
measured_batch_snr_gain = snr_at[4] / snr_at[2]
exercises.measure("ex06_batch", measured_batch_snr_gain)
'''],
    # 07: one matrix's side instead of both; the share of the base model's parameters
    "ex07_lora": ['''
def lora_parameter_count(in_features, out_features, r):
    return r * max(in_features, out_features)
'''],
    "ex07_share": ['''
predicted_trainable_share = 0.2
exercises.predict("ex07_share", predicted_trainable_share)
''', '''
adapted = get_peft_model(copy.deepcopy(toy.load_model()[0]), LoraConfig(r=4, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM"))
trainable = sum(p.numel() for p in adapted.parameters() if p.requires_grad)
measured_trainable_share = trainable / sum(p.numel() for p in toy.load_model()[0].parameters())
exercises.measure("ex07_share", measured_trainable_share)
'''],
})
