"""A checkpoint engine over gloo: verl's disaggregated weight sync on CPU hosts (backend ``gloo``).

verl 0.9.1 moves weights from the trainer to rollout replicas that run apart from it through a
``CheckpointEngine`` (``verl/checkpoint_engine``): NCCL (cupy + CUDA), NIXL, HCCL, Mooncake — none
runs without an accelerator. This one is NCCL's design on gloo over TCP: actor rank 0 broadcasts
the weights in fixed-size uint8 buckets to every rollout worker of the update; each bucket's
layout (verl's ``TensorMeta`` per chunk) goes first, pickled; the other actor ranks walk the weight
generator (producing a weight is collective over the actor group) and send nothing.

The group is built for each update from the replicas the manager hands it (``build_topology`` ->
``init_process_group``) and torn down in ``finalize``: a manager may update one replica while
another keeps generating with its old weights, the pattern of LongCat's DORA (§3.1.1). Its own
process group (``ProcessGroupGloo`` on a fresh TCP store), so torch's default group of either side
is untouched. Registered as ``CheckpointEngineRegistry['gloo']``; select with
``actor_rollout_ref.rollout.checkpoint_engine.backend=gloo``.
"""

from __future__ import annotations

import datetime
import pickle
import uuid
from dataclasses import dataclass
from typing import Any, AsyncGenerator, Generator

import torch
import torch.distributed as dist
from verl.checkpoint_engine.base import (
    CheckpointEngine,
    CheckpointEngineRegistry,
    TensorMeta,
    merge_weight_chunks,
    split_weight_chunks,
)

BACKEND = "gloo"


@dataclass(frozen=True)
class GroupAddress:
    """Where the update's TCP store listens (actor rank 0's node) and the group's unique prefix."""

    host: str
    port: int
    prefix: str


def _free_port(host: str) -> int:
    import socket

    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


def _node_ip() -> str:
    try:
        import ray

        return ray.util.get_node_ip_address().strip("[]")
    except Exception:  # outside Ray (the engine's own test): this host
        return "127.0.0.1"


