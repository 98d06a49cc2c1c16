"""A package-shortcut submission for each exercise that re-implements a package function (or
a computation the package or torch already does): the answer cell filled with a call to it.
`python scripts/course.py check-student` runs each in the student notebook and checks that it
passes the public tests (type and shape) and fails the exercise (the hidden tests disable the
function). tests/test_course.py checks that every exercise whose hidden tests use
`oar_lite.exercises.forbid` has one here, and the other way round.

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
