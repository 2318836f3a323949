"""The per-group step after rewards, before advantages (framework-free).

For each prompt's group of responses (same uid):
- incomplete-signal masking (LongCat): responses flagged ``incomplete`` are dropped from the
  loss and from the group's statistics (``masked``);
- Kimi length penalty (§2.3.3): the length reward of every remaining response, computed over
  the remaining responses of its group, times the weight in effect at this step.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Hashable, Sequence

from reasonrl.plugins.rewards.length_penalty import length_rewards, penalty_weight


def group_adjustments(
    uids: Sequence[Hashable],
    lengths: Sequence[int],
    correct: Sequence[bool],
    incomplete: Sequence[bool],
    step: int,
    length_penalty_weight: float,
    warmup_steps: int,
    mask_incomplete: bool,
) -> tuple[list[float], list[bool]]:
    """(reward to add per response, masked per response).

    When every response of the step is incomplete nothing is masked (verl refuses a step
    without a single loss token); the caller reports it (``reasonrl/incomplete_mask_skipped``).
    """
    masked = [bool(flag) and mask_incomplete for flag in incomplete]
    if masked and all(masked):
        masked = [False] * len(masked)
    weight = penalty_weight(step, length_penalty_weight, warmup_steps)
    bonus = [0.0] * len(uids)
    if weight > 0:
        groups: dict[Hashable, list[int]] = defaultdict(list)
        for index, uid in enumerate(uids):
            if not masked[index]:
                groups[uid].append(index)
        for members in groups.values():
            rewards = length_rewards([lengths[i] for i in members], [correct[i] for i in members])
            for i, value in zip(members, rewards):
                bonus[i] = weight * value
    return bonus, masked
