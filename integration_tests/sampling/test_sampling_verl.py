"""The sampling plugin through verl 0.9.1's own trainer and replay-buffer code, on CPU, with a
fake rollout: ``ReasonrlSyncTrainer`` (trainer mode ``reasonrl_sync``) built from the mimo
recipe (``reasonrl/sampling=mimo``: easy pool + dynamic sampling) on the smoke data, a real local Ray + TransferQueue, and
verl's sync ``ReplayBuffer.sample`` with DAPO filtering (``algorithm.filter_groups``) running
through reasonrl's ``ReportingReplayBuffer``. Only the generation is fake: an agent loop that
writes each prompt's responses and scores into TransferQueue as verl's agent loop does.
What is stood in: the actor's weight sync and checkpoint save/load (no model is built here).
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

pytestmark = pytest.mark.integration

N = 4  # responses per prompt (the cpu_tiny preset)
BATCH = 4


def outcome(row: int) -> list[float]:
    """Rows ≡ 0 mod 3 are solved, ≡ 1 never solved (no-signal groups), the rest mixed."""
    return [[1.0] * N, [0.0] * N, [1.0, 0.0] * (N // 2)][row % 3]


class FakeRollout:
    """verl's TQ agent loop, minus the model: per prompt, N finished trajectories with
    ``rm_scores`` and ``extra_fields.reward_extra_info.acc``, then the prompt's ``finished`` tag."""

    def __init__(self, trainer):
        self.trainer, self.rows_seen, self.row_of = trainer, [], {}

    def generate_sequences(self, batch) -> None:
        for uid in list(batch["uid"]):
            row = self.trainer.prompt_rows[uid]
            self.rows_seen.append(row)
            self.row_of[uid] = row
            self.finish(uid, outcome(row))

    def finish(self, uid: str, scores: list[float]) -> None:
        """The group's trajectories (3 response tokens each) and its ``finished`` tag, in TransferQueue."""
        import transfer_queue as tq
        from verl.utils.tensordict_utils import list_of_dict_to_tensordict

        keys, fields, tags = [], [], []
        for session, score in enumerate(scores):
            rm_scores = torch.zeros(3)
            rm_scores[-1] = score
            keys.append(f"{uid}_{session}_0")
            fields.append(
                {
                    "rm_scores": rm_scores,
                    "responses": torch.ones(3, dtype=torch.int64),
                    "extra_fields": {"reward_extra_info": {"acc": score}},
                }
            )
            tags.append({"status": "success", "global_steps": self.trainer.global_steps, "response_len": 3})
        tq.kv_batch_put(keys=keys, partition_id="train", fields=list_of_dict_to_tensordict(fields), tags=tags)
        tq.kv_put(key=uid, partition_id="train", tag={"status": "finished"})


@pytest.fixture(scope="module")
def transfer_queue():
    import ray
    import transfer_queue as tq
    from omegaconf import OmegaConf

    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False)
    tq.init(OmegaConf.create({"backend": {"SimpleStorage": {"num_data_storage_units": 1}}}))
    yield tq
    tq.close()
    ray.shutdown()


def _trainer(run_dir, *overrides):
    import verl  # noqa: F401  (reasonrl's bridge registers trainer mode reasonrl_sync)
    from verl.trainer.ppo.v1.trainer_base import get_trainer_cls

    from reasonrl.cli.train import compose_config
    from reasonrl.smoke.prepare import ensure

    ensure()
    config = compose_config(
        [
            "recipe=mimo",
            "+preset=cpu_tiny",
            f"data.train_batch_size={BATCH}",
            f"trainer.default_local_dir={run_dir}",
            *overrides,
        ]
    )
    trainer = get_trainer_cls(config.trainer.v1.trainer_mode)(config)
    trainer._init_tokenizer()
    trainer._init_dataloader()
    # no model here: the weight sync and the actor's checkpoint files are stood in
    trainer.checkpoint_manager = SimpleNamespace(update_weights=lambda *a, **k: None, sleep_replicas=lambda: None)
    trainer.actor_rollout_wg = SimpleNamespace(
        save_checkpoint=lambda *a, **k: None, load_checkpoint=lambda *a, **k: None
    )
    trainer.agent_loop_manager = FakeRollout(trainer)
    return trainer


