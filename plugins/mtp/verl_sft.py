"""verl's SFT trainer with the MTP objective (MiMo §2.2: continued pre-training / SFT with MTP).

verl 0.9.1 trains MTP only on its megatron engine (megatron-core's MTP, keys
``model.mtp.enable_train`` / ``mtp_loss_scaling_factor``); its FSDP engine loads and saves the
MTP layers but computes no MTP loss, and its SFT loss sees log-probs only. This adapter adds the
missing piece on FSDP and nothing else: verl's own ``SFTTrainer`` and ``sft_loss``, plus

* ``MiMoForCausalLM.mtp_loss_depths`` set on the engine's model, so its forward also returns
  the per-token MTP losses (``core.mtp_token_losses``, collected with ``take_mtp_token_losses``);
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
from reasonrl.plugins.mtp.core import MTPTokenLosses, WeightSchedule


def depth_token_counts(loss_mask, depths: int) -> torch.Tensor:
    """Per depth k = 1..D, the targets t_{i+k+1} that count: loss-mask tokens at index ≥ k+1 of
    their sequence (``loss_mask``: verl's nested [batch, j] tensor)."""
    return torch.stack(
        [sum(row[depth + 1 :].sum() for row in loss_mask.unbind()) for depth in range(1, depths + 1)]
    ).to(torch.float32)


def to_flat(per_token: torch.Tensor, lengths: list[int], packed: bool) -> torch.Tensor:
    """A [batch, T] tensor in the model's layout as verl's flat token order (nested ``values()``):
    packed rows are [1, total (+ pad)]; padded rows are right-padded [batch, max_len]."""
    if packed:
        return per_token[0, : sum(lengths)]
    return torch.cat([per_token[row, :length] for row, length in enumerate(lengths)])


def flat_token_losses(data) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Per depth, (loss, valid) of this process's last MTP forward in verl's flat token order
    (the micro-batch ``data`` tells the layout: verl's nested ``input_ids`` and ``use_remove_padding``)."""
    from verl.utils import tensordict_utils as tu

    from reasonrl.plugins.mtp.hf_model import take_mtp_token_losses

    tokens: MTPTokenLosses | None = take_mtp_token_losses()
    if tokens is None:
        raise RuntimeError(
            "MTP loss: the model's forward left no MTP losses (mtp_loss_depths unset, or not a MiMo model with MTP layers?)"
        )
    lengths = data["input_ids"].offsets().diff().tolist()
    packed = tu.get_non_tensor_data(data=data, key="use_remove_padding", default=True)
    return [
        (to_flat(loss, lengths, packed), to_flat(valid, lengths, packed))
        for loss, valid in zip(tokens.per_token, tokens.valid)
    ]


class MTPSFTLoss:
    """verl's ``sft_loss`` + λ·mean_k L^k (λ = ``schedule.at(step)``). ``step`` counts finished
    steps; ``token_counts`` per depth, over the global batch (set before its micro-batches run)."""

    def __init__(self, schedule: WeightSchedule) -> None:
        self.schedule, self.step = schedule, 0
        self.token_counts: torch.Tensor | None = None

    def __call__(self, model_output, data, dp_group=None, config=None):
        from verl.workers.utils.losses import sft_loss

        main_loss, metrics = sft_loss(config, model_output, data, dp_group)
        flat_mask = data["loss_mask"].values().bool()
        weight = self.schedule.at(self.step)
        depth_terms = []
        for depth, (per_token, valid) in enumerate(flat_token_losses(data), start=1):
            counted = valid & torch.roll(flat_mask, shifts=-(depth + 1))
            summed = (per_token * counted).sum()
            depth_terms.append(summed / self.token_counts[depth - 1] * data["dp_size"])
            metrics[f"mtp_losses/mtp_{depth}_loss"] = [(summed / counted.sum().clamp_min(1)).item()]
        metrics["mtp_losses/weight"] = [weight]
        return main_loss + weight * torch.stack(depth_terms).mean(), metrics


def unwrap(module):
    """The Hugging Face model inside verl's FSDP wrapper (FSDP2 shards in place; FSDP1 wraps)."""
    while not hasattr(module, "mtp_loss_depths") and hasattr(module, "module"):
        module = module.module
    return module


def sft_trainer_class():
    """verl's ``SFTTrainer`` with the MTP loss on its FSDP engine (imported lazily: adapter)."""
    from reasonrl.compat.verl import sft_trainer_base

    SFTTrainer = sft_trainer_base()  # version-guarded: wraps verl internals (compat.verl.SFT_TRAINER)

    class MTPSFTTrainer(SFTTrainer):
        def _build_engine(self):
            super()._build_engine()
            settings = settings_from(self.config)
            self.mtp_loss = MTPSFTLoss(
                WeightSchedule(settings.loss_weight, settings.later_loss_weight, settings.switch_at)
            )
            self.training_client.set_loss_fn(loss_fn=self.mtp_loss)
            engine, forward_backward_batch = self.engine, self.engine.forward_backward_batch
            self.mtp_model = None  # the engine builds its module later: looked up on first use

            def with_mtp_counts(data, loss_function, forward_only=False):
                model = self.mtp_model
                if model is None:
                    model = self.mtp_model = unwrap(engine.module)
                    if not hasattr(model, "mtp_loss_depths") or not model.config.num_nextn_predict_layers:
                        raise ConfigError(
                            "model.path",
                            f"the MTP loss needs a MiMo checkpoint with MTP layers; got {type(model).__name__} "
                            "(`reasonrl mtp attach` converts a Qwen2 checkpoint)",
                        )
                    model.mtp_loss_depths = model.config.num_nextn_predict_layers
                counts = depth_token_counts(data["loss_mask"], model.mtp_loss_depths).to(
                    data["loss_mask"].values().device
                )
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
