"""verl adapter: agent loop ``reasonrl_rollout`` — verl's single-turn agent loop that asks vLLM
for repeat detection (Kimi k1.5 §2.6.2) and keeps each response's stop reason.

vLLM stops a generation whose tail repeats (``SamplingParams.repetition_detection``, finish
reason ``repetition``; present in vLLM 0.24 and 0.32) — inside generation, so the looping tokens
are never generated. verl's LLM server passes that reason back as ``TokenOutput.stop_reason`` but
its single-turn loop drops it; this loop wraps its own ``server_manager`` (one agent-loop instance
per request) to copy it into the response's ``extra_fields[STOP_REASON_FIELD]``, where the
trainer callback (``verl_callback.py``) reads it to penalise and count.

Selected with ``actor_rollout_ref.rollout.agent.default_agent_loop=reasonrl_rollout`` (the
option files set it); registered in verl's agent-loop registry when ``verl.experimental.agent_loop``
is imported.
"""

from __future__ import annotations

from typing import Any

from reasonrl.compat.verl import AGENT_LOOP_STOP_REASON, single_turn_agent_loop_base
from reasonrl.plugins.rollout.config import AGENT_LOOP, STOP_REASON_FIELD, settings_from

SingleTurnAgentLoop = single_turn_agent_loop_base(AGENT_LOOP_STOP_REASON)


class _StopReasonRecorder:
    """The agent loop's LLM client, with each answer's stop reason copied into its extra fields."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    async def generate(self, *args, **kwargs):
        output = await self._client.generate(*args, **kwargs)
        output.extra_fields = {**(output.extra_fields or {}), STOP_REASON_FIELD: output.stop_reason}
        return output


def repetition_sampling_params(settings) -> dict[str, Any]:
    """The request's vLLM ``repetition_detection`` parameter, or nothing when detection is off."""
    if not settings.repetition_detection:
        return {}
    from vllm.sampling_params import RepetitionDetectionParams

    return {
        "repetition_detection": RepetitionDetectionParams(
            max_pattern_size=settings.repetition_max_pattern,
            min_pattern_size=settings.repetition_min_pattern,
            min_count=settings.repetition_min_count,
        )
    }


class RolloutAgentLoop(SingleTurnAgentLoop):
    """``SingleTurnAgentLoop`` with vLLM repeat detection and the stop reason kept."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.server_manager = _StopReasonRecorder(self.server_manager)
        self._extra_params = repetition_sampling_params(settings_from(self.config))

    async def run(self, sampling_params: dict[str, Any], **kwargs):
        return await super().run({**sampling_params, **self._extra_params}, **kwargs)


def register() -> None:
    """Add the loop to verl's agent-loop registry (idempotent: verl's ``register`` overwrites)."""
    from verl.experimental.agent_loop.agent_loop import register as register_agent_loop

    register_agent_loop(AGENT_LOOP)(RolloutAgentLoop)


register()  # see reasonrl.bridges.import_hooks.register_agent_loop_when_loaded
