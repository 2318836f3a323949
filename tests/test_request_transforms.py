"""reasonrl's one agent loop: plugins' request transforms compose in a fixed order (issue 43.4).

The contract on its own (order of sampling parameters, engine call and finish; fields taken out
of the request), then the length curriculum's cap, repeat detection and partial rollout's budget
on the same requests, through verl 0.9.1's own agent-loop worker code (no Ray, no vLLM engine: a
scripted server records what each request asked for)."""

from __future__ import annotations

import asyncio
import json
import types

import pytest

from reasonrl.request_transforms import RequestContext, RequestTransform, build_transforms, chain_generate


class _Tagging(RequestTransform):
    fields = ("tag_field",)

    def __init__(self, name: str, order: int, log: list) -> None:
        self.name, self.order, self.log = name, order, log

    def sampling_params(self, params, fields, request, **kwargs):
        self.log.append(("params", self.name, fields["tag_field"]))
        return {**params, "seen": [*params.get("seen", []), self.name]}

    async def generate(self, call_next, **request):
        self.log.append(("enter", self.name))
        output = await call_next(**request)
        self.log.append(("leave", self.name))
        return output

    def finish(self, output, **kwargs):
        self.log.append(("finish", self.name))


def test_transforms_run_in_order_around_the_engine_call():
    log: list = []
    factories = [("b", lambda c: _Tagging("late", 30, log)), ("a", lambda c: _Tagging("early", 10, log))]
    factories.append(("c", lambda c: None))  # a plugin with nothing to do in this run
    transforms = build_transforms(factories, RequestContext(config=None, response_length=8))
    assert [t.name for t in transforms] == ["early", "late"]
    params = {}
    for t in transforms:
        params = t.sampling_params(params, {"tag_field": 1}, {})
    assert params["seen"] == ["early", "late"]

    async def engine(**request):
        log.append(("engine", request["sampling_params"]["seen"]))
        return types.SimpleNamespace()

    asyncio.run(chain_generate(transforms, engine)(sampling_params=params))
    for t in reversed(transforms):
        t.finish(None)
    assert log[2:] == [
        ("enter", "early"),
        ("enter", "late"),
        ("engine", ["early", "late"]),
        ("leave", "late"),
        ("leave", "early"),
        ("finish", "late"),
        ("finish", "early"),
    ]


def test_a_factory_that_builds_something_else_is_refused_naming_its_plugin():
    with pytest.raises(TypeError, match="plugin 'odd'"):
        build_transforms([("odd", lambda c: object())], RequestContext(config=None, response_length=8))


# ---------------------------------------------------------------- three plugins on one request

LIMIT, BUDGET = 4, 3
THREE = [
    "recipe=kimi_k15",
    "+preset=cpu_tiny",
    "+reasonrl/rollout=[repeat_detection,partial]",
    f"reasonrl.rollout.token_budget={BUDGET}",
    "+reasonrl/length_curriculum=longcat_code",
]


@pytest.fixture(scope="module")
def config():
    from reasonrl.cli.train import compose_config
    from reasonrl.config import config_value, validate_config

    response_length = compose_config(THREE[:2]).data.max_response_length
    composed = compose_config([*THREE, f"reasonrl.length_curriculum.stages=[{LIMIT},{response_length}]"])
    validate_config(composed)  # the three options accept each other at start-up
    assert config_value(composed, "actor_rollout_ref.rollout.agent.default_agent_loop") == "reasonrl"
    return composed


def test_length_cap_repeat_detection_and_partial_budget_shape_the_same_request(config):
    from reasonrl.plugins.length_curriculum.config import LIMIT_FIELD
    from reasonrl.plugins.rollout.config import BUDGET_FIELD, CARRIED_FIELD, PARTIAL_FIELD, STOP_REASON_FIELD
    from reasonrl.testing.agent_loop import run_batch

    fields = {LIMIT_FIELD: LIMIT, BUDGET_FIELD: BUDGET, CARRIED_FIELD: ""}
    server, outputs = run_batch(config, fields, prompts=2, n=2)
    assert len(server.requests) == 4
    for request in server.requests:
        params = request["sampling_params"]
        assert params["max_tokens"] == BUDGET, "partial rollout budgets the segment below the cap"
        assert params["repetition_detection"].max_pattern_size > 0, "repeat detection asked of vLLM"
    first = {}
    for output in outputs:
        record = output.extra_fields[PARTIAL_FIELD]
        assert output.extra_fields[STOP_REASON_FIELD] == "completed", "the stop reason kept"
        assert record["unfinished"] and len(output.response_ids) == BUDGET
        first[record["key"]] = record

    # the held groups go out again (the callback's carried field: every response's record by session)
    carried = {}
    for key, record in first.items():
        uid, session = key.split("/")
        carried.setdefault(uid, {})[int(session)] = record
    for uid, records in carried.items():
        row = int(uid[1:])
        server, outputs = run_batch(
            config,
            {**fields, CARRIED_FIELD: json.dumps([records[0], records[1]])},
            prompts=row + 1,
            n=2,
            global_steps=4,
        )
        continued = [o for o in outputs if o.extra_fields[PARTIAL_FIELD]["key"].startswith(f"{uid}/")]
        for output in continued:
            record = output.extra_fields[PARTIAL_FIELD]
            # the cap (4) ends the response one token into the second segment: not held forever
            assert len(output.response_ids) == LIMIT and not record["unfinished"], record
            assert record["versions"] == [3, 4]
            assert sum(output.response_mask) == 1, "the earlier segment left out of the loss"
        assert any(r["sampling_params"]["max_tokens"] == LIMIT - BUDGET for r in server.requests)
