"""The verl internals the length curriculum reaches into, behind their version guard (offered to
``reasonrl train`` and ``reasonrl plugins`` through the plugin's ``reasonrl_reaches`` hook)."""

from __future__ import annotations

from typing import Any

from reasonrl.compat import Reach, config_value
from reasonrl.compat.verl import VERL_0_9


def _length_curriculum_on(config: Any) -> bool:
    return bool(config_value(config, "reasonrl.length_curriculum.stages"))


AGENT_LOOP_CAP = Reach(
    name="verl.agent-loop-request-cap",
    package="verl",
    versions=VERL_0_9,
    touches="the LLM server taking sampling_params['max_tokens'] as the request's cap (through the agent loop "
    "'reasonrl'), KVBatchMeta tags 'response_len'/'is_padding'",
    used_by="length_curriculum plugin (each training request capped at the current stage; the step's lengths)",
    public_hook="a per-request response budget in verl's agent-loop input honoured by every agent loop, and "
    "response lengths in a public trainer-callback API",
    needed=_length_curriculum_on,
)

REACHES = (AGENT_LOOP_CAP,)


def response_lengths(batch: Any) -> list[int]:
    """Response lengths (tokens) of a training batch's ``KVBatchMeta``, verl's padding samples left out."""
    AGENT_LOOP_CAP.require()
    return [int(tag["response_len"]) for tag in batch.tags if not tag.get("is_padding", False)]