def test_sampler_drives_verls_dapo_replay_buffer_and_survives_a_checkpoint(transfer_queue, tmp_path):
    from reasonrl.bridges.verl_replay_buffer import ReportingReplayBuffer
    from reasonrl.bridges.verl_trainer import callback_state_path
    from reasonrl.state_io import digest, load_state

    trainer = _trainer(tmp_path / "run")
    assert isinstance(trainer.replay_buffer, ReportingReplayBuffer)
    assert trainer.replay_buffer.filter_groups_metric == "acc", "DAPO settings reached the custom buffer"
    trainer._load_checkpoint()
    trainer.on_init_end()
    sampler = dict(trainer.reasonrl_callbacks)["sampling"].sampler
    assert len(sampler.ids) == len(trainer.train_dataset)

    for step in (1, 2, 3):
        trainer.global_steps = step
        trainer.prepare_step()  # verl: submit one batch of prompts (from the sampler)
        batch, _ = trainer.replay_buffer.sample(global_steps=step, partition_id="train", batch_size=BATCH)
        metrics: dict = {}
        dict(trainer.reasonrl_callbacks)["sampling"].before_advantage(trainer, batch, metrics)
        uids = {key.split("_")[0] for key in batch.keys}
        assert len(uids) == BATCH and len(batch.keys) == BATCH * N, "verl's batch stays full"
        trained = [trainer.agent_loop_manager.row_of[uid] for uid in uids]
        assert len(trained) == BATCH and all(row % 3 == 2 for row in trained), "only mixed groups are trained"
        transfer_queue.kv_clear(keys=batch.keys, partition_id="train")
        # the sampler saw every group: solved → easy pool, never-solved → back in the pool
        assert metrics["reasonrl/sampling/filtered_group_frac"] > 0
        assert 0 <= metrics["reasonrl/sampling/easy_drawn_frac"] <= 1
        assert "reasonrl/sampling/pool_active" in metrics and "reasonrl/sampling/easy_pool_size" in metrics
    seen = trainer.agent_loop_manager.rows_seen
    solved_seen = {r for r in seen if r % 3 == 0}
    assert set(sampler.easy.members().tolist()) == solved_seen, "every solved prompt drawn is in the easy pool"
    unsolved_seen = [r for r in seen if r % 3 == 1]
    assert unsolved_seen and all(sampler.requeues[r] >= 1 for r in set(unsolved_seen)), (
        "filtered prompts went back to the pool"
    )
    assert not trainer.prompt_rows, "every dispatched prompt was reported back"

    # verl's checkpoint save writes the sampler's state; a new trainer resumes it exactly
    trainer.global_steps = 3
    trainer._save_checkpoint()
    path = callback_state_path(str(tmp_path / "run" / "global_step_3"), "sampling")
    saved = load_state(path)
    assert digest(saved) == digest(sampler.state_dict())
    resumed = _trainer(tmp_path / "run")
    resumed._load_checkpoint()
    assert resumed.global_steps == 3 and resumed.resumed_from.endswith("global_step_3")
    resumed.on_init_end()
    restored = dict(resumed.reasonrl_callbacks)["sampling"].sampler
    assert digest(restored.state_dict()) == digest(saved)
    assert restored.sample(8) == sampler.sample(8), "the restored RNG continues the same draws"


