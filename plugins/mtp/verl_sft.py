"""verl's SFT trainer with the MTP objective (MiMo §2.2: continued pre-training / SFT with MTP).

verl 0.9.1 trains MTP only on its megatron engine (megatron-core's MTP, keys
``model.mtp.enable_train`` / ``mtp_loss_scaling_factor``); its FSDP engine loads and saves the
MTP layers but computes no MTP loss, and its SFT loss sees log-probs only. This adapter adds the
missing piece on FSDP and nothing else: verl's own ``SFTTrainer`` and ``sft_loss``, plus

* the engine of model type ``mtp_language_model`` (``verl_engine.py``), whose training forwards
  hand the model's per-token MTP losses (``core.mtp_token_losses``) to the loss in ``model_output``;
* a loss function: verl's ``sft_loss`` + λ · (1/D) Σ_k L^k, with L^k averaged over the targets
  t_{i+k+1} that count in verl's ``loss_mask`` across the whole global batch (the same
  normalisation verl gives the main loss), λ from the schedule at the current step; per-depth
  losses logged as ``mtp_losses/mtp_{k}_loss`` (verl's megatron names).

Run (torchrun, as verl's ``verl.trainer.sft_trainer``; the same Hydra config and overrides)::

    torchrun --nproc_per_node N -m reasonrl.plugins.mtp.verl_sft model.path=MIMO_CKPT \\
        data.train_files=... +reasonrl.mtp.loss_weight=0.3 +reasonrl.mtp.later_loss_weight=0.1 \\
        +reasonrl.mtp.switch_at=1000

It writes verl's ``model.mtp.{enable, enable_train, mtp_loss_scaling_factor}`` from the knobs; on
the megatron engine (``engine=megatron``) verl's own trainer runs unchanged (one λ).
"""

from __future__ import annotations

import torch

from reasonrl.config import ConfigError
from reasonrl.plugins.mtp.config import KEY, checkpoint_mtp_layers, settings_from
from reasonrl.plugins.mtp.core import WeightSchedule
from reasonrl.plugins.mtp.verl_engine import MODEL_TYPE, register_engines, take_token_losses, training_depths


def depth_token_counts(loss_mask, depths: int) -> torch.Tensor:
    """Per depth k = 1..D, the targets t_{i+k+1} that count: loss-mask tokens at index ≥ k+1 of
    their sequence (``loss_mask``: verl's nested [batch, j] tensor)."""
    return torch.stack(
        [sum(row[depth + 1 :].sum() for row in loss_mask.unbind()) for depth in range(1, depths + 1)]
    ).to(torch.float32)


class MTPSFTLoss:
    """verl's ``sft_loss`` + λ·mean_k L^k (λ = ``schedule.at(step)``). ``step`` counts finished
    steps; ``token_counts`` per depth, over the global batch (set before its micro-batches run)."""

    def __init__(self, schedule: WeightSchedule) -> None:
        self.schedule, self.step = schedule, 0
        self.token_counts: torch.Tensor | None = None

    def __call__(self, model_output, data, dp_group=None, config=None):
        from verl.workers.utils.losses import sft_loss

        main_loss, metrics = sft_loss(config, model_output, data, dp_group)
        if not torch.is_grad_enabled():  # validation: no-grad forwards compute no MTP losses (verl_engine)
            return main_loss, metrics
        flat_mask = data["loss_mask"].values().bool()
        weight = self.schedule.at(self.step)
        depth_terms = []
        for depth, (per_token, valid) in enumerate(take_token_losses(model_output), start=1):
            counted = valid & torch.roll(flat_mask, shifts=-(depth + 1))
            summed = (per_token * counted).sum()
            depth_terms.append(summed / self.token_counts[depth - 1] * data["dp_size"])
            metrics[f"mtp_losses/mtp_{depth}_loss"] = [(summed / counted.sum().clamp_min(1)).item()]
        metrics["mtp_losses/weight"] = [weight]
        return main_loss + weight * torch.stack(depth_terms).mean(), metrics


