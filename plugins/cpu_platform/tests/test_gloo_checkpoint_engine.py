"""The gloo checkpoint engine on its own: verl's engine protocol (prepare -> build_topology ->
init_process_group -> send/receive -> finalize) between a sender, a second actor rank and two
receivers, each member in its own thread with its own gloo group over TCP."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
import torch

from reasonrl.plugins.cpu_platform.gloo_checkpoint_engine import BACKEND, GlooCheckpointEngine, GroupAddress

BUCKET = 1024  # bytes: the 600-float tensor spans three buckets


def weights(version: int) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(version)
    return {
        "layer.weight": torch.randn(7, 5, generator=generator),
        "layer.bias": torch.randn(33, generator=generator).to(torch.bfloat16),
        "positions": torch.randint(0, 1000, (3,), generator=generator),
        "large.weight": torch.randn(600, generator=generator),  # 2,400 bytes: chunked and merged
    }


def run_members(members: dict[str, tuple[GlooCheckpointEngine, dict]], version: int) -> dict[str, dict]:
    """One update: every member's init_process_group with its topology kwargs, then its part."""
    received: dict[str, dict] = {}
    errors: list[BaseException] = []

    def member(name: str, engine: GlooCheckpointEngine, topology: dict) -> None:
        async def part() -> None:
            engine.init_process_group(**topology)
            if engine.rank is not None and engine.rank >= 1:
                received[name] = {n: w.clone() async for n, w in engine.receive_weights(global_steps=version)}
            else:
                await engine.send_weights(iter(weights(version).items()), global_steps=version)
            engine.finalize()

        try:
            asyncio.run(part())
        except BaseException as error:  # noqa: BLE001  re-raised in the test's thread
            errors.append(error)

    threads = [threading.Thread(target=member, args=(name, *pair)) for name, pair in members.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors, errors
    return received


def topology(actor: list[GlooCheckpointEngine], rollout: list[GlooCheckpointEngine]) -> list[dict]:
    metadata = [engine.prepare() for engine in actor + rollout]
    actor_kwargs, rollout_kwargs = GlooCheckpointEngine.build_topology(len(actor), len(rollout), metadata)
    kwargs = [dict(zip(actor_kwargs, values)) for values in zip(*actor_kwargs.values())]
    return kwargs + [dict(zip(rollout_kwargs, values)) for values in zip(*rollout_kwargs.values())]


def test_weights_arrive_bit_identical_and_one_replica_updates_while_another_keeps_working():
    sender, second = GlooCheckpointEngine(BUCKET, is_master=True), GlooCheckpointEngine(BUCKET)
    first_replica, second_replica = GlooCheckpointEngine(BUCKET), GlooCheckpointEngine(BUCKET)

    # update 1: both replicas
    kwargs = topology([sender, second], [first_replica, second_replica])
    assert [k["rank"] for k in kwargs] == [0, -1, 1, 2] and {k["world_size"] for k in kwargs} == {3}
    names = ("sender", "actor_rank_1", "replica_0", "replica_1")
    members = dict(zip(names, zip((sender, second, first_replica, second_replica), kwargs)))
    received = run_members(members, version=1)
    expected = weights(1)
    for replica in ("replica_0", "replica_1"):
        assert received[replica].keys() == expected.keys()
        for name, tensor in expected.items():
            got = received[replica][name]
            assert got.dtype == tensor.dtype and got.shape == tensor.shape
            assert torch.equal(got.view(-1).view(torch.uint8), tensor.view(-1).view(torch.uint8)), name

    # update 2: replica 0 only, while replica 1 keeps computing with its version-1 weights
    held = received["replica_1"]
    stop, steps = threading.Event(), []

    def keep_generating() -> None:
        while not stop.is_set():
            steps.append(float((held["layer.weight"] @ held["layer.weight"].T).sum()))
            time.sleep(0.001)

    worker = threading.Thread(target=keep_generating)
    worker.start()
    kwargs = topology([sender, second], [first_replica])
    members = dict(zip(names[:3], zip((sender, second, first_replica), kwargs)))
    during = len(steps)
    updated = run_members(members, version=2)
    stop.set()
    worker.join()
    assert len(steps) > during  # replica 1 went on working through replica 0's update
    assert all(torch.equal(updated["replica_0"][name], tensor) for name, tensor in weights(2).items())
    assert all(torch.equal(held[name], tensor) for name, tensor in weights(1).items())  # untouched
    assert first_replica.state() == {"updates": 2, "last_version": 2}
    assert second_replica.state() == {"updates": 1, "last_version": 1}


def test_topology_needs_actor_rank_zero_as_master_and_roles_are_enforced():
    with pytest.raises(ValueError, match="actor rank 0 must be the master"):
        GlooCheckpointEngine.build_topology(1, 1, [None, None])
    address = GroupAddress("127.0.0.1", 1, "x")
    actor, rollout = GlooCheckpointEngine.build_topology(2, 3, [address, None, None, None, None])
    assert actor["rank"] == [0, -1] and rollout["rank"] == [1, 2, 3]
    assert set(actor["world_size"] + rollout["world_size"]) == {4}
    engine = GlooCheckpointEngine(BUCKET)
    with pytest.raises(RuntimeError, match="before init_process_group"):
        asyncio.run(engine.send_weights(iter(())))


def test_registered_with_verls_checkpoint_engine_registry():
    from verl.checkpoint_engine import CheckpointEngineRegistry

    assert CheckpointEngineRegistry.get(BACKEND) is GlooCheckpointEngine
    engine = CheckpointEngineRegistry.new(BACKEND, bucket_size=BUCKET, is_master=True)
    assert isinstance(engine.prepare(), GroupAddress)
