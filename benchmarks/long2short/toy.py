"""A long-CoT model for the long2short comparison on CPU (Kimi §2.4 needs one to shorten).

The smoke model answers a sum in ~3 tokens, so there is nothing to shorten. This fine-tunes it on
answers that reason first, at one of three lengths chosen at random per example — as a long-CoT
model's responses vary in length::

    level 1  <think>12+34</think>46
    level 2  <think>2+4=6 1+3+0=4</think>46
    level 3  <think>2+4=6 1+3+0=4 so 12+34=46</think>46

(ones digits, then tens digits plus the carry). The smoke model itself is the short-CoT model.
Deterministic: fixed seed, one thread. Framework-free but for transformers.
"""

from __future__ import annotations

from pathlib import Path

from reasonrl.smoke.arithmetic import Problem

LEVELS = (1, 2, 3)


def reasoning(problem: Problem, level: int) -> str:
    """The think block's text at ``level`` (see the module docstring)."""
    if level == 1:
        return problem.prompt.removesuffix("=")
    ones = problem.a % 10 + problem.b % 10
    carry = int(ones >= 10)
    tens = problem.a // 10 + problem.b // 10 + carry
    steps = f"{problem.a % 10}+{problem.b % 10}={ones} {problem.a // 10}+{problem.b // 10}+{carry}={tens}"
    if level == 2:
        return steps
    if level == 3:
        return f"{steps} so {problem.a}+{problem.b}={problem.answer}"
    raise ValueError(f"level {level} not in {LEVELS}")


def long_cot_answer(problem: Problem, level: int) -> str:
    return f"<think>{reasoning(problem, level)}</think>{problem.answer}"


def train_long_cot_model(
    short_model: Path, out: Path, problems: list[Problem], steps: int = 300, batch: int = 64, lr: float = 1e-3
) -> list[float]:
    """Fine-tune ``short_model`` on ``problems`` answered at a random level each; save to ``out``;
    the loss per step."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from reasonrl.smoke.model import supervised_batch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with torch.random.fork_rng():
            torch.manual_seed(0)
            tokenizer = AutoTokenizer.from_pretrained(short_model)
            model = AutoModelForCausalLM.from_pretrained(short_model, dtype=torch.float32)
            generator = torch.Generator().manual_seed(0)
            optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
            losses = []
            model.train()
            for _ in range(steps):
                picks = torch.randint(len(problems), (batch,), generator=generator).tolist()
                levels = torch.randint(len(LEVELS), (batch,), generator=generator).tolist()
                pairs = [(problems[i].prompt, long_cot_answer(problems[i], LEVELS[k])) for i, k in zip(picks, levels)]
                ids, mask, target = supervised_batch(pairs, tokenizer)
                loss = model(input_ids=ids, attention_mask=mask, labels=target).loss
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                losses.append(loss.item())
    finally:
        torch.set_num_threads(threads)
    model.eval()
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    return losses
