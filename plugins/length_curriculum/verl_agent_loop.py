"""verl adapter: agent loop ``reasonrl_length_capped`` — verl's single-turn agent loop with each
training request capped at the curriculum's current limit.

verl sizes its tensors and vLLM's ``max_model_len`` once from ``data.max_response_length`` (=
the last stage); a stage is a per-request cap: ``sampling_params['max_tokens']``, which verl's
LLM server passes to vLLM as the request's ``max_tokens`` (and its preemption resume keeps as the
cumulative budget). The limit arrives with the request: the trainer callback puts it on every
training batch as the field ``reasonrl_response_limit`` (``verl_callback.py``), and verl's agent
loop workers hand a batch's fields to ``run(**kwargs)``. Validation batches (built by verl's
``_validate``) carry no limit: their requests run at the full ``response_length``.

Selected with ``actor_rollout_ref.rollout.agent.default_agent_loop=reasonrl_length_capped``
(the option files set it); registered in verl's agent-loop registry with verl's ``register``
right after ``verl.experimental.agent_loop`` is imported (the agent-loop workers).
"""

from __future__ import annotations

from typing import Any

from reasonrl.compat.verl import single_turn_agent_loop_base
from reasonrl.plugins.length_curriculum.config import AGENT_LOOP, LIMIT_FIELD
from reasonrl.plugins.length_curriculum.schedule import cap_sampling_params

SingleTurnAgentLoop = single_turn_agent_loop_base()  # version-guarded (compat.verl.AGENT_LOOP_CAP)


class LengthCappedAgentLoop(SingleTurnAgentLoop):
    """``SingleTurnAgentLoop`` whose request is capped at the batch's ``reasonrl_response_limit``."""

    async def run(self, sampling_params: dict[str, Any], **kwargs):
        limit = kwargs.pop(LIMIT_FIELD, None)
        capped = cap_sampling_params(sampling_params, limit, self.response_length)
        return await super().run(capped, **kwargs)


def register() -> None:
    """Add the loop to verl's agent-loop registry (idempotent: verl's ``register`` overwrites)."""
    from verl.experimental.agent_loop.agent_loop import register as register_agent_loop

    register_agent_loop(AGENT_LOOP)(LengthCappedAgentLoop)


register()  # see reasonrl.bridges.import_hooks.register_agent_loop_when_loaded