def test_start_up_checks_name_the_key():
    from reasonrl.api import validate_config
    from reasonrl.cli.train import compose_config
    from reasonrl.config import ConfigError

    cases = {
        "reasonrl.sampling.alpha": ["reasonrl.sampling.alpha=1.5"],
        "reasonrl.sampling.samplers": ["reasonrl.sampling.samplers=[dynamic,easy_pool]"],
        "algorithm.filter_groups.enable": ["algorithm.filter_groups.enable=false"],
        "trainer.v1.trainer_mode": ["reasonrl/sampling=kimi", "trainer.v1.trainer_mode=sync"],
    }
    for key, overrides in cases.items():
        with pytest.raises(ConfigError) as error:
            validate_config(compose_config(["recipe=mimo", *overrides]))
        assert error.value.key == key, str(error.value)
    for option in ("mimo", "longcat", "kimi", "nemotron"):
        validate_config(compose_config(["recipe=mimo", f"reasonrl/sampling={option}"]))


class TimedRollout(FakeRollout):
    """A fake engine on a simulated clock (one tick per replay-buffer poll): the group launched
    ``i``-th finishes ``DELAYS[i % len(DELAYS)]`` ticks after its launch; ``abort`` returns every
    unfinished one at once with a truncated (one-token, unrewarded) response, as verl's abort path
    does; ``resume`` counts resumes."""

    DELAYS = [1, 6, 2, 1, 3, 1, 9, 2, 1, 4, 1, 12]

    def __init__(self, trainer):
        super().__init__(trainer)
        self.now, self.launches, self.due, self.finished_at, self.resumes = 0, [], {}, {}, 0
        self.aborted: set[str] = set()

    def generate_sequences(self, batch) -> None:
        import transfer_queue as tq

        for uid in list(batch["uid"]):
            self.row_of[uid] = self.trainer.prompt_rows[uid]
            self.due[uid] = self.now + self.DELAYS[len(self.launches) % len(self.DELAYS)]
            self.launches.append(uid)
            tq.kv_put(key=uid, partition_id="train", tag={"status": "running"})

    def finish(self, uid: str, scores: list[float]) -> None:
        super().finish(uid, scores)
        self.finished_at[uid] = self.now

    def tick(self) -> None:
        self.now += 1
        for uid, due in list(self.due.items()):
            if due <= self.now:
                del self.due[uid]
                self.finish(uid, outcome(self.row_of[uid]))

    def abort(self) -> None:
        for uid in list(self.due):
            del self.due[uid]
            self.aborted.add(uid)
            self.finish(uid, [0.0] * N)

    def resume(self) -> None:
        self.resumes += 1


def _timed_trainer(tmp_path, *overrides):
    """A trainer on the simulated clock (its buffer polls tick the engine; aborts and resumes
    reach it), started as verl starts it; every finished group the buffer reports is recorded."""
    trainer = _trainer(tmp_path / "run", *overrides)
    engine = TimedRollout(trainer)
    trainer.agent_loop_manager = engine
    trainer.checkpoint_manager.abort_replicas = lambda reject_request=False: engine.abort()
    trainer.checkpoint_manager.resume_generation_replicas = engine.resume
    trainer._load_checkpoint()
    trainer.on_init_end()
    trainer.replay_buffer._poll_wait = engine.tick
    reported, listener = [], trainer.replay_buffer.group_listener
    trainer.replay_buffer.group_listener = lambda groups: (reported.extend(groups), listener(groups))
    return trainer, engine, reported


