"""verl adapter of DORA (LongCat-Flash-Thinking §3.1.1) on verl's ``separate_async`` trainer.

verl 0.9.1's ``CheckpointEngineManager.update_weights`` aborts every standalone replica, updates
them all and resumes: one policy version at a time. :class:`DoraCheckpointEngineManager` updates
the replicas that :func:`dora.replicas_to_update` picks and leaves the others generating:

1. the group leaves verl's load balancer (new requests go to the others);
2. only its in-flight requests are aborted: verl's ``FullyAsyncLLMServerClient`` continues each with
   its tokens so far on a replica still in the balancer — another version. Each token keeps the
   log-probability of the engine that sampled it (verl concatenates the segments' ``log_probs``),
   so the truncated-IS ratio ``exp(old_logp - rollout_logp)`` is per token against the token's own
   version; the trajectory's ``min/max_global_steps`` record the versions it spans;
3. the group's KV cache is released, the weights sent over the checkpoint engine (nccl on GPUs,
   the cpu_platform plugin's gloo here) to the group alone, the cache restored; the others' caches
   (and prefix caches) are untouched;
4. the group resumes and rejoins the balancer.

Steps 2–4 are verl's own ``update_weights`` run with the manager's replicas narrowed to the group.

Every update is appended to ``<run folder>/dora/timeline.jsonl`` (wall time, replica, version) for
the timeline plot (``dora_timeline.plot_timeline``).
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from reasonrl.plugins.rollout.dora import TIMELINE, replicas_to_update, versions_generating

__all__ = ["PREFIX", "TIMELINE", "build_manager"]
#: metric prefix of every DORA metric
PREFIX = "reasonrl/rollout/dora_"


def _manager_base() -> type:
    from reasonrl.plugins.rollout.compat import DORA_CHECKPOINT_MANAGER

    DORA_CHECKPOINT_MANAGER.require()  # version-guarded: the subclass reaches into verl's manager
    from verl.checkpoint_engine import CheckpointEngineManager

    return CheckpointEngineManager


def build_manager(trainer: Any, group_size: int, staleness: int, timeline_path: str | None):
    """A :class:`DoraCheckpointEngineManager` in place of ``trainer.standalone_checkpoint_manager``
    (verl's separate_async trainer builds its own in ``_setup``; this one takes its replicas)."""
    from verl.utils.ray_utils import auto_await

    verl_manager = trainer.standalone_checkpoint_manager
    load_balancer = trainer.standalone_server_manager.global_load_balancer
    base = _manager_base()
    verl_update_weights = base.update_weights.__wrapped__  # the coroutine under verl's @auto_await

    # defined here, not at module level: its base is verl's, imported (version-guarded) only when a run
    # turns DORA on
    class DoraCheckpointEngineManager(base):
        """verl's manager, updating a group of replicas at a time (see the module docstring)."""

        def __init__(self) -> None:
            super().__init__(config=verl_manager.config, actor_wg=verl_manager.actor_wg, replicas=verl_manager.replicas)
            self.group_size, self.staleness = group_size, staleness
            self.versions: list[int | None] = [None] * len(self.replicas)
            self.timeline_path = timeline_path

        def record(self, indices: list[int], version: int, launch: bool = False) -> None:
            """Append the replicas' new version (``launch``: a launch's first weights, start or resume)."""
            if self.timeline_path is None:
                return
            os.makedirs(os.path.dirname(self.timeline_path), exist_ok=True)
            now = time.time()
            with open(self.timeline_path, "a") as out:
                for i in indices:
                    record = {"t": now, "replica": i, "version": version, **({"launch": True} if launch else {})}
                    out.write(json.dumps(record) + "\n")

        @auto_await
        async def update_weights(self, global_steps: int = None):
            started = time.perf_counter()
            everyone = self.replicas
            chosen = replicas_to_update(self.versions, global_steps, self.group_size, self.staleness)
            group = [everyone[i] for i in chosen]
            partial_update = len(group) < len(everyone)
            if partial_update:  # the others keep serving; the group's aborted requests continue there
                await load_balancer.remove_servers.remote([replica.server_address for replica in group])
            # verl's own sync (abort, release KV, build the group, send, finalize, resume) on the group alone
            self.replicas = group
            try:
                metrics = dict(await verl_update_weights(self, global_steps) or {})
            finally:
                self.replicas = everyone
            if partial_update:
                await load_balancer.add_servers.remote({r.server_address: r.server_handle for r in group})
            for i in chosen:
                self.versions[i] = global_steps
            self.record(chosen, global_steps)
            metrics.update(self.metrics())
            metrics[PREFIX + "updated_replicas"] = len(chosen)
            metrics[PREFIX + "update_s"] = time.perf_counter() - started
            return metrics

        def metrics(self) -> dict[str, float]:
            known = [v for v in self.versions if v is not None]
            out = {PREFIX + "versions_generating": versions_generating(self.versions)}
            if known:
                out[PREFIX + "oldest_replica_version"] = min(known)
            out.update({f"{PREFIX}replica_version/{i}": v for i, v in enumerate(self.versions) if v is not None})
            return out

    manager = DoraCheckpointEngineManager()
    return manager
