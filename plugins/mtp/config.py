"""Knobs at ``reasonrl.mtp`` (MiMo §2.2–2.3 defaults), validated before any work, and the start-up
checks against the checkpoint. verl 0.9.1 already has MTP switches (``actor_rollout_ref.model.mtp``:
load/save, train with megatron-core's MTP loss, vLLM ``speculative_config``, drafter weight sync);
the Hydra option ``reasonrl/mtp=mimo`` points them at these knobs instead of duplicating them."""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path

from reasonrl.config import ConfigError, config_value, group_settings, knob, require_trainer_mode
from reasonrl.contracts import ConfigGroup

KEY = "reasonrl.mtp"
VERL_KEY = "actor_rollout_ref.model.mtp"


@dataclass
class MTPConfig:
    """``reasonrl.mtp``: multi-token prediction in training and in rollout."""

    enable: bool = knob(False, help="load and save the checkpoint's MTP layers (plugin on)")
    train: bool = knob(
        False,
        help="RL: train the MTP layers with the auxiliary loss (λ = loss_weight); MiMo freezes them in RL (false)",
    )
    drafting: bool = knob(False, help="speculative decoding with the MTP layers in verl's vLLM rollout")
    num_speculative_tokens: int = knob(1, help="draft tokens per step when drafting; layer k drafts token k", low=1)
    loss_weight: float = knob(0.3, help="λ of L_main + λ·mean_k L^k (MiMo pre-training: 0.3)", low=0.0)
    later_loss_weight: float = knob(0.1, help="λ after switch_at (MiMo: 0.1)", low=0.0)
    switch_at: int = knob(0, help="step at which λ becomes later_loss_weight (0: never)", low=0)

    def check(self) -> None:
        if self.drafting and not self.enable:
            raise ConfigError(f"{KEY}.drafting", "drafting needs the MTP layers: set reasonrl.mtp.enable=true")


MTP_GROUP = ConfigGroup(
    "mtp",
    MTPConfig,
    "multi-token prediction: MTP loss and λ schedule, frozen or trained MTP layers, multi-layer vLLM drafting",
)


def settings_from(config) -> MTPConfig:
    return group_settings(config, MTP_GROUP)


def checkpoint_mtp_layers(model_path: str | Path) -> int | None:
    """``num_nextn_predict_layers`` of a local Hugging Face checkpoint (None: no config.json here)."""
    path = Path(str(model_path)) / "config.json"
    if not path.is_file():
        return None
    config = json.loads(path.read_text())
    return int(config.get("num_nextn_predict_layers") or 0)


def check_run(config) -> None:
    """Start-up checks of a composed run config: the knobs, their mirror in verl's keys and the
    checkpoint's MTP layers against the drafting request."""
    settings = settings_from(config)
    select = functools.partial(config_value, config)
    if not settings.enable:
        return
    mirrored = {
        "enable": settings.enable,
        "enable_train": settings.train,
        "enable_rollout": settings.drafting,
        "num_speculative_tokens": settings.num_speculative_tokens,
    }
    for key, value in mirrored.items():
        if select(f"{VERL_KEY}.{key}") != value:
            raise ConfigError(
                f"{VERL_KEY}.{key}",
                f"is {select(f'{VERL_KEY}.{key}')!r} but reasonrl.mtp says {value!r}: switch MTP with +reasonrl/mtp=mimo and reasonrl.mtp.* only",
            )
    layers = checkpoint_mtp_layers(select("actor_rollout_ref.model.path"))
    k = settings.num_speculative_tokens if settings.drafting else 0
    if layers is not None and layers == 0:
        raise ConfigError(
            f"{KEY}.enable",
            f"the checkpoint {select('actor_rollout_ref.model.path')} has no MTP layers (num_nextn_predict_layers = 0)",
        )
    if layers is not None and k > layers:
        raise ConfigError(
            f"{KEY}.num_speculative_tokens",
            f"{k} draft tokens need {k} MTP layers (layer k drafts token k) but the checkpoint has {layers}: "
            f"use at most {layers}, or `reasonrl mtp replicate --layers {k}` first",
        )
    if settings.train and settings.switch_at:
        raise ConfigError(
            f"{KEY}.switch_at",
            "verl's megatron MTP loss keeps one λ (mtp_loss_scaling_factor = reasonrl.mtp.loss_weight) for the whole run: "
            "leave switch_at at 0 (the schedule applies to `reasonrl mtp` training)",
        )
    if settings.train and select("actor_rollout_ref.actor.strategy") != "megatron":
        # verl's FSDP actor ignores mtp.enable_train: our loss comes in through reasonrl's trainer mode
        require_trainer_mode(config, "training the MTP layers on an FSDP actor (else verl keeps them frozen)")
    if settings.train and select("actor_rollout_ref.actor.strategy") != "megatron":
        if select("actor_rollout_ref.model.model_type") != "mtp_language_model":
            raise ConfigError(
                "actor_rollout_ref.model.model_type",
                "training the MTP layers on an FSDP actor needs the engine that hands the model's MTP losses to the "
                "loss: mtp_language_model (set by +reasonrl/mtp=mimo)",
            )
        if (select("actor_rollout_ref.actor.ulysses_sequence_parallel_size") or 1) > 1:
            raise ConfigError(
                "actor_rollout_ref.actor.ulysses_sequence_parallel_size",
                "the FSDP MTP loss needs whole sequences on each rank: use 1",
            )
