"""Two Ray nodes: ``reasonrl train`` joins a running cluster of two nodes and places verl's workers
on both (``trainer.nnodes=2``), loses a worker on the second node mid-run, stops saying so, and the
same command resumes from the last checkpoint.

The nodes are Ray's own multi-node-on-one-machine facility (``ray.cluster_utils.Cluster``: one
raylet per node, each with one logical GPU), as ``ray start --head`` / ``ray start --address`` on
two machines would give. One launch killed after its first checkpoint, one resumed: ~4 minutes.
"""

from __future__ import annotations

import os
import signal
import subprocess

import pytest

from reasonrl.testing.cpu_runs import (
    assert_state_restored,
    assert_steps_trained,
    launch_metrics,
    run_to_end,
    tagged_env,
    tail,
    train_args,
    wait_for_checkpoint,
)

# opt-in (CI's time: 634 s in a clean-clone run on a slow machine); the launches' other parts run in CI on
# one node (integration_tests/test_cpu_main_job.py), worker failures' messages in tests/test_failures.py
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(1500)]

TOTAL = 4


@pytest.fixture(scope="module")
def two_nodes():
    from ray.cluster_utils import Cluster

    # Logical CPUs: verl's bundle per GPU asks for 3, and the controller actors need a few.
    cluster = Cluster(
        initialize_head=True,
        connect=False,
        head_node_args={"num_cpus": 8, "num_gpus": 1, "include_dashboard": False},
    )
    # Ray's test cluster records itself as this machine's current cluster, which a plain ray.init()
    # (other tests, running beside this one) would then join: forget it, launches here name the address.
    from ray._common.utils import reset_ray_address

    reset_ray_address()
    second = cluster.add_node(num_cpus=8, num_gpus=1)
    cluster.wait_for_nodes()
    yield cluster, second
    cluster.shutdown()


def worker_processes_of(raylet_pid: int, name: str) -> list[int]:
    """Live processes started by the raylet ``raylet_pid`` whose title names ``name`` (``ray::WorkerDict``)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            parent = int(open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()[1])
            title = open(f"/proc/{entry}/cmdline").read()
        except (OSError, IndexError, ValueError):
            continue
        if parent == raylet_pid and f"ray::{name}" in title:
            found.append(int(entry))
    return found


def pool_placements(address: str) -> dict[str, list[str]]:
    """verl's resource-pool placement groups (one per node of ``trainer.nnodes``) and their nodes."""
    import ray

    ray.init(address=address, logging_level="ERROR", log_to_driver=False)
    try:
        table = ray.util.placement_group_table()
    finally:
        ray.shutdown()
    return {
        pg_id: sorted(set(entry["bundles_to_node_id"].values()))
        for pg_id, entry in table.items()
        if "global_pool" in (entry.get("name") or "")
    }


def test_two_nodes_lose_a_worker_then_resume(two_nodes, tmp_path, run_tag):
    cluster, second = two_nodes
    run_dir = tmp_path / "run"
    args = train_args(
        "longcat",
        run_dir,
        f"trainer.total_training_steps={TOTAL}",
        "trainer.val_before_train=false",
        "trainer.test_freq=-1",
        # one logical GPU per node, a worker group across both
        "trainer.nnodes=2",
        "trainer.n_gpus_per_node=1",
        # join the running cluster (Ray refuses resource counts for a cluster it did not start)
        f"+ray_kwargs.ray_init.address={cluster.address}",
        "ray_kwargs.ray_init.num_cpus=null",
        "ray_kwargs.ray_init.num_gpus=null",
        # two data-parallel ranks: 16 of each update's 32 responses per rank
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=16",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=16",
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=16",
    )
    first_log = tmp_path / "first.log"
    with first_log.open("w") as out:
        process = subprocess.Popen(
            args, stdout=out, stderr=subprocess.STDOUT, env=tagged_env(run_tag), start_new_session=True
        )
        try:
            wait_for_checkpoint(run_dir, process, first_log)
            raylet = second.all_processes["raylet"][0].process.pid
            victims = worker_processes_of(raylet, "WorkerDict")
            assert len(victims) == 1, f"one trainer worker on the second node, found {victims}"
            os.kill(victims[0], signal.SIGKILL)
            process.wait(timeout=300)
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
    text = first_log.read_text(errors="replace")
    assert process.returncode != 0, "a run that lost a worker must not report success"
    assert f"cause             a Ray worker died: WorkerDict (pid {victims[0]}" in text, tail(first_log)
    assert "Run the same command to resume from the last checkpoint" in text
    saved = int((run_dir / "latest_checkpointed_iteration.txt").read_text())
    assert 1 <= saved < TOTAL
    first_placements = pool_placements(cluster.address)
    # verl's two per-node pools landed on the two nodes
    assert len(first_placements) == 2 and {n for nodes in first_placements.values() for n in nodes} == {
        node["NodeID"] for node in _nodes(cluster.address)
    }, first_placements

    resume_log = tmp_path / "resume.log"
    result = run_to_end(args, run_tag, resume_log)
    assert result.returncode == 0, tail(resume_log)
    resumed = launch_metrics(run_dir)[-1]
    # every step after the checkpoint trained, vLLM generating with the synced weights on both nodes
    assert_steps_trained(resumed, range(saved + 1, TOTAL + 1), resume_log)
    assert_state_restored("sampling", run_dir, saved, resume_log)  # the sampler's state, byte for byte
    again = {pg: nodes for pg, nodes in pool_placements(cluster.address).items() if pg not in first_placements}
    assert len(again) == 2 and len({n for nodes in again.values() for n in nodes}) == 2, again


def _nodes(address: str) -> list[dict]:
    import ray

    ray.init(address=address, logging_level="ERROR", log_to_driver=False)
    try:
        return [node for node in ray.nodes() if node["Alive"]]
    finally:
        ray.shutdown()
