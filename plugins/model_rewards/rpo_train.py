"""RPO training (Llama-Nemotron §6.2): offline on preference pairs with reward-model scores, and
online iterations — sample from the policy, score with the reward model, pair the best and the
worst response of each prompt, train, and take the trained policy as the next reference.

A plain torch loop on a Hugging Face causal LM (policy + frozen reference). TRL's DPOTrainer has
no reward-aware loss and its collator drops per-pair reward columns, so RPO does not fit it
without replacing its loss computation; verl has no offline preference stage.

Logged per step: the loss, the implicit margin a (mean), and the **reward-weighted margin**
Σ_i (r*_c − r*_l)_i · a_i / Σ_i (r*_c − r*_l)_i: positive when the policy prefers the chosen
responses, most where the reward model's gap is largest.
"""

from __future__ import annotations

import copy
import random
from dataclasses import dataclass
from typing import Callable

import torch

from reasonrl.plugins.model_rewards.rpo import rpo_loss


@dataclass(frozen=True)
class PreferencePair:
    prompt: str
    chosen: str
    rejected: str
    reward_chosen: float
    reward_rejected: float


@dataclass(frozen=True)
class RpoSettings:
    beta: float = 0.1
    eta: float = 1.0
    distance: str = "bernoulli_kl"
    lr: float = 1e-4
    steps: int = 40
    batch: int = 16
    seed: int = 0


def sequence_logps(model, tokenizer, prompts: list[str], completions: list[str]) -> torch.Tensor:
    """Σ log p(completion tokens | prompt) per row (completion + EOS)."""
    rows, starts = [], []
    for prompt_text, completion in zip(prompts, completions):
        prompt = tokenizer(prompt_text)["input_ids"]
        rows.append(prompt + tokenizer(completion)["input_ids"] + [tokenizer.eos_token_id])
        starts.append(len(prompt))
    width = max(map(len, rows))
    ids = torch.full((len(rows), width), tokenizer.pad_token_id)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = torch.tensor(row)
        mask[i, : len(row)] = 1
    logits = model(input_ids=ids, attention_mask=mask).logits[:, :-1].float()
    token_logps = torch.log_softmax(logits, -1).gather(-1, ids[:, 1:, None]).squeeze(-1)
    completion = torch.zeros_like(token_logps)
    for i, (row, start) in enumerate(zip(rows, starts)):
        completion[i, start - 1 : len(row) - 1] = 1.0  # positions predicting the completion's tokens
    return (token_logps * completion).sum(-1)


def train_offline(
    policy, reference, tokenizer, pairs: list[PreferencePair], settings: RpoSettings, progress=print
) -> list[dict]:
    """``settings.steps`` AdamW steps of RPO on batches drawn from ``pairs``; the per-step log."""
    rng = random.Random(settings.seed)
    optimizer = torch.optim.AdamW(policy.parameters(), lr=settings.lr)
    reference.eval()
    policy.train()
    log = []
    for step in range(1, settings.steps + 1):
        batch = [pairs[rng.randrange(len(pairs))] for _ in range(settings.batch)]
        prompts = [p.prompt for p in batch]
        with torch.no_grad():
            ref_chosen = sequence_logps(reference, tokenizer, prompts, [p.chosen for p in batch])
            ref_rejected = sequence_logps(reference, tokenizer, prompts, [p.rejected for p in batch])
        chosen = sequence_logps(policy, tokenizer, prompts, [p.chosen for p in batch])
        rejected = sequence_logps(policy, tokenizer, prompts, [p.rejected for p in batch])
        gaps = torch.tensor([p.reward_chosen - p.reward_rejected for p in batch])
        loss, margin = rpo_loss(
            chosen, rejected, ref_chosen, ref_rejected,
            torch.tensor([p.reward_chosen for p in batch]), torch.tensor([p.reward_rejected for p in batch]),
            settings.beta, settings.eta, settings.distance,
        )  # fmt: skip
        optimizer.zero_grad()
        loss.mean().backward()
        optimizer.step()
        entry = {
            "step": step,
            "loss": loss.mean().item(),
            "margin": margin.mean().item(),
            "reward_weighted_margin": (gaps * margin.detach()).sum().item() / max(gaps.sum().item(), 1e-12),
        }
        log.append(entry)
        if step % 10 == 0 or step == settings.steps:
            progress(
                f"[rpo] step {step}/{settings.steps}  loss {entry['loss']:.4f}  margin {entry['margin']:+.4f}  "
                f"reward-weighted margin {entry['reward_weighted_margin']:+.4f}"
            )
    policy.eval()
    return log


@torch.no_grad()
def sample(policy, tokenizer, prompts: list[str], n: int, max_new_tokens: int, seed: int) -> list[list[str]]:
    """``n`` sampled completions per prompt (temperature 1)."""
    torch.manual_seed(seed)
    side = tokenizer.padding_side
    tokenizer.padding_side = "left"
    try:
        encoded = tokenizer(prompts, return_tensors="pt", padding=True)
        out = policy.generate(
            **encoded, do_sample=True, max_new_tokens=max_new_tokens, num_return_sequences=n,
            pad_token_id=tokenizer.pad_token_id,
        )  # fmt: skip
    finally:
        tokenizer.padding_side = side
    texts = tokenizer.batch_decode(out[:, encoded["input_ids"].shape[1] :], skip_special_tokens=True)
    return [texts[i * n : (i + 1) * n] for i in range(len(prompts))]


def best_worst_pairs(prompt: str, responses: list[str], rewards: list[float]) -> list[PreferencePair]:
    """The highest- and lowest-scored responses of one prompt as a pair; none when all score alike."""
    best = max(range(len(responses)), key=lambda i: rewards[i])
    worst = min(range(len(responses)), key=lambda i: rewards[i])
    if rewards[best] <= rewards[worst]:
        return []
    return [PreferencePair(prompt, responses[best], responses[worst], rewards[best], rewards[worst])]


def online(
    policy,
    tokenizer,
    prompts: list[str],
    reward: Callable[[str, str], float],
    iterations: int,
    n: int,
    settings: RpoSettings,
    max_new_tokens: int = 8,
    progress=print,
) -> list[dict]:
    """Iterative online RPO: per iteration sample, score, pair, train; the reference is the policy
    the iteration started from. Returns one record per iteration."""
    records = []
    for iteration in range(1, iterations + 1):
        reference = copy.deepcopy(policy).eval()
        pairs, scores = [], []
        for prompt, responses in zip(
            prompts, sample(policy, tokenizer, prompts, n, max_new_tokens, settings.seed + iteration)
        ):
            rewards = [reward(prompt, r) for r in responses]
            scores += rewards
            pairs += best_worst_pairs(prompt, responses, rewards)
        progress(f"[rpo online] iteration {iteration}: mean reward {sum(scores) / len(scores):.3f}, {len(pairs)} pairs")
        log = train_offline(policy, reference, tokenizer, pairs, settings, progress) if pairs else []
        records.append(
            {"iteration": iteration, "mean_reward": sum(scores) / len(scores), "pairs": len(pairs), "log": log}
        )
    return records
