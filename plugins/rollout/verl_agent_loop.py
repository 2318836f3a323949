"""verl adapter: agent loop ``reasonrl_rollout`` — verl's single-turn agent loop that asks vLLM
for repeat detection (Kimi k1.5 §2.6.2), keeps each response's stop reason, and runs partial
rollout with a per-iteration token budget (Kimi k1.5 §2.6.2).

vLLM stops a generation whose tail repeats (``SamplingParams.repetition_detection``, finish
reason ``repetition``; present in vLLM 0.24 and 0.32) — inside generation, so the looping tokens
are never generated. verl's LLM server passes that reason back as ``TokenOutput.stop_reason`` but
its single-turn loop drops it; this loop wraps its own ``server_manager`` (one agent-loop instance
per request) to copy it into the response's ``extra_fields[STOP_REASON_FIELD]``, where the
trainer callback (``verl_callback.py``) reads it to penalise and count.

Partial rollout: training batches carry the budget (``BUDGET_FIELD``) and, for a group sent out
again, every response's record so far (``CARRIED_FIELD``, picked by verl's ``session_id``). The
same wrapper then asks vLLM for at most ``budget`` new tokens after prompt + tokens so far (a
finished response of a held group is returned as it is, without generating), and records the
segments with their policy versions (``PARTIAL_FIELD``; verl's own ``min/max_global_steps``
tags too). A response is unfinished when its segment used the whole budget without ending in
EOS (verl reports "length" and "stop" both as "completed", so the last token decides).

Selected with ``actor_rollout_ref.rollout.agent.default_agent_loop=reasonrl_rollout`` (the
option files set it); registered in verl's agent-loop registry when ``verl.experimental.agent_loop``
is imported.
"""

from __future__ import annotations

import json
from typing import Any

from reasonrl.compat.verl import AGENT_LOOP_STOP_REASON, single_turn_agent_loop_base
from reasonrl.plugins.rollout.config import (
    AGENT_LOOP,
    BUDGET_FIELD,
    CARRIED_FIELD,
    PARTIAL_FIELD,
    STOP_REASON_FIELD,
    settings_from,
)
from reasonrl.plugins.rollout.partial import PartialTrajectory, segment_loss_mask

SingleTurnAgentLoop = single_turn_agent_loop_base(AGENT_LOOP_STOP_REASON)


class _BudgetedRequest:
    """What one request of a partial-rollout step needs: its budget, policy version and, for a
    held group's response, its record so far."""

    def __init__(self, budget: int, version: int, response_length: int, eos_ids: set[int], prior: dict | None):
        self.budget, self.version, self.response_length, self.eos_ids = budget, version, response_length, eos_ids
        self.prior = PartialTrajectory.from_record(prior) if prior else None
        self.record: PartialTrajectory | None = None


class _StopReasonRecorder:
    """The agent loop's LLM client, with each answer's stop reason copied into its extra fields
    (and, under partial rollout, the request budgeted and continued)."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.request: _BudgetedRequest | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    async def generate(self, *args, **kwargs):
        output = await (self._budgeted(*args, **kwargs) if self.request else self._client.generate(*args, **kwargs))
        output.extra_fields = {**(output.extra_fields or {}), STOP_REASON_FIELD: output.stop_reason}
        return output

    async def _budgeted(self, *, prompt_ids, sampling_params, **kwargs):
        request = self.request
        trajectory = request.prior or PartialTrajectory("", -1, list(prompt_ids))
        trajectory.prompt_ids = list(prompt_ids)
        if request.prior is not None and not request.prior.unfinished:  # finished earlier: as it was
            from verl.workers.rollout.replica import TokenOutput

            request.record = trajectory
            return TokenOutput(
                token_ids=trajectory.response_ids, log_probs=trajectory.logprobs, stop_reason=trajectory.stop_reason
            )
        so_far = trajectory.response_ids
        prompt, max_tokens = trajectory.continuation_request(request.budget, request.response_length)
        if "max_tokens" in sampling_params:  # another cap on the whole response (never raised)
            max_tokens = min(max_tokens, int(sampling_params["max_tokens"]) - len(so_far))
        params = {**sampling_params, "max_tokens": max(1, max_tokens)}
        output = await self._client.generate(prompt_ids=prompt, sampling_params=params, **kwargs)
        new = list(output.token_ids)
        # "completed" is verl's name for vLLM's "stop" and "length"; "aborted" (a paused engine) continues
        # later; any other reason (e.g. "repetition") ended the response
        stopped = output.stop_reason not in ("completed", "aborted", None)
        ended = len(new) < max_tokens or (bool(new) and new[-1] in request.eos_ids) or stopped
        trajectory.extend(request.version, new)
        trajectory.stop_reason = output.stop_reason
        trajectory.unfinished = not ended and len(so_far) + len(new) < request.response_length
        if output.log_probs is not None:
            trajectory.logprobs = (trajectory.logprobs or [0.0] * len(so_far)) + list(output.log_probs)
        request.record = trajectory
        output.token_ids = trajectory.response_ids
        output.log_probs = trajectory.logprobs if output.log_probs is not None else None
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


def carried_record(carried: Any, session_id: int) -> dict | None:
    """The held group's record of response ``session_id`` (None for a new prompt)."""
    if not carried:
        return None
    records = json.loads(carried)
    return records[session_id] if session_id < len(records) else None


def eos_token_ids(tokenizer) -> set[int]:
    eos = getattr(tokenizer, "eos_token_id", None)
    return set(eos if isinstance(eos, (list, tuple)) else [] if eos is None else [eos])


class RolloutAgentLoop(SingleTurnAgentLoop):
    """``SingleTurnAgentLoop`` with vLLM repeat detection, the stop reason kept, and partial rollout."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.server_manager = _StopReasonRecorder(self.server_manager)
        self.settings = settings_from(self.config)
        self._extra_params = repetition_sampling_params(self.settings)

    async def run(self, sampling_params: dict[str, Any], **kwargs):
        budget = kwargs.pop(BUDGET_FIELD, None)
        carried = kwargs.pop(CARRIED_FIELD, None)
        params = {**sampling_params, **self._extra_params}
        if budget is None or budget == "":  # validation, or partial rollout off
            return await super().run(params, **kwargs)
        session = int(kwargs.get("session_id", 0))
        request = _BudgetedRequest(
            int(budget),
            int(kwargs.get("global_steps", 0)),
            self.response_length,
            eos_token_ids(self.tokenizer),
            carried_record(carried, session),
        )
        self.server_manager.request = request
        output = await super().run(params, **kwargs)
        trajectory = request.record
        trajectory.key = f"{kwargs.get('uid', '')}/{session}"  # the row: the trainer's, when the group is held
        lengths = [len(s.token_ids) for s in trajectory.segments]
        mask = segment_loss_mask(lengths, self.settings.earlier_segments_in_loss)
        output.response_mask = [m * keep for m, keep in zip(output.response_mask, mask)]
        versions = [s.version for s in trajectory.segments]
        output.extra_fields.update(
            {
                PARTIAL_FIELD: trajectory.to_record(),
                "min_global_steps": min(versions),
                "max_global_steps": max(versions),
            }
        )
        return output


def register() -> None:
    """Add the loop to verl's agent-loop registry (idempotent: verl's ``register`` overwrites)."""
    from verl.experimental.agent_loop.agent_loop import register as register_agent_loop

    register_agent_loop(AGENT_LOOP)(RolloutAgentLoop)


register()  # see reasonrl.bridges.import_hooks.register_agent_loop_when_loaded
