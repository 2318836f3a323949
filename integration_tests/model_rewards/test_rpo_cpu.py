"""RPO on CPU (Llama-Nemotron §6.2) on the smoke model: offline on pairs sampled from the model and
scored by a reward model, then one online iteration (sample, score, pair, train) end to end.

The reward model is a graded stand-in the smoke task allows: 1 for the right sum, less the
further the answer is from it (0 beyond 20, or for no number), so pairs carry reward gaps of
different sizes — what RPO, unlike DPO, reads."""

from __future__ import annotations

import dataclasses
import json
import math
import re
import subprocess

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


def _rpo(*args: str) -> subprocess.CompletedProcess:
    from reasonrl.testing.cpu_runs import reasonrl_command

    return subprocess.run([*reasonrl_command(), "rpo", *args], capture_output=True, text=True, timeout=600)


def test_the_rpo_command_trains_offline_on_scored_pairs_and_online_against_a_reward_model(smoke, tmp_path):
    """``reasonrl rpo``: offline on a JSONL of scored pairs, online with a sequence-classification
    reward model (a score head on the smoke model's body, fresh: the plumbing, not its quality)."""
    from transformers import AutoModelForCausalLM, Qwen2ForSequenceClassification

    from reasonrl.plugins.model_rewards.rpo_cli import reward_model_scorer

    path, tokenizer, prompts = smoke
    reference = _model(path)
    pairs = []
    for prompt, responses in zip(
        prompts[:24], sample(reference, tokenizer, prompts[:24], n=6, max_new_tokens=6, seed=0)
    ):
        pairs += best_worst_pairs(prompt, responses, [graded_reward(prompt, r) for r in responses])
    pairs_file = tmp_path / "pairs.jsonl"
    pairs_file.write_text("".join(json.dumps(dataclasses.asdict(p)) + "\n" for p in pairs))
    done = _rpo("offline", "--model", str(path), "--pairs", str(pairs_file), "--out", str(tmp_path / "offline"),
                "--steps", "4", "--batch-size", "8", "--lr", "1e-4")  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    log = [json.loads(line) for line in (tmp_path / "offline" / "rpo_log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == [1, 2, 3, 4] and all(r["loss"] > 0 for r in log), log
    trained = AutoModelForCausalLM.from_pretrained(tmp_path / "offline")
    assert any(not torch.equal(a, b) for a, b in zip(trained.parameters(), reference.parameters())), "saved trained"

    head = Qwen2ForSequenceClassification.from_pretrained(path, num_labels=1)
    head.config.pad_token_id = tokenizer.pad_token_id
    head.save_pretrained(tmp_path / "rm")
    tokenizer.save_pretrained(tmp_path / "rm")
    prompts_file = tmp_path / "prompts.jsonl"
    prompts_file.write_text("".join(json.dumps({"prompt": p}) + "\n" for p in prompts[:8]))
    done = _rpo("online", "--model", str(path), "--reward-model", str(tmp_path / "rm"), "--prompts", str(prompts_file),
                "--out", str(tmp_path / "online"), "--n", "4", "--max-new-tokens", "6", "--steps", "2",
                "--batch-size", "4", "--lr", "1e-4")  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    (record,) = [json.loads(line) for line in (tmp_path / "online" / "rpo_log.jsonl").read_text().splitlines()]
    assert record["pairs"] > 0 and len(record["log"]) == 2, record
    # the reward model's head scores each (question, response) conversation, finite and response-dependent
    score = reward_model_scorer(tmp_path / "rm")
    assert math.isfinite(record["mean_reward"]) and score(prompts[0], "12") != score(prompts[0], "99")


def test_the_rpo_command_names_a_bad_input_before_loading_a_model(smoke, tmp_path):
    path, _, _ = smoke
    pairs_file = tmp_path / "pairs.jsonl"
    pairs_file.write_text(json.dumps({"prompt": "1+1=", "chosen": "2", "rejected": "3"}) + "\n")
    done = _rpo("offline", "--model", str(path), "--pairs", str(pairs_file), "--out", str(tmp_path / "out"))
    assert done.returncode == 2 and "has no column 'reward_chosen'" in done.stderr, done.stderr[-2000:]
    done = _rpo(
        "offline", "--model", str(path), "--pairs", str(pairs_file), "--out", str(tmp_path / "out"), "--beta", "0"
    )
    assert done.returncode == 2 and "--beta" in done.stderr, done.stderr[-2000:]
    assert not (tmp_path / "out").exists()
