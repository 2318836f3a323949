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
        import transfer_queue as tq
        from verl.utils.tensordict_utils import list_of_dict_to_tensordict

        for uid in list(batch["uid"]):
            row = self.trainer.prompt_rows[uid]
            self.rows_seen.append(row)
            self.row_of[uid] = row
            keys, fields, tags = [], [], []
            for session, score in enumerate(outcome(row)):
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
                tags.append({"status": "success", "global_steps": self.trainer.global_steps})
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
