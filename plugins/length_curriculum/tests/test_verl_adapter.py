"""The verl adapters against verl 0.9.1's real classes, without Ray or vLLM: a training batch
carrying the limit goes through verl's own agent-loop worker code (``AgentLoopWorkerTQ``'s
``generate_sequences``, ``AgentLoopWorker._run_agent_loop``, the agent-loop registry and
hydra instantiation) into reasonrl's agent loop, whose length-cap transform makes it reach the LLM server as ``max_tokens``; a
validation batch does not. The callback on verl's ``KVBatchMeta`` and its checkpointed state."""

from __future__ import annotations

import types

import pytest

from reasonrl.plugins.length_curriculum.config import LIMIT_FIELD
from reasonrl.request_transforms import AGENT_LOOP

STAGES = "reasonrl.length_curriculum.stages=[16,24,32]"
TINY = ["recipe=longcat", "+preset=cpu_tiny", "+reasonrl/length_curriculum=longcat_code", STAGES]


@pytest.fixture(scope="module")
def config():
    from reasonrl.composition import compose_config

    return compose_config(TINY)


def test_the_cap_is_a_transform_of_the_composed_loop_only_while_the_curriculum_is_on(config):
    import verl  # noqa: F401  (reasonrl's verl bridge: the registration waits for the agent-loop package)
    from verl.experimental.agent_loop import agent_loop

    from reasonrl.bridges.verl_agent_loop import ComposedAgentLoop
    from reasonrl.composition import compose_config
    from reasonrl.plugins.length_curriculum.verl_request import length_cap
    from reasonrl.request_transforms import transform_factories

    assert agent_loop._agent_loop_registry[AGENT_LOOP] == {
        "_target_": f"{ComposedAgentLoop.__module__}.{ComposedAgentLoop.__qualname__}"
    }
    assert ("length_curriculum", length_cap) in transform_factories(config)
    off = compose_config(["recipe=longcat", "+preset=cpu_tiny"])
    assert all(plugin != "length_curriculum" for plugin, _ in transform_factories(off))


def rollout(config, *, limit: int | None, validate: bool):
    """A 4-prompt batch (as the trainer builds it) through verl's agent-loop worker code; the
    callback's batch fields on it when a limit is given (every training batch carries them)."""
    from reasonrl.plugins.length_curriculum.verl_callback import LengthCurriculumCallback
    from reasonrl.testing.agent_loop import run_batch

    fields = {}
    if limit is not None:
        fields = LengthCurriculumCallback(types.SimpleNamespace(limit=limit)).batch_fields(trainer=None)
    server, outputs = run_batch(config, fields, validate=validate)
    return types.SimpleNamespace(requests=[r["sampling_params"] for r in server.requests]), outputs


def test_training_requests_are_capped_at_the_batch_limit(config):
    server, outputs = rollout(config, limit=16, validate=False)
    assert len(server.requests) == 4
    assert all(request["max_tokens"] == 16 for request in server.requests)
    assert all(len(output.response_ids) == 16 for output in outputs)


def test_a_limit_above_the_configured_length_is_held_to_it(config):
    server, _ = rollout(config, limit=64, validate=False)
    assert {request["max_tokens"] for request in server.requests} == {32}


def test_validation_requests_are_not_capped(config):
    # verl's _validate builds its own batches: no limit field, verl's default cap (response_length)
    server, outputs = rollout(config, limit=None, validate=True)
    assert len(server.requests) == 4 and all("max_tokens" not in request for request in server.requests)
    assert all(len(output.response_ids) == 32 for output in outputs)  # 40 generated, verl truncates at 32


# ---------------------------------------------------------------------- the callback


def kv_batch(lengths: list[int], padding: int = 0):
    from transfer_queue.metadata import KVBatchMeta

    tags = [{"status": "success", "response_len": n, "prompt_len": 10, "seq_len": 10 + n} for n in lengths]
    tags += [{"status": "success", "response_len": 1, "prompt_len": 7, "seq_len": 8, "is_padding": True}] * padding
    return KVBatchMeta(partition_id="train", keys=[f"k{i}" for i in range(len(tags))], tags=tags)


def test_build_only_with_stages(config):
    from reasonrl.composition import compose_config
    from reasonrl.plugins.length_curriculum.verl_callback import build

    assert build(compose_config(["recipe=longcat", "+preset=cpu_tiny"])) is None
    callback = build(config)
    assert callback.curriculum.stages == (16, 24, 32) and callback.batch_fields(None) == {LIMIT_FIELD: 16}


def test_before_advantage_steps_up_from_the_next_batch_and_logs(config):
    from reasonrl.plugins.length_curriculum.verl_callback import build

    callback = build(config)
    metrics: dict = {}
    callback.before_advantage(None, kv_batch([4] * 8, padding=3), metrics)
    assert metrics["length_curriculum/limit"] == 16 and metrics["length_curriculum/stepped"] == 0
    assert metrics["length_curriculum/quantile_length"] == 4.0
    # q0.9 of 15s = 15 ≥ 0.9·16; padding samples (length 1) are not counted
    metrics = {}
    callback.before_advantage(None, kv_batch([15] * 9 + [2], padding=5), metrics)
    assert metrics == {
        "length_curriculum/limit": 16.0,
        "length_curriculum/stage": 0.0,
        "length_curriculum/trigger": pytest.approx(14.4),
        "length_curriculum/quantile_length": pytest.approx(15.0),
        "length_curriculum/stepped": 1.0,
    }
    assert callback.batch_fields(None) == {LIMIT_FIELD: 24}


def test_a_response_longer_than_the_limit_stops_the_run(config):
    from reasonrl.plugins.length_curriculum.verl_callback import build

    callback = build(config)
    with pytest.raises(RuntimeError, match="did not reach generation"):
        callback.before_advantage(None, kv_batch([16, 17]), {})


def test_state_round_trip_through_the_checkpoint_format(config, tmp_path):
    from reasonrl.bridges.verl_trainer import callback_state_path
    from reasonrl.plugins.length_curriculum.verl_callback import build
    from reasonrl.state_io import digest, load_state, save_state

    callback = build(config)
    callback.before_advantage(None, kv_batch([16] * 10), {})  # → 24
    path = callback_state_path(str(tmp_path / "global_step_2"), "length_curriculum")
    save_state(path, callback.state_dict())
    resumed = build(config)
    resumed.load_state_dict(load_state(path))
    assert resumed.batch_fields(None) == {LIMIT_FIELD: 24}
    assert digest(resumed.state_dict()) == digest(callback.state_dict())
