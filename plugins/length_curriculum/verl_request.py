"""verl adapter: the length curriculum's request transform — each training request capped at the
curriculum's current limit, in reasonrl's agent loop ``reasonrl``.

verl sizes its tensors and vLLM's ``max_model_len`` once from ``data.max_response_length`` (=
the last stage); a stage is a per-request cap: ``sampling_params['max_tokens']``, which verl's
LLM server passes to vLLM as the request's ``max_tokens`` (and its preemption resume keeps as the
cumulative budget). The limit arrives with the request: the trainer callback puts it on every
training batch as the field ``reasonrl_response_limit`` (``verl_callback.py``), and verl's agent
loop workers hand a batch's fields to the loop. Validation batches (built by verl's ``_validate``)
carry no limit: their requests run at the full ``response_length``.

Order 10: the cap is in the sampling parameters before any later transform reads them (partial
rollout budgets each segment within it).
"""

from __future__ import annotations

from typing import Any

from reasonrl.plugins.length_curriculum.config import LIMIT_FIELD
from reasonrl.plugins.length_curriculum.schedule import cap_sampling_params
from reasonrl.request_transforms import RequestContext, RequestTransform


class LengthCap(RequestTransform):
    """``max_tokens`` = the batch's ``reasonrl_response_limit`` (never above ``response_length``)."""

    order = 10
    fields = (LIMIT_FIELD,)

    def __init__(self, response_length: int) -> None:
        self.response_length = response_length

    def sampling_params(self, params: dict[str, Any], fields: dict[str, Any], request: dict[str, Any], **kwargs: Any):
        return cap_sampling_params(params, fields[LIMIT_FIELD], self.response_length)


def length_cap(context: RequestContext) -> LengthCap:
    """The factory the plugin offers while its curriculum is on (``reasonrl_request_transforms``)."""
    from reasonrl.plugins.length_curriculum.compat import AGENT_LOOP_CAP

    AGENT_LOOP_CAP.require()
    return LengthCap(context.response_length)
