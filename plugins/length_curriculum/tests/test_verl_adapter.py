"""The verl adapters against verl 0.9.1's real classes, without Ray or vLLM: a training batch
carrying the limit goes through verl's own agent-loop worker code (``AgentLoopWorkerTQ``'s
``generate_sequences``, ``AgentLoopWorker._run_agent_loop``, the agent-loop registry and
hydra instantiation) into the capped loop and reaches the LLM server as ``max_tokens``; a
validation batch does not. The callback on verl's ``KVBatchMeta`` and its checkpointed state."""

from __future__ import annotations

import asyncio
import types

import numpy as np
import pytest

from reasonrl.plugins.length_curriculum.config import AGENT_LOOP, LIMIT_FIELD

STAGES = "reasonrl.length_curriculum.stages=[16,24,32]"
TINY = ["recipe=longcat", "+preset=cpu_tiny", "+reasonrl/length_curriculum=longcat_code", STAGES]


@pytest.fixture(scope="module")
def config():
    from reasonrl.cli.train import compose_config

    return compose_config(TINY)


def unwrapped(method):
    """Ray wraps actor methods for tracing; the plain function underneath."""
    return getattr(method, "__wrapped__", method)


class FakeServer:
    """verl's LLMServerClient.generate signature; answers with as many tokens as allowed (else 40)."""

    def __init__(self) -> None:
        self.requests: list[dict] = []

    async def generate(self, request_id, *, prompt_ids, sampling_params, **kwargs):
        from verl.workers.rollout.replica import TokenOutput

        self.requests.append(dict(sampling_params))
        n = int(sampling_params.get("max_tokens", 40))
        return TokenOutput(token_ids=[7] * n, log_probs=[0.0] * n)


def test_registered_in_verls_agent_loop_registry():
    import verl  # noqa: F401  (reasonrl's verl bridge: the registration waits for the agent-loop package)
    from verl.experimental.agent_loop import agent_loop

    from reasonrl.plugins.length_curriculum.verl_agent_loop import LengthCappedAgentLoop

    assert agent_loop._agent_loop_registry[AGENT_LOOP] == {
        "_target_": f"{LengthCappedAgentLoop.__module__}.{LengthCappedAgentLoop.__qualname__}"
    }


def rollout(config, *, limit: int | None, validate: bool) -> tuple[FakeServer, list]:
    """A 4-prompt batch (as the trainer builds it) through verl's agent-loop worker code."""
    import verl  # noqa: F401
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
    from verl.trainer.ppo.v1.agent_loop_tq import AgentLoopWorkerTQ
    from verl.utils import tensordict_utils as tu
    from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn

    from reasonrl.plugins.length_curriculum.verl_callback import LengthCurriculumCallback
    from reasonrl.smoke.tokenizer import build_tokenizer

    rows = [
        {"raw_prompt": [{"role": "user", "content": f"{i}+1="}], "index": i, "data_source": "sum"} for i in range(4)
    ]
    batch_dict = collate_fn(rows)
    batch_dict["uid"] = np.array([f"u{i}" for i in range(4)], dtype=object)
    batch = tu.get_tensordict(batch_dict)
    tu.assign_non_tensor_data(batch, "global_steps", 3)
    if validate:
        tu.assign_non_tensor_data(batch, "validate", True)  # as verl's _validate does
    if limit is not None:
        # the proposed trainer hook: every callback's batch_fields() on every training batch
        callback = LengthCurriculumCallback(types.SimpleNamespace(limit=limit))
        for key, value in callback.batch_fields(trainer=None).items():
            tu.assign_non_tensor_data(batch, key, value)

    server, outputs = FakeServer(), []

    async def postprocess(output, validate, **kwargs):
        outputs.append(output)

    async def main():
        worker = types.SimpleNamespace(
            config=config,
            background_tasks=set(),
            llm_client=server,
            tokenizer=build_tokenizer(),
            processor=None,
            hf_model_type=None,
            dataset_cls=RLHFDataset,
            tools=[],
            _agent_loop_postprocess=postprocess,
        )
        run_agent_loop = unwrapped(AgentLoopWorker._run_agent_loop)

        async def run_prompt(prompt, sampling_params, trajectory, trace=False):
            # verl's _run_prompt without its TransferQueue status writes: one session per prompt
            await run_agent_loop(
                worker, dict(sampling_params), trajectory=trajectory, trace=False, session_id=0, **prompt
            )

        worker._run_prompt = run_prompt
        for chunk in batch.chunk(2):  # as AgentLoopManagerTQ splits a batch over its workers
            await unwrapped(AgentLoopWorkerTQ.generate_sequences)(worker, chunk)
        while worker.background_tasks:
            await asyncio.gather(*list(worker.background_tasks))

    asyncio.run(main())
    return server, outputs


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
    from reasonrl.cli.train import compose_config
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
