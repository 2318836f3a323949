"""The trainer class behind verl trainer mode ``reasonrl_sync`` (see ``verl_trainer.py``).

Imported only where verl's trainers are imported (verl's TaskRunner), never at ``import verl``.
"""

from __future__ import annotations

from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync

from reasonrl.bridges.verl_trainer import build_callbacks


class ReasonrlSyncTrainer(PPOTrainerSync):
    """verl's ``PPOTrainerSync`` with reasonrl's per-step plugin callbacks."""

    def _build_replay_buffer(self):
        self.trainer_mode = "sync"  # called from __init__, before anything reads the mode
        return super()._build_replay_buffer()

    def on_init_end(self):
        super().on_init_end()
        self.reasonrl_callbacks = build_callbacks(self.config)
        for _name, callback in self.reasonrl_callbacks:
            if hasattr(callback, "on_init_end"):
                callback.on_init_end(self)

    def _compute_advantage(self, batch, metrics: dict):
        for _name, callback in self.reasonrl_callbacks:
            if hasattr(callback, "before_advantage"):
                callback.before_advantage(self, batch, metrics)
        return super()._compute_advantage(batch, metrics)

    def _update_actor(self, batch, metrics: dict):
        for _name, callback in self.reasonrl_callbacks:
            if hasattr(callback, "before_actor_update"):
                callback.before_actor_update(self, batch.extra_info, metrics)
        return super()._update_actor(batch, metrics)