def test_seamless_rollout_stops_each_step_by_fifo_early_termination(transfer_queue, tmp_path):
    """MiMo §3.4.1 through verl's own replay buffer and trainer (issue 22): prompts launched on
    demand, the step stopped as soon as the groups launched up to some j have all finished and hold
    the batch's valid ones — the first BATCH valid groups in launch order are trained, everything
    still in flight is aborted (reported aborted, never scored by the sampler), generation resumed;
    the schedule's statistics survive a checkpoint."""
    from reasonrl.api import fifo_early_termination
    from reasonrl.bridges.verl_trainer import callback_state_path
    from reasonrl.state_io import load_state

    trainer, engine, reported = _timed_trainer(tmp_path, "+reasonrl/rollout=seamless")
    buffer, callbacks = trainer.replay_buffer, dict(trainer.reasonrl_callbacks)
    sampler = callbacks["sampling"].sampler
    scored = []
    update = sampler.update
    sampler.update = lambda results, trained=None: (scored.extend(results), update(results, trained=trained))

    aborted_total = 0
    for step in (1, 2, 3):
        trainer.global_steps = step
        first = len(engine.launches)
        trainer.prepare_step()
        batch, metrics = buffer.sample(global_steps=step, partition_id="train", batch_size=BATCH)
        callbacks["rollout"].before_advantage(trainer, batch, metrics)
        launched = engine.launches[first:]
        valid = [outcome(engine.row_of[uid]) == [1.0, 0.0] * (N // 2) and uid not in engine.aborted for uid in launched]
        finish = [engine.finished_at[uid] if uid not in engine.aborted else None for uid in launched]
        expected, stop = fifo_early_termination(finish, valid, BATCH)
        trained = sorted({key.split("_")[0] for key in batch.keys})
        assert trained == sorted(launched[i] for i in expected), f"step {step}: FIFO selection"
        assert stop is not None and all(t is not None for t in finish[: expected[-1] + 1])
        aborted = [uid for uid in launched if uid in engine.aborted]
        assert metrics["training/stream/aborted_groups"] == len(aborted)
        assert metrics["reasonrl/rollout/seamless_aborted_groups"] == len(aborted)
        assert metrics["training/stream/launched_prompts"] == len(launched) - BATCH, "refills counted"
        generated = 3 * N * len(launched)  # 3 tokens per response, aborted ones included
        assert metrics["training/stream/trained_tokens"] == 3 * N * BATCH
        assert sum(metrics[f"training/stream/{f}_tokens"] for f in ("trained", "untrained", "aborted")) == generated
        assert metrics["reasonrl/rollout/seamless_sample_waste"] == pytest.approx(1 - BATCH / len(launched))
        assert 0.0 <= metrics["reasonrl/rollout/seamless_idle_ratio"] <= 1.0
        aborted_total += len(aborted)
        transfer_queue.kv_clear(keys=batch.keys, partition_id="train")
        buffer._sync_metadata_from_transfer_queue()
        assert not buffer.partitions["train"] and not buffer.running_keys["train"], "nothing left over in TQ"
    assert aborted_total > 0 and engine.resumes > 0, "the schedule cut slow groups off"
    assert not trainer.prompt_rows and not trainer.launch_order, "every launched prompt was reported back"
    by_uid = {group.uid: group for group in reported}
    assert set(by_uid) == set(engine.launches), "every group reported once"
    assert all(by_uid[uid].aborted and not by_uid[uid].trained for uid in engine.aborted)
    assert not any(group.aborted for uid, group in by_uid.items() if uid not in engine.aborted)
    assert len(scored) == len(engine.launches) - len(engine.aborted), "the sampler scored every group but the aborted"

    trainer.global_steps = 3
    trainer._save_checkpoint()
    saved = load_state(callback_state_path(str(tmp_path / "run" / "global_step_3"), "rollout"))
    schedule = callbacks["rollout"]
    assert 0 < int(saved["valid_finished"]) == schedule.valid_finished <= int(saved["finished"]) == schedule.finished


def test_staleness_bounded_rollout_reuses_kept_groups_within_the_bound(transfer_queue, tmp_path):
    """LongCat §3.1.1 (DORA) through verl's own replay buffer and trainer (issue 22): the seamless
    schedule's surplus finished valid groups stay in the buffer, tagged with the step (policy
    version) that generated them; a later step trains up to reuse_ratio · batch of them first, never
    one more than `staleness` versions old (older ones are cleared, reported untrained), then the
    FIFO-selected fresh groups; the batch is shuffled; kept groups survive a checkpoint exactly
    (TransferQueue's own save/load, digest)."""
    import random

    from reasonrl.api import fifo_early_termination

    staleness, reuse = 1, 1  # reuse_ratio 0.25 of BATCH = 4: one kept group per step
    trainer, engine, reported = _timed_trainer(
        tmp_path, "+reasonrl/rollout=staleness", "reasonrl.rollout.reuse_ratio=0.25"
    )
    buffer, callbacks = trainer.replay_buffer, dict(trainer.reasonrl_callbacks)

    def is_valid(uid: str) -> bool:
        return outcome(engine.row_of[uid]) == [1.0, 0.0] * (N // 2) and uid not in engine.aborted

    launched_at: dict[str, int] = {}
    kept: list[str] = []  # in the order the buffer keeps them: launch step, then launch order
    reused_total, cleared_stale = 0, []
    for step in range(1, 6):
        trainer.global_steps = step
        stale = [uid for uid in kept if step - launched_at[uid] > staleness]
        kept = [uid for uid in kept if uid not in stale]
        reused, parked = kept[:reuse], kept[reuse:]
        first = len(engine.launches)
        trainer.prepare_step()
        batch, metrics = buffer.sample(global_steps=step, partition_id="train", batch_size=BATCH)
        callbacks["rollout"].before_advantage(trainer, batch, metrics)
        launched = engine.launches[first:]
        launched_at.update({uid: step for uid in launched})
        valid = [is_valid(uid) for uid in launched]
        finish = [engine.finished_at[uid] if uid not in engine.aborted else None for uid in launched]
        fresh, _stop = fifo_early_termination(finish, valid, BATCH - len(reused))
        expected = [*reused, *(launched[i] for i in fresh)]
        random.Random(step).shuffle(expected)
        order = list(dict.fromkeys(key.split("_")[0] for key in batch.keys))
        assert order == expected, f"step {step}: the kept groups first, then FIFO, shuffled"
        assert all(step - launched_at[uid] <= staleness for uid in order), "the staleness bound"
        assert metrics["reasonrl/rollout/staleness_trained_staleness_max"] == max(step - launched_at[u] for u in order)
        assert metrics["reasonrl/rollout/staleness_reused_groups"] == len(reused)
        assert metrics["reasonrl/rollout/staleness_stale_groups"] == len(stale)
        surplus = [uid for uid, ok in zip(launched, valid) if ok and uid not in expected]
        kept = parked + surplus
        assert metrics["reasonrl/rollout/staleness_kept_groups"] == len(kept)
        reused_total, cleared_stale = reused_total + len(reused), cleared_stale + stale
        transfer_queue.kv_clear(keys=batch.keys, partition_id="train")
        buffer._sync_metadata_from_transfer_queue()
        assert buffer.finished_keys["train"] == set(kept) and not buffer.running_keys["train"], "only kept ones left"
    assert reused_total > 0 and cleared_stale, "the run exercised both reuse and the bound"
    by_uid = {group.uid: group for group in reported}
    assert set(by_uid) | set(kept) == set(engine.launches) and not set(by_uid) & set(kept), "each reported once"
    assert all(not by_uid[uid].trained and by_uid[uid].outcome for uid in cleared_stale), "stale: untrained outcomes"

    trainer._save_checkpoint()  # step 5's kept groups: TransferQueue's checkpoint + their dataset rows
    saved_digest = buffer.kept_groups_digest()
    assert saved_digest[0] == len(kept) > 0
    transfer_queue.kv_clear(keys=[*kept, *buffer.partitions["train"]], partition_id="train")
    assert buffer.kept_groups_digest()[0] == 0
    rows = {uid: trainer.prompt_rows.pop(uid) for uid in kept}
    trainer.resumed_from = str(tmp_path / "run" / "global_step_5")
    trainer._restore_kept_groups()
    assert buffer.kept_groups_digest() == saved_digest and {u: trainer.prompt_rows[u] for u in kept} == rows
