"""verl adapter: the rollout plugin's request transforms in reasonrl's agent loop ``reasonrl`` —
vLLM's repeat detection asked per request with each response's stop reason kept, and partial
rollout's budgeted, continued requests (Kimi k1.5 §2.6.2).

vLLM stops a generation whose tail repeats (``SamplingParams.repetition_detection``, finish
reason ``repetition``; present in vLLM 0.24 and 0.32) — inside generation, so the looping tokens
are never generated. verl's LLM server passes that reason back as ``TokenOutput.stop_reason`` but
its single-turn loop drops it; :class:`StopReasons` copies it into the response's
``extra_fields[STOP_REASON_FIELD]``, where the trainer callback (``verl_callback.py``) reads it to
penalise and count.

Partial rollout (:class:`PartialRollout`): training batches carry the budget (``BUDGET_FIELD``)
and, for a group sent out again, every response's record so far (``CARRIED_FIELD``, picked by
verl's ``session_id``). The engine is asked for at most ``budget`` new tokens after prompt +
tokens so far, within the response's limit — ``response_length``, or a lower ``max_tokens`` an
earlier transform set (the length curriculum's cap) — (a finished response of a held group is
returned as it is, without generating), and the segments are recorded with their policy versions
(``PARTIAL_FIELD``; verl's own ``min/max_global_steps`` tags too). A response is unfinished when
its segment used the whole budget without ending in EOS and below its limit (verl reports
"length" and "stop" both as "completed", so the last token decides).

Order: the stop-reason recorder (20) wraps the budgeted call (30), so a continued response's
reason is the last segment's; both come after the length cap (10).
"""

from __future__ import annotations

import json
from typing import Any

from reasonrl.plugins.rollout.config import BUDGET_FIELD, CARRIED_FIELD, PARTIAL_FIELD, STOP_REASON_FIELD
from reasonrl.plugins.rollout.partial import PartialTrajectory, segment_loss_mask
from reasonrl.request_transforms import RequestContext, RequestTransform


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


class StopReasons(RequestTransform):
    """Asks vLLM for repeat detection (when on) and keeps each response's stop reason."""

    order = 20

    def __init__(self, extra_params: dict[str, Any]) -> None:
        self.extra_params = extra_params

    def sampling_params(self, params, fields, request, **kwargs):
        return {**params, **self.extra_params}

    async def generate(self, call_next, **request):
        output = await call_next(**request)
        output.extra_fields = {**(output.extra_fields or {}), STOP_REASON_FIELD: output.stop_reason}
        return output


class _BudgetedRequest:
    """What one request of a partial-rollout step needs: its budget, policy version, the limit on
    the whole response and, for a held group's response, its record so far."""

    def __init__(self, budget: int, version: int, limit: int, eos_ids: set[int], prior: dict | None):
        self.budget, self.version, self.limit, self.eos_ids = budget, version, limit, eos_ids
        self.prior = PartialTrajectory.from_record(prior) if prior else None
        self.record: PartialTrajectory | None = None


async def generate_budgeted(call_next, request: _BudgetedRequest, *, prompt_ids, sampling_params, **kwargs):
    """One segment of a partial-rollout response: continued from its tokens so far, at most the
    budget, never past its limit; ``request.record`` is the response's record afterwards."""
    trajectory = request.prior or PartialTrajectory("", -1, list(prompt_ids))
    trajectory.prompt_ids = list(prompt_ids)
    if request.prior is not None and not request.prior.unfinished:  # finished earlier: as it was
        from verl.workers.rollout.replica import TokenOutput

        request.record = trajectory
        return TokenOutput(
            token_ids=trajectory.response_ids, log_probs=trajectory.logprobs, stop_reason=trajectory.stop_reason
        )
    so_far = trajectory.response_ids
    prompt, max_tokens = trajectory.continuation_request(request.budget, request.limit)
    params = {**sampling_params, "max_tokens": max_tokens}
    output = await call_next(prompt_ids=prompt, sampling_params=params, **kwargs)
    new = list(output.token_ids)
    # "completed" is verl's name for vLLM's "stop" and "length"; "aborted" (a paused engine) continues
    # later; any other reason (e.g. "repetition") ended the response
    stopped = output.stop_reason not in ("completed", "aborted", None)
    ended = len(new) < max_tokens or (bool(new) and new[-1] in request.eos_ids) or stopped
    trajectory.extend(request.version, new)
    trajectory.stop_reason = output.stop_reason
    trajectory.unfinished = not ended and len(so_far) + len(new) < request.limit
    if output.log_probs is not None:
        trajectory.logprobs = (trajectory.logprobs or [0.0] * len(so_far)) + list(output.log_probs)
    request.record = trajectory
    output.token_ids = trajectory.response_ids
    output.log_probs = trajectory.logprobs if output.log_probs is not None else None
    return output