def sft_trainer_class():
    """verl's ``SFTTrainer`` with the MTP loss on its FSDP engine (imported lazily: adapter)."""
    from reasonrl.plugins.mtp.compat import sft_trainer_base

    SFTTrainer = sft_trainer_base()  # version-guarded: wraps verl internals (compat.verl.SFT_TRAINER)

    class MTPSFTTrainer(SFTTrainer):
        def _build_engine(self):
            from verl.workers.engine_workers import TrainingWorker, TrainingWorkerConfig

            # verl's SFTTrainer._build_engine with the MTP engine's model type (verl's is fixed)
            register_engines()
            settings = settings_from(self.config)
            self.mtp_loss = MTPSFTLoss(
                WeightSchedule(settings.loss_weight, settings.later_loss_weight, settings.switch_at)
            )
            config = TrainingWorkerConfig(
                model_type=MODEL_TYPE,
                model_config=self.model_config,
                engine_config=self.engine_config,
                optimizer_config=self.optimizer_config,
                checkpoint_config=self.checkpoint_config,
                profiler_config=self.profiler_config,
            )
            self.training_client = TrainingWorker(config=config)
            self.training_client.set_loss_fn(loss_fn=self.mtp_loss)
            engine = self.engine = self.training_client.engine
            depths = training_depths(self.model_config)
            if not depths:
                raise ConfigError(
                    "model.path",
                    f"the MTP loss needs a MiMo checkpoint with MTP layers; {self.model_config.path} has none "
                    "(`reasonrl mtp attach` converts a Qwen2 checkpoint)",
                )
            forward_backward_batch = engine.forward_backward_batch

            def with_mtp_counts(data, loss_function, forward_only=False):
                counts = depth_token_counts(data["loss_mask"], depths).to(data["loss_mask"].values().device)
                torch.distributed.all_reduce(
                    counts, op=torch.distributed.ReduceOp.SUM, group=engine.get_data_parallel_group()
                )
                self.mtp_loss.token_counts = counts.clamp_min(1)
                if not forward_only:  # one training call per step; a resumed run continues the schedule
                    self.mtp_loss.step = (getattr(self, "resume_global_step", 0) or 0) + self.mtp_steps_done
                    self.mtp_steps_done += 1
                return forward_backward_batch(data, loss_function, forward_only=forward_only)

            self.mtp_steps_done = 0
            engine.forward_backward_batch = with_mtp_counts

    return MTPSFTTrainer


def configure(config) -> bool:
    """Validate ``reasonrl.mtp`` and write verl's ``model.mtp.*`` from it. True: our FSDP loss is
    needed; False: verl's megatron engine computes the MTP loss itself."""
    from omegaconf import open_dict

    settings = settings_from(config)
    layers = checkpoint_mtp_layers(config.model.path)
    if layers == 0:
        raise ConfigError(
            "model.path",
            f"{config.model.path} has no MTP layers (num_nextn_predict_layers = 0): `reasonrl mtp attach` gives a Qwen2 checkpoint some",
        )
    megatron = config.engine.get("strategy") == "megatron"
    if megatron and settings.switch_at:
        raise ConfigError(
            f"{KEY}.switch_at",
            "verl's megatron MTP loss keeps one λ (mtp_loss_scaling_factor) for the whole run: leave switch_at at 0",
        )
    if not megatron and (config.engine.get("ulysses_sequence_parallel_size") or 1) > 1:
        raise ConfigError(
            "engine.ulysses_sequence_parallel_size", "the FSDP MTP loss needs whole sequences on each rank: use 1"
        )
    with open_dict(config):
        config.model.mtp.enable = True
        config.model.mtp.enable_train = True
        config.model.mtp.mtp_loss_scaling_factor = settings.loss_weight
    return not megatron


def run(config) -> None:
    from verl.trainer.sft_trainer import SFTTrainer
    from verl.utils.distributed import destroy_global_process_group, initialize_global_process_group

    trainer_class = sft_trainer_class() if configure(config) else SFTTrainer
    initialize_global_process_group()
    trainer = trainer_class(config=config)
    trainer.fit()
    destroy_global_process_group()


def main() -> None:
    import hydra
    from verl.utils.device import auto_set_device

    @hydra.main(config_path="pkg://verl.trainer.config", config_name="sft_trainer_engine", version_base=None)
    def _main(config):
        auto_set_device(config)
        run(config)

    _main()


if __name__ == "__main__":
    main()
