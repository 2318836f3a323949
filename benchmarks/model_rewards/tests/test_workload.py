"""The bench's workload is GRPO-shaped: groups sharing a reference, answers in three surface forms
with repeats inside a group, about half of them right."""

from __future__ import annotations

from benchmarks.model_rewards.bench import workload


def test_groups_share_a_reference_and_repeat_answers():
    items = workload(groups=16, group_size=8, seed=0)
    assert len(items) == 128
    groups = [items[i : i + 8] for i in range(0, 128, 8)]
    assert all(len({reference for _, reference, _, _ in group}) == 1 for group in groups)
    assert sum(len({response for _, _, response, _ in group}) < 8 for group in groups) >= 8, "repeats inside groups"
    assert 0.35 < sum(equal for *_, equal in items) / len(items) < 0.65
    assert any(not response.isdigit() and "+" in response for _, _, response, _ in items)  # expressions
    assert any(response.replace(" ", "").isalpha() for _, _, response, _ in items)  # words
