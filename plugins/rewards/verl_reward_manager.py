"""verl adapter: reward manager ``reasonrl`` in verl 0.9.1's reward loop.

Selected with ``reward.reward_manager.name=reasonrl`` (the option files do it). verl's
reward loop calls ``run_single`` once per trajectory (in its RewardLoopWorker processes); it
returns the reward and, in ``reward_extra_info``, the per-sample facts the rest of reasonrl
uses (``acc``, ``incomplete`` for the group step in ``verl_group.py``) and logs (per-level
pass string, judge errors, truncation). A ``reward.custom_reward_function`` still replaces
the task reward (as in verl's naive manager), receiving verl's reward-model router address when
verl serves a reward model; format reward and flags are added on top. A custom function may
return a dict whose ``score`` is None: the manager's own task reward (code, math) scores that
response; the dict's other keys join ``reward_extra_info`` either way (the same keys for every
response, as verl requires).
The code judge starts (and is probed: a known-good program must pass in its sandbox) on the
first code response; a sandbox that cannot start raises there and stops the run.
Math answers are graded by this process's bounded Math-Verify pool (``math_verifier.py``,
the path of ``reasonrl.api.math_reward``): a hostile answer scores 0 with ``math_timeout``
= 1 after ``reasonrl.rewards.math_timeout_s`` instead of stalling the reward loop.
"""

from __future__ import annotations

import inspect
import threading
import time
from typing import Any

from verl import DataProto
from verl.experimental.reward_loop.reward_manager import register
from verl.experimental.reward_loop.reward_manager.base import RewardManagerBase

from reasonrl.config import config_value
from reasonrl.plugins.rewards import scoring
from reasonrl.plugins.rewards.config import settings_from
from reasonrl.plugins.rewards.math_verifier import configure as configure_math_verifier
from reasonrl.plugins.rewards.thinking_format import thinking_mode_in_text

NAME = "reasonrl"


