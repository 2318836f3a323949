"""RL with trained MTP layers on verl's FSDP actor (``reasonrl.mtp.train=true``; MiMo §2.2's
auxiliary loss kept in RL — MiMo itself freezes the layers, the default).

verl 0.9.1 trains MTP layers in RL only on its megatron actor (megatron-core's MTP loss); its
FSDP actor ignores ``mtp.enable_train``. The missing piece, without a patch:

* :class:`MTPLossTerm` — the actor-loss term λ · (1/D) Σ_k L^k over the response tokens, each
  depth aggregated by verl's ``agg_loss`` in ``token-mean`` with the actor's global batch info
  (the normalisation verl gives its token-mean losses), offered by a reasonrl trainer callback
  (trainer mode ``reasonrl_sync``), which adds it to verl's own ``ppo_loss`` beside the other
  plugins' terms (the ε_pos_high schedule, ...) in one composed loss
  (``reasonrl/bridges/verl_actor_loss.py``);
* the per-token MTP losses come in ``model_output``: engine model type ``mtp_language_model``
  (``verl_engine.py``, set by ``+reasonrl/mtp=mimo``) asks the model for them in forwards with
  gradients — the actor's update, not its log-prob or the reference passes.

Depth k's loss for response token t_j comes from position j-k-1 (the prompt supplies the first
positions); per-depth losses are logged as ``actor/mtp_{k}_loss``. λ is ``reasonrl.mtp.loss_weight``
for the whole run (as on verl's megatron actor). After each update verl's weight sync pushes the
trained MTP layers into vLLM's drafter (``vllm_drafter.load_weights``).
"""

from __future__ import annotations

from typing import Any

import torch

from reasonrl.callbacks import ActorLossTerm, StepCallback
from reasonrl.plugins.mtp.verl_engine import take_token_losses

METRIC = "actor/mtp_{depth}_loss"
ALL_LAYERS = 1 << 10  # the checkpoint's config is not local: train every MTP layer it has


class MTPLossTerm(ActorLossTerm):
    """Actor-loss term λ·mean_k L^k (L^k: token-mean over the global batch's response tokens)."""

    def __init__(self, weight: float, depths: int) -> None:
        self.weight, self.depths = weight, depths

    def loss(self, config, model_output, data, metrics):
        from verl.trainer.ppo.core_algos import agg_loss
        from verl.utils.metric import Metric
        from verl.workers.utils.padding import no_padding_2_padding

        response_mask = data.select("response_mask").to_padded_tensor()["response_mask"].bool()
        aggregation = metrics["actor/pg_loss"].aggregation
        terms, logged = [], {}
        for depth, (per_token, valid) in enumerate(take_token_losses(model_output)[: self.depths], start=1):
            # slot i of verl's flat layout scores token i+1 (as log-probs do): depth k's loss for
            # t_{i+1} sits at position i-k
            loss_mat = no_padding_2_padding(torch.roll(per_token, shifts=depth), data)
            counted = no_padding_2_padding(torch.roll(valid, shifts=depth), data).bool() & response_mask
            term = agg_loss(
                loss_mat=loss_mat, loss_mask=counted, loss_agg_mode="token-mean", **config.global_batch_info
            )
            terms.append(term)
            logged[METRIC.format(depth=depth)] = Metric(value=term.detach(), aggregation=aggregation)
        return self.weight * torch.stack(terms).mean(), logged


class MTPTrainingCallback(StepCallback):
    """Offers :class:`MTPLossTerm` to the run's composed actor loss."""

    def __init__(self, weight: float, depths: int) -> None:
        self.weight, self.depths = weight, depths

    def actor_loss_term(self) -> MTPLossTerm:
        return MTPLossTerm(self.weight, self.depths)


def build(config: Any) -> MTPTrainingCallback | None:
    """The callback for runs that train the MTP layers on an FSDP actor."""
    from omegaconf import OmegaConf

    from reasonrl.plugins.mtp.config import checkpoint_mtp_layers, settings_from

    settings = settings_from(config)
    if (
        not (settings.enable and settings.train)
        or OmegaConf.select(config, "actor_rollout_ref.actor.strategy") == "megatron"
    ):
        return None
    depths = checkpoint_mtp_layers(OmegaConf.select(config, "actor_rollout_ref.model.path"))
    return MTPTrainingCallback(settings.loss_weight, depths or ALL_LAYERS)