class GlooCheckpointEngine(CheckpointEngine):
    """Weights from actor rank 0 to the update's rollout workers over gloo (see the module docstring).

    Args:
        bucket_size: bytes per broadcast (verl's ``update_weights_bucket_megabytes``).
        is_master: actor rank 0 (the sender; it hosts the update's TCP store).
        timeout_s: how long a member waits for the others (store connection, each broadcast).
    """

    def __init__(self, bucket_size: int, is_master: bool = False, timeout_s: float = 600.0) -> None:
        self.bucket_size, self.is_master = bucket_size, is_master
        self.timeout = datetime.timedelta(seconds=timeout_s)
        self.rank: int | None = None
        self.group = self.store = None
        self.updates = 0  # updates this engine took part in (sender or receiver)
        self.last_version: int | None = None  # global_steps of the last update received
        self._bytes = self._byte_sum = 0  # of the current update: printed at its end

    # ---------------------------------------------------------------- topology, per update
    def prepare(self) -> GroupAddress | None:
        if not self.is_master:
            return None
        host = _node_ip()
        return GroupAddress(host=host, port=_free_port(host), prefix=f"reasonrl-ckpt-{uuid.uuid4().hex}")

    @classmethod
    def build_topology(cls, actor_wg_world_size: int, rollout_world_size: int, metadata: list):
        address = metadata[0]
        if not isinstance(address, GroupAddress):
            raise ValueError("gloo checkpoint engine: actor rank 0 must be the master (is_master=True)")
        world_size = 1 + rollout_world_size
        actor = {
            "rank": [0] + [-1] * (actor_wg_world_size - 1),
            "world_size": [world_size] * actor_wg_world_size,
            "address": [address] * actor_wg_world_size,
        }
        rollout = {
            "rank": list(range(1, world_size)),
            "world_size": [world_size] * rollout_world_size,
            "address": [address] * rollout_world_size,
        }
        return actor, rollout

    def init_process_group(self, rank: int, world_size: int, address: GroupAddress) -> None:
        self.rank, self.world_size = rank, world_size
        if rank < 0:  # an actor rank that only walks the weight generator
            return
        self.store = dist.TCPStore(
            address.host, address.port, world_size, is_master=rank == 0, timeout=self.timeout, wait_for_workers=False
        )
        self.group = dist.ProcessGroupGloo(dist.PrefixStore(address.prefix, self.store), rank, world_size, self.timeout)

    def finalize(self) -> None:
        self.group = self.store = None  # each update builds its own group
        self.rank = None

    # ---------------------------------------------------------------- transfer
    def _broadcast(self, tensor: torch.Tensor) -> None:
        self.group.broadcast([tensor], dist.BroadcastOptions()).wait()

    def _broadcast_layout(self, layout: dict | None) -> dict:
        if self.rank == 0:
            payload = torch.frombuffer(bytearray(pickle.dumps(layout)), dtype=torch.uint8)
            size = torch.tensor([payload.numel()], dtype=torch.int64)
        else:
            size = torch.zeros(1, dtype=torch.int64)
        self._broadcast(size)
        if self.rank != 0:
            payload = torch.empty(int(size.item()), dtype=torch.uint8)
        self._broadcast(payload)
        # a receiver's layout comes from the sender's pickle: only this group's members send it
        return layout if self.rank == 0 else pickle.loads(payload.numpy().tobytes())

    def _send_bucket(self, bucket: torch.Tensor, length: int, layout: dict, is_last: bool) -> None:
        self._broadcast_layout({"bucket_meta": layout, "length": length, "is_last": is_last})
        self._broadcast(bucket[:length])
        self._count(bucket[:length])

    def _count(self, payload: torch.Tensor) -> None:
        self._bytes += payload.numel()
        self._byte_sum += int(payload.sum(dtype=torch.int64))

    def _report(self, role: str, global_steps) -> None:
        # sender and receivers print the same two numbers when the weights arrived intact
        print(
            f"[reasonrl] gloo checkpoint engine: {role} weights of global step {global_steps}: "
            f"{self._bytes} bytes, byte sum {self._byte_sum}",
            flush=True,
        )
        self._bytes = self._byte_sum = 0

    @torch.no_grad()
    async def send_weights(self, weights: Generator[tuple[str, torch.Tensor], None, None], global_steps=None):
        if self.rank is None:
            raise RuntimeError("gloo checkpoint engine: send_weights before init_process_group")
        if self.rank > 0:
            raise RuntimeError("gloo checkpoint engine: rollout workers receive, they do not send")
        if self.rank < 0:
            for _ in weights:
                pass
            return {}
        bucket = torch.empty(self.bucket_size, dtype=torch.uint8)
        layout: dict[str, TensorMeta] = {}
        offset = 0
        async for meta, chunk in split_weight_chunks(weights, self.bucket_size):
            if offset + meta.chunk_size > self.bucket_size:
                self._send_bucket(bucket, offset, layout, is_last=False)
                layout, offset = {}, 0
            meta.offset = offset
            bucket[offset : offset + meta.chunk_size] = chunk.detach().to("cpu").contiguous()
            layout[meta.name] = meta
            offset += meta.chunk_size
        self._send_bucket(bucket, offset, layout, is_last=True)
        self.updates += 1
        self._report("sent", global_steps)
        return {"checkpoint_engine/gloo_updates": float(self.updates)}

    async def _chunks(self) -> AsyncGenerator[tuple[TensorMeta, torch.Tensor], None]:
        while True:
            header = self._broadcast_layout(None)
            bucket = torch.empty(header["length"], dtype=torch.uint8)
            self._broadcast(bucket)
            self._count(bucket)
            for meta in header["bucket_meta"].values():
                # a copy: viewing the bytes as the weight's dtype needs an aligned start
                yield meta, bucket[meta.offset : meta.offset + meta.chunk_size].clone()
            if header["is_last"]:
                return

    async def receive_weights(self, global_steps=None) -> AsyncGenerator[tuple[str, torch.Tensor], None]:
        if self.rank is None or self.rank < 1:
            raise RuntimeError("gloo checkpoint engine: receive_weights needs a rollout rank of an initialised group")
        async for name, weight in merge_weight_chunks(self._chunks(), self.bucket_size):
            yield name, weight
        self.updates += 1
        self.last_version = global_steps
        self._report("received", global_steps)

    def state(self) -> dict[str, Any]:
        """What this engine has done (for tests and metrics): updates taken part in, last version."""
        return {"updates": self.updates, "last_version": self.last_version}


def register() -> None:
    """``CheckpointEngineRegistry['gloo']`` (idempotent: verl's registry maps the name to the class)."""
    CheckpointEngineRegistry.register(BACKEND)(GlooCheckpointEngine)


register()  # see reasonrl.bridges.import_hooks.register_adapter_when_loaded