class ReasonrlRewardManager(RewardManagerBase):
    """Code (sandboxed judge + test-difficulty schemes), math (Math-Verify), thinking-toggle
    format and incomplete-signal flags, per trajectory."""

    def __init__(self, config, tokenizer, compute_score=None, reward_router_address=None, reward_model_tokenizer=None):
        super().__init__(config, tokenizer, compute_score)
        self.settings = settings_from(config)
        # verl hands every manager a score function (its data_source dispatch when none is
        # configured); only a configured reward.custom_reward_function replaces ours.
        self.custom_score = compute_score if config_value(config, "reward.custom_reward_function.path") else None
        # as verl's naive manager: a custom function reaches verl's reward-model server through these
        self.reward_model_kwargs = (
            {"reward_router_address": reward_router_address, "reward_model_tokenizer": reward_model_tokenizer}
            if reward_router_address is not None
            else {}
        )
        self.max_response_length = config_value(config, "actor_rollout_ref.rollout.response_length") or config_value(
            config, "data.max_response_length"
        )
        self.reward_workers = int(config_value(config, "reward.num_workers", 1) or 1)
        # this process's math verifier (what reasonrl.api.math_reward uses too); workers start lazily
        configure_math_verifier(self.settings.verifier_settings(self.reward_workers))
        # a response that ends on EOS exactly at the limit was not cut
        self.stop_ids = frozenset(i for i in (tokenizer.eos_token_id,) if isinstance(i, int))
        self._judge = None
        self._judge_lock = threading.Lock()
        self._judge_failure: Exception | None = None

    @property
    def judge(self):
        """The code judge, built on the first code response (math-only runs never start
        sandboxes) and probed then, once: a sandbox that cannot start raises here — on that
        response and every later one — and stops the run; no code response is scored
        ``judge_error`` for it."""
        with self._judge_lock:
            if self._judge_failure is not None:
                raise self._judge_failure
            if self._judge is None:
                try:
                    self._judge = scoring.make_judge(self.settings, self.reward_workers)
                except Exception as error:
                    self._judge_failure = error
                    raise
            return self._judge

    async def _custom_task_score(
        self, data_source, response, ground_truth, extra_info
    ) -> tuple[scoring.Scored | None, dict]:
        kwargs = dict(data_source=data_source, solution_str=response, ground_truth=ground_truth, extra_info=extra_info)
        kwargs.update(self.reward_model_kwargs)
        if inspect.iscoroutinefunction(self.custom_score):
            result = await self.custom_score(**kwargs)
        else:
            result = await self.loop.run_in_executor(None, lambda: self.custom_score(**kwargs))
        extra = {k: v for k, v in result.items() if k != "score"} if isinstance(result, dict) else {}
        value = result.get("score") if isinstance(result, dict) else result
        if value is None:  # declined: the manager's own task reward scores this response
            return None, extra
        value = float(value)
        return scoring.Scored(value, value >= 1.0, kind="custom"), extra

    async def _task_score(
        self, data_source, response: str, ground_truth, extra_info: dict
    ) -> tuple[scoring.Scored, dict]:
        custom_extra = {}
        if self.custom_score is not None:
            scored, custom_extra = await self._custom_task_score(data_source, response, ground_truth, extra_info)
            if scored is not None:
                return scored, custom_extra
        code = scoring.code_spec(ground_truth, extra_info)
        if code is not None:
            problem, calibration = code
            # built (and probed) off the event loop: the probe starts a sandbox
            judge = self._judge or await self.loop.run_in_executor(None, lambda: self.judge)
            return await scoring.score_code(
                judge, problem, calibration, response, self.settings.code_scheme
            ), custom_extra
        return await self.loop.run_in_executor(None, scoring.math_scored, response, ground_truth), custom_extra

    def _thinking_mode(self, item, extra_info: dict) -> str | None:
        setting = extra_info.get("thinking")
        if setting is not None:
            return "on" if setting in (True, "on") else "off"
        prompt = self.tokenizer.decode(
            item.batch["prompts"][item.batch["attention_mask"][: item.batch["prompts"].shape[-1]].bool()],
            skip_special_tokens=False,
        )
        return thinking_mode_in_text(prompt)

    async def run_single(self, data: DataProto) -> dict[str, Any]:
        start = time.perf_counter()
        item = data[-1:][0]  # the last turn, as verl's naive manager
        response_ids = item.batch["responses"]
        valid_length = int(item.batch["attention_mask"][-response_ids.shape[-1] :].sum())
        ids = response_ids[:valid_length].tolist()
        response = await self.loop.run_in_executor(None, lambda: self.tokenizer.decode(ids, skip_special_tokens=True))
        extra_info = dict(item.non_tensor_batch.get("extra_info", None) or {})
        ground_truth = item.non_tensor_batch["reward_model"]["ground_truth"]
        task, custom_extra = await self._task_score(
            item.non_tensor_batch.get("data_source"), response, ground_truth, extra_info
        )
        # the prompt is decoded only when the format reward counts
        mode = self._thinking_mode(item, extra_info) if self.settings.thinking_format_weight > 0 else None
        format_score = scoring.thinking_format(response, mode)
        flags = scoring.incomplete_flags(self.settings, ids, self.max_response_length, task.judge_error, self.stop_ids)
        extra = {**custom_extra, **scoring.combine(task, format_score, flags, self.settings)}
        # this response's scoring time (the step's sum is logged as reward/scoring_s)
        extra["scoring_s"] = time.perf_counter() - start
        return {"reward_score": extra["score"], "reward_extra_info": extra}


def register_manager() -> None:
    """Put ``reasonrl`` in verl's reward-manager registry (idempotent)."""
    from verl.experimental.reward_loop.reward_manager.registry import REWARD_MANAGER

    if REWARD_MANAGER.get(NAME) is not ReasonrlRewardManager:
        register(NAME)(ReasonrlRewardManager)


register_manager()  # imported before verl's registry package ran its hook: see register_adapter_when_loaded
