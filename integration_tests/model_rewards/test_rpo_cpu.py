"""RPO on CPU (Llama-Nemotron §6.2) on the smoke model: offline on pairs sampled from the model and
scored by a reward model, then one online iteration (sample, score, pair, train) end to end.

The reward model is a graded stand-in the smoke task allows: 1 for the right sum, less the
further the answer is from it (0 beyond 20, or for no number), so pairs carry reward gaps of
different sizes — what RPO, unlike DPO, reads."""

from __future__ import annotations

import re

import pytest
import torch

from reasonrl.plugins.model_rewards.rpo_train import RpoSettings, best_worst_pairs, online, sample, train_offline

pytestmark = pytest.mark.integration


def graded_reward(prompt: str, response: str) -> float:
    a, b = map(int, re.findall(r"\d+", prompt)[:2])
    found = re.search(r"\d+", response)
    return 0.0 if not found else max(0.0, 1.0 - abs(int(found.group()) - (a + b)) / 20.0)


@pytest.fixture(scope="module")
def smoke():
    from transformers import AutoTokenizer

    from reasonrl.smoke.arithmetic import make_problems
    from reasonrl.smoke.prepare import prepare

    root = prepare()
    tokenizer = AutoTokenizer.from_pretrained(root / "model")
    prompts = [p.prompt for p in make_problems(48, seed=123)]
    return root / "model", tokenizer, prompts


def _model(path):
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    return AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()


def test_offline_rpo_lowers_its_loss_with_a_positive_reward_weighted_margin(smoke):
    path, tokenizer, prompts = smoke
    policy, reference = _model(path), _model(path)
    pairs = []
    for prompt, responses in zip(prompts, sample(reference, tokenizer, prompts, n=8, max_new_tokens=6, seed=0)):
        pairs += best_worst_pairs(prompt, responses, [graded_reward(prompt, r) for r in responses])
    gaps = sorted({round(p.reward_chosen - p.reward_rejected, 2) for p in pairs})
    assert len(pairs) >= 20 and len(gaps) >= 3, (len(pairs), gaps)  # gaps of several sizes
    log = train_offline(policy, reference, tokenizer, pairs, RpoSettings(steps=40, batch=16, lr=1e-4, beta=0.1))
    first, last = log[:10], log[-10:]
    mean = lambda rows, key: sum(r[key] for r in rows) / len(rows)  # noqa: E731
    print(
        f"RPO offline: loss {mean(first, 'loss'):.4f} -> {mean(last, 'loss'):.4f}, reward-weighted margin "
        f"{mean(first, 'reward_weighted_margin'):+.4f} -> {mean(last, 'reward_weighted_margin'):+.4f}"
    )
    assert mean(last, "loss") < 0.8 * mean(first, "loss")
    assert mean(last, "reward_weighted_margin") > 0 and mean(last, "margin") > 0


def test_an_online_rpo_iteration_runs_end_to_end(smoke):
    path, tokenizer, prompts = smoke
    policy = _model(path)
    before = [p.detach().clone() for p in policy.parameters()]
    records = online(
        policy, tokenizer, prompts[:24], graded_reward, iterations=1, n=6, settings=RpoSettings(steps=10, batch=8)
    )
    (record,) = records
    assert record["pairs"] > 0 and len(record["log"]) == 10
    assert 0.0 < record["mean_reward"] <= 1.0
    assert any(not torch.equal(b, p) for b, p in zip(before, policy.parameters())), "the policy trained"