def carried_record(carried: Any, session_id: int) -> dict | None:
    """The held group's record of response ``session_id`` (None for a new prompt)."""
    if not carried:
        return None
    records = json.loads(carried)
    return records[session_id] if session_id < len(records) else None


def eos_token_ids(tokenizer) -> set[int]:
    eos = getattr(tokenizer, "eos_token_id", None)
    return set(eos if isinstance(eos, (list, tuple)) else [] if eos is None else [eos])


class PartialRollout(RequestTransform):
    """Kimi §2.6.2's partial rollout on a training request that carries a budget (validation
    requests and runs without partial rollout pass through)."""

    order = 30
    fields = (BUDGET_FIELD, CARRIED_FIELD)

    def __init__(self, response_length: int, eos_ids: set[int], earlier_segments_in_loss: bool) -> None:
        self.response_length, self.eos_ids, self.earlier_in_loss = response_length, eos_ids, earlier_segments_in_loss
        self.request: _BudgetedRequest | None = None
        self.key = ""

    def sampling_params(self, params, fields, request, **kwargs):
        budget = fields[BUDGET_FIELD]
        if budget is None or budget == "":  # validation, or partial rollout off
            return params
        session = int(request.get("session_id", 0))
        limit = min(self.response_length, int(params.get("max_tokens", self.response_length)))
        self.request = _BudgetedRequest(
            int(budget),
            int(request.get("global_steps", 0)),
            limit,
            self.eos_ids,
            carried_record(fields[CARRIED_FIELD], session),
        )
        self.key = f"{request.get('uid', '')}/{session}"  # the row: the trainer's, when the group is held
        return params

    async def generate(self, call_next, **request):
        if self.request is None:
            return await call_next(**request)
        return await generate_budgeted(call_next, self.request, **request)

    def finish(self, output, **kwargs) -> None:
        if self.request is None:
            return
        trajectory = self.request.record
        trajectory.key = self.key
        lengths = [len(s.token_ids) for s in trajectory.segments]
        mask = segment_loss_mask(lengths, self.earlier_in_loss)
        output.response_mask = [m * keep for m, keep in zip(output.response_mask, mask)]
        versions = [s.version for s in trajectory.segments]
        output.extra_fields.update(
            {
                PARTIAL_FIELD: trajectory.to_record(),
                "min_global_steps": min(versions),
                "max_global_steps": max(versions),
            }
        )


def transform_factories(settings) -> list:
    """The factories for a run's ``reasonrl.rollout`` settings (the plugin's hook returns these)."""
    if not (settings.repetition_detection or settings.token_budget is not None):
        return []
    from reasonrl.plugins.rollout.compat import AGENT_LOOP_STOP_REASON

    AGENT_LOOP_STOP_REASON.require()
    extra = repetition_sampling_params(settings)

    def stop_reasons(context: RequestContext) -> StopReasons:
        return StopReasons(extra)

    def partial_rollout(context: RequestContext) -> PartialRollout:
        eos = eos_token_ids(context.tokenizer)
        return PartialRollout(context.response_length, eos, settings.earlier_segments_in_loss)

    return [stop_reasons] + ([partial_rollout] if settings.token_budget is not None else [])
