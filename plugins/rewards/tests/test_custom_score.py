"""The reward manager with a ``reward.custom_reward_function``: it replaces the task reward, gets
verl's reward-model router when verl serves a reward model, may decline a response (score None:
the manager's own math / code reward scores it), and its other keys reach reward_extra_info."""

from __future__ import annotations

import asyncio
import types

from omegaconf import OmegaConf


def _manager(custom, router=None):
    from verl.experimental.reward_loop.reward_manager.base import RewardManagerBase  # noqa: F401  (verl first)

    from reasonrl.plugins.rewards.verl_reward_manager import ReasonrlRewardManager

    config = OmegaConf.create({"reward": {"custom_reward_function": {"path": "pkg://anything", "name": "f"}}})
    return ReasonrlRewardManager(config, types.SimpleNamespace(eos_token_id=1), custom, reward_router_address=router)


def _score(manager, response, truth, data_source):
    async def run():
        manager.loop = asyncio.get_running_loop()
        return await manager._task_score(data_source, response, truth, {})

    return asyncio.run(run())


def test_a_custom_function_scores_declines_and_sees_the_router():
    calls = []

    async def custom(data_source, solution_str, ground_truth, extra_info, **kwargs):
        calls.append(kwargs)
        judged = data_source == "science"
        return {"score": 0.5 if judged else None, "judged": float(judged)}

    manager = _manager(custom, router="10.0.0.1:8000")
    scored, extra = _score(manager, "x", "y", "science")
    assert (scored.task_score, scored.kind, extra) == (0.5, "custom", {"judged": 1.0})
    scored, extra = _score(manager, "\\boxed{7}", "7", "math")  # declined: Math-Verify grades it
    assert (scored.task_score, scored.kind, scored.math_status, extra) == (1.0, "math", "verified", {"judged": 0.0})
    assert calls[0]["reward_router_address"] == "10.0.0.1:8000" and "reward_model_tokenizer" in calls[0]


def test_without_a_served_reward_model_no_router_is_passed():
    calls = []

    def custom(data_source, solution_str, ground_truth, extra_info, **kwargs):
        calls.append(kwargs)
        return 1.0

    scored, extra = _score(_manager(custom), "x", "y", "any")
    assert (scored.task_score, extra, calls) == (1.0, {}, [{}])
