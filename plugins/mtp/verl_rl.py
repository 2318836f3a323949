"""RL with trained MTP layers on verl's FSDP actor (``reasonrl.mtp.train=true``; MiMo §2.2's
auxiliary loss kept in RL — MiMo itself freezes the layers, the default).

verl 0.9.1 trains MTP layers in RL only on its megatron actor (megatron-core's MTP loss); its
FSDP actor ignores ``mtp.enable_train``. The missing piece, without a patch:

* :class:`MTPPolicyLoss` — verl's own ``ppo_loss`` + λ · (1/D) Σ_k L^k over the response tokens,
  each depth aggregated by verl's ``agg_loss`` in ``token-mean`` with the actor's global batch
  info (the normalisation verl gives its token-mean losses); installed in the actor workers
  through their own ``set_loss_fn`` by a reasonrl trainer callback (trainer mode
  ``reasonrl_sync``), like the objectives plugin's schedule;
* arriving in a worker, it arms the process's MiMo models (``hf_model.arm_for_training``): their
  forwards with gradients — the actor's update, not its log-prob or the reference passes —
  return the per-token MTP losses.

Depth k's loss for response token t_j comes from position j-k-1 (the prompt supplies the first
positions); per-depth losses are logged as ``actor/mtp_{k}_loss``. λ is ``reasonrl.mtp.loss_weight``
for the whole run (as on verl's megatron actor). After each update verl's weight sync pushes the
trained MTP layers into vLLM's drafter (``vllm_drafter.load_weights``).
"""

from __future__ import annotations

from typing import Any

import torch

from reasonrl.plugins.mtp.verl_sft import flat_token_losses

METRIC = "actor/mtp_{depth}_loss"
ALL_LAYERS = 1 << 10  # the checkpoint's config is not local: train every MTP layer it has


class MTPPolicyLoss:
    """verl's ``ppo_loss`` + λ·mean_k L^k (L^k: token-mean over the global batch's response
    tokens). Holds the actor config (OmegaConf), converted in the worker on first use."""

    def __init__(self, actor_config: Any, weight: float, depths: int) -> None:
        self.actor_config, self.weight, self.depths = actor_config, weight, depths
        self._config = None

    def __getstate__(self):
        return {**self.__dict__, "_config": None}

    def __setstate__(self, state) -> None:
        """Unpickled in a worker (verl's ``set_loss_fn``): arm the MiMo models there."""
        from reasonrl.plugins.mtp.hf_model import arm_for_training

        self.__dict__.update(state)
        arm_for_training(self.depths)

    def __call__(self, model_output, data, dp_group=None):
        from omegaconf import DictConfig
        from verl.trainer.ppo.core_algos import agg_loss
        from verl.utils.config import omega_conf_to_dataclass
        from verl.utils.metric import Metric
        from verl.workers.utils.losses import ppo_loss
        from verl.workers.utils.padding import no_padding_2_padding

        if self._config is None:
            self._config = omega_conf_to_dataclass(self.actor_config) if isinstance(self.actor_config, DictConfig) else self.actor_config
        loss, metrics = ppo_loss(self._config, model_output, data, dp_group)
        response_mask = data.select("response_mask").to_padded_tensor()["response_mask"].bool()
        aggregation = metrics["actor/pg_loss"].aggregation
        terms = []
        for depth, (per_token, valid) in enumerate(flat_token_losses(data), start=1):
            # slot i of verl's flat layout scores token i+1 (as log-probs do): depth k's loss for
            # t_{i+1} sits at position i-k
            loss_mat = no_padding_2_padding(torch.roll(per_token, shifts=depth), data)
            counted = no_padding_2_padding(torch.roll(valid, shifts=depth), data).bool() & response_mask
            term = agg_loss(loss_mat=loss_mat, loss_mask=counted, loss_agg_mode="token-mean", **self._config.global_batch_info)
            terms.append(term)
            metrics[METRIC.format(depth=depth)] = Metric(value=term.detach(), aggregation=aggregation)
        return loss + self.weight * torch.stack(terms).mean(), metrics


class MTPTrainingCallback:
    """Installs :class:`MTPPolicyLoss` in the actor workers once they are up."""

    replaces_actor_loss = True

    def __init__(self, weight: float, depths: int) -> None:
        self.weight, self.depths = weight, depths

    def on_init_end(self, trainer) -> None:
        trainer.actor_rollout_wg.set_loss_fn(MTPPolicyLoss(trainer.config.actor_rollout_ref.actor, self.weight, self.depths))


def build(config: Any) -> MTPTrainingCallback | None:
    """The callback for runs that train the MTP layers on an FSDP actor."""
    from omegaconf import OmegaConf

    from reasonrl.plugins.mtp.config import checkpoint_mtp_layers, settings_from

    settings = settings_from(config)
    if not (settings.enable and settings.train) or OmegaConf.select(config, "actor_rollout_ref.actor.strategy") == "megatron":
        return None
    depths = checkpoint_mtp_layers(OmegaConf.select(config, "actor_rollout_ref.model.path"))
    return MTPTrainingCallback(settings.loss_weight, depths or ALL_LAYERS)
