"""Kimi k1.5 length penalty (§2.3.3), computed over the k responses of one prompt.

    λ_i = 0.5 − (len_i − min_len) / (max_len − min_len)
    length_reward_i = λ_i if response i is correct, min(0, λ_i) if it is wrong
    all 0 when max_len = min_len

It is added to the task reward with a weight, after a warm-up of N steps without it.
"""

from __future__ import annotations

from typing import Sequence


def length_rewards(lengths: Sequence[int], correct: Sequence[bool]) -> list[float]:
    """The length reward of each response of one prompt's group."""
    if len(lengths) != len(correct):
        raise ValueError(f"{len(lengths)} lengths for {len(correct)} correctness flags")
    if not lengths:
        return []
    shortest, longest = min(lengths), max(lengths)
    if longest == shortest:
        return [0.0] * len(lengths)
    rewards = []
    for length, ok in zip(lengths, correct):
        lam = 0.5 - (length - shortest) / (longest - shortest)
        rewards.append(lam if ok else min(0.0, lam))
    return rewards


def penalty_weight(step: int, weight: float, warmup_steps: int) -> float:
    """The weight in effect at training step ``step`` (1-based): 0 during the warm-up."""
    return 0.0 if step <= warmup_steps else weight
