"""Start-up checks of ``reasonrl.mtp`` on composed configs: each bad input names its key."""

from __future__ import annotations

import json

import pytest
from omegaconf import OmegaConf

from reasonrl.config import ConfigError
from reasonrl.plugins.mtp.config import check_run


def run_config(tmp_path, layers, **mtp):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "mimo", "num_nextn_predict_layers": layers}))
    settings = {"enable": True, "train": False, "drafting": True, "num_speculative_tokens": 1, **mtp}
    verl = {
        "enable": settings["enable"],
        "enable_train": settings["train"],
        "enable_rollout": settings["drafting"],
        "num_speculative_tokens": settings["num_speculative_tokens"],
    }
    return OmegaConf.create(
        {
            "reasonrl": {"mtp": settings},
            "actor_rollout_ref": {"model": {"path": str(tmp_path), "mtp": verl}, "actor": {"strategy": "fsdp2"}},
        }
    )


def test_a_consistent_config_passes(tmp_path):
    check_run(run_config(tmp_path, 3, num_speculative_tokens=3))
    check_run(run_config(tmp_path, 3, num_speculative_tokens=1))


@pytest.mark.parametrize(
    "layers, mtp, key",
    [
        (0, {}, "reasonrl.mtp.enable"),  # drafting requested, the checkpoint has no MTP layers
        (1, {"num_speculative_tokens": 3}, "reasonrl.mtp.num_speculative_tokens"),  # k > available layers
        (3, {"num_speculative_tokens": 0}, "reasonrl.mtp.num_speculative_tokens"),
        (3, {"loss_weight": -0.1}, "reasonrl.mtp.loss_weight"),  # λ < 0
        (3, {"later_loss_weight": -1.0}, "reasonrl.mtp.later_loss_weight"),
        (
            3,
            {"train": True},
            "trainer.v1.trainer_mode",
        ),  # trained on FSDP: our loss comes through reasonrl_sync, else verl keeps them frozen
        (3, {"train": True, "drafting": False}, "trainer.v1.trainer_mode"),
        (3, {"train": True, "switch_at": 100}, "reasonrl.mtp.switch_at"),  # verl keeps one λ per run
    ],
)
def test_bad_inputs_fail_naming_the_key(tmp_path, layers, mtp, key):
    with pytest.raises(ConfigError) as error:
        check_run(run_config(tmp_path, layers, **mtp))
    assert key in str(error.value)


def test_trained_mtp_layers_run_on_fsdp_through_reasonrls_trainer_mode_and_the_mtp_engine(tmp_path):
    config = run_config(tmp_path, 3, train=True)
    config.trainer = {"v1": {"trainer_mode": "reasonrl_sync"}}
    with pytest.raises(ConfigError, match="actor_rollout_ref.model.model_type"):  # verl's engine drops MTP losses
        check_run(config)
    config.actor_rollout_ref.model.model_type = "mtp_language_model"
    check_run(config)
    config.actor_rollout_ref.actor.ulysses_sequence_parallel_size = 2
    with pytest.raises(ConfigError, match="ulysses_sequence_parallel_size"):
        check_run(config)


def test_verl_keys_must_follow_the_knobs(tmp_path):
    config = run_config(tmp_path, 3)
    config.actor_rollout_ref.model.mtp.enable_rollout = False
    with pytest.raises(ConfigError, match="actor_rollout_ref.model.mtp.enable_rollout"):
        check_run(config)


def test_the_hydra_option_wires_verls_mtp_keys(tmp_path):
    from reasonrl.composition import compose_config

    config = compose_config(
        ["recipe=mimo", "+reasonrl/mtp=mimo", "reasonrl.mtp.num_speculative_tokens=3", "reasonrl.mtp.loss_weight=0.2"]
    )
    mtp = config.actor_rollout_ref.model.mtp
    assert (
        mtp.enable,
        mtp.enable_train,
        mtp.enable_rollout,
        mtp.method,
        mtp.num_speculative_tokens,
        mtp.mtp_loss_scaling_factor,
    ) == (True, False, True, "mtp", 3, 0.2)
    assert config.trainer.v1.trainer_mode == "reasonrl_sync"
    assert config.actor_rollout_ref.model.model_type == "mtp_language_model"


def test_training_mtp_on_megatron_needs_neither_fsdp_piece(tmp_path):
    """On verl's Megatron actor the MTP loss is megatron-core's (MiMo's function: megatron_mimo.py,
    measured in test_megatron_loss.py): no reasonrl trainer mode, no mtp_language_model engine. The
    same config on the FSDP actor is refused, naming what it lacks."""
    config = run_config(tmp_path, 3, train=True)
    config.actor_rollout_ref.model.model_type = "language_model"
    config.actor_rollout_ref.actor.strategy = "megatron"
    check_run(config)
    config.actor_rollout_ref.actor.strategy = "fsdp"
    with pytest.raises(ConfigError, match="trainer_mode.*training the MTP layers on an FSDP actor"):
        check_run(config)


def test_reasonrl_sft_runs_the_mtp_trainer_only_when_mtp_is_on():
    """``reasonrl sft`` asks the plugins for a trainer (hook reasonrl_sft_trainer): MTP's for
    ``reasonrl.mtp.enable``, none otherwise (verl's run_sft)."""
    from reasonrl.manager import get_plugin_manager
    from reasonrl.plugins.mtp import verl_sft

    hook = get_plugin_manager().hook.reasonrl_sft_trainer
    assert hook(config=OmegaConf.create({"reasonrl": {"mtp": {"enable": True}}})) is verl_sft.run
    assert hook(config=OmegaConf.create({"reasonrl": {}})) is None
    assert hook(config=OmegaConf.create({"reasonrl": {"mtp": {"enable": False}}})) is None
