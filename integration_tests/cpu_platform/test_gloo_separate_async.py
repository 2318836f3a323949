"""verl's ``separate_async`` trainer mode on the CPU with the gloo checkpoint engine (issue 45).

verl 0.9.1's disaggregated mode serves rollouts from standalone vLLM replicas on their own (logical)
GPUs and moves the trainer's weights there through a checkpoint engine — NCCL/NIXL/... on GPU
machines, the cpu_platform plugin's ``gloo`` here. One launch of the nemotron recipe (its sampler
left out: reasonrl's samplers run in reasonrl's trainer modes only), generation only on one
standalone replica (``hybrid_engine=false``: generation apart from training, with the core's patch
``verl-separate-async-standalone``), two steps: the replica receives the weights at start and after
every step, byte for byte what actor rank 0 sent (both print the byte count and byte sum), and the
steps train on samples at most one version old (verl's ``trajectory_staleness``). About two
minutes on two cores.
"""

from __future__ import annotations

import re

import pytest

from reasonrl.plotting import run_metrics
from reasonrl.testing.cpu_runs import run_to_end, tail, train_args, training_steps

# opt-in (`pytest --run-slow`): the DORA test (integration_tests/rollout/test_dora.py, in CI) runs verl's
# separate_async trainer over the same gloo engine with reasonrl's replica-by-replica manager; this one
# keeps verl's own all-replicas manager
pytestmark = [pytest.mark.integration, pytest.mark.slow]

SEPARATE_ASYNC = (
    "~reasonrl/sampling",
    "trainer.v1.trainer_mode=separate_async",
    "actor_rollout_ref.rollout.checkpoint_engine.backend=gloo",
    # the standalone rollout pool: one replica on a second logical GPU, the only one generating
    "actor_rollout_ref.hybrid_engine=false",
    "actor_rollout_ref.rollout.nnodes=1",
    "actor_rollout_ref.rollout.n_gpus_per_node=1",
    "ray_kwargs.ray_init.num_gpus=2",
    # verl: train_batch_size (16) = parameter_sync_step x ppo_mini_batch_size (8)
    "trainer.v1.separate_async.parameter_sync_step=2",
    "trainer.total_training_steps=2",
    "trainer.val_before_train=false",
    "trainer.test_freq=-1",
)

TRANSFER = re.compile(
    r"gloo checkpoint engine: (sent|received) weights of global step (\d+): (\d+) bytes, byte sum (\d+)"
)


def test_separate_async_trains_with_weights_sent_over_gloo(tmp_path, run_tag):
    run_dir, log = tmp_path / "run", tmp_path / "launch.log"
    result = run_to_end(train_args("nemotron", run_dir, *SEPARATE_ASYNC), run_tag, log)
    assert result.returncode == 0, tail(log)
    steps = training_steps(run_metrics(run_dir))
    assert sorted(steps) == [1, 2], f"steps {sorted(steps)}\n{tail(log)}"
    transfers: dict[str, dict[int, tuple[int, int]]] = {"sent": {}, "received": {}}
    for role, step, size, byte_sum in TRANSFER.findall(log.read_text(errors="replace")):
        transfers[role][int(step)] = (int(size), int(byte_sum))
    # at start (step 0) and after each trained step; every update arrived as sent
    assert sorted(transfers["received"]) == [0, 1, 2], transfers
    assert transfers["received"] == transfers["sent"], transfers
    assert len({byte_sum for _, byte_sum in transfers["sent"].values()}) == 3  # the weights changed
    for metrics in steps.values():
        assert metrics["training/off_policy/trajectory_staleness/max"] <= 1, metrics
    assert steps[2]["checkpoint_engine/gloo_updates"] > steps[1]["checkpoint_engine/gloo_updates"]
