"""mtp: multi-token prediction (MiMo §2.2, after DeepSeek-V3).

Framework-free module, loss and λ schedule (``core.py``); attachment to Hugging Face models and
MiMo's checkpoint class (``hf_model.py``: registered with transformers in verl's and vLLM's
processes); training, replication and acceptance (``training.py``, ``reasonrl mtp``); the vLLM
multi-layer drafter (``vllm_drafter.py``); knobs mapped onto verl's own MTP config
(``config.py``) and megatron-core's (``megatron_adapter.py``; MiMo's function on verl's Megatron
actor: ``megatron_mimo.py``, ``verl_megatron.py``); the MTP loss on verl's FSDP SFT
trainer (``verl_sft.py``) and RL actor (``verl_rl.py``); ``reasonrl bench mtp``.
"""

from __future__ import annotations

from reasonrl.contracts import PluginInfo, Registration, TrainerCallback
from reasonrl.hookspecs import hookimpl

#: transformers' classes by name: imported when transformers first looks a config / model up
CONFIG_CLASS = "reasonrl.plugins.mtp.hf_config:MiMoConfig"
MODEL_CLASS = "reasonrl.plugins.mtp.hf_model:MiMoForCausalLM"


def _register_model() -> None:
    from reasonrl.compat.transformers import register_causal_lm_when_loaded

    register_causal_lm_when_loaded("mtp", "mimo", CONFIG_CLASS, MODEL_CLASS)


def _register_config() -> None:
    from reasonrl.compat.transformers import register_causal_lm_when_loaded

    register_causal_lm_when_loaded("mtp", "mimo", CONFIG_CLASS)


def _register_engines() -> None:
    from reasonrl.bridges.import_hooks import register_engines_when_loaded

    def register() -> None:
        from reasonrl.plugins.mtp.verl_engine import register_engines

        register_engines()

    register_engines_when_loaded(register)


def _register_megatron_mimo() -> None:
    # verl's Megatron engine builds megatron-core's MTP (DeepSeek-V3's function): MiMo's, once built
    from reasonrl.bridges.import_hooks import register_adapter_when_loaded

    register_adapter_when_loaded("verl.workers.engine.megatron.transformer_impl", "reasonrl.plugins.mtp.verl_megatron")


def _register_drafter() -> None:
    from reasonrl.plugins.mtp.vllm_drafter import register_with_vllm

    register_with_vllm()


def _drafter_skip_reason() -> str | None:
    from reasonrl.plugins.mtp.compat import mtp_drafter_active

    return mtp_drafter_active()


@hookimpl
def reasonrl_plugin_info() -> PluginInfo:
    return PluginInfo(
        name="mtp",
        summary="multi-token prediction: MTP loss + λ schedule, MiMo checkpoint class, replication, multi-layer vLLM drafter",
        reports=("MiMo §2.2",),
    )


@hookimpl
def reasonrl_verl_registrations() -> list[Registration]:
    # verl's FSDP engine loads models through transformers' Auto classes
    return [
        Registration(
            "verl", "transformers_model", "mimo", _register_model, "AutoModelForCausalLM['mimo'] = MiMoForCausalLM"
        ),
        # verl's FSDP engine gives the loss log-probs only: this model type also hands it the MTP losses
        Registration(
            "verl",
            "engine",
            "mtp_language_model",
            _register_engines,
            "EngineRegistry['mtp_language_model'] = verl's FSDP engine + the model's MTP losses in model_output "
            "(verl's megatron engine as is); right after verl.workers.engine is imported",
        ),
        Registration(
            "verl",
            "megatron_model",
            "mimo_mtp",
            _register_megatron_mimo,
            "MegatronEngine._build_megatron_module wrapped: a MiMo model's MTP block computes MiMo's function "
            "(h^0 before the final norm, un-normed chaining), mbridge's input_proj halves reordered",
        ),
    ]


@hookimpl
def reasonrl_vllm_registrations() -> list[Registration]:
    return [
        # vLLM has MiMoForCausalLM but reads the config through transformers' AutoConfig
        Registration("vllm", "transformers_config", "mimo", _register_config, "AutoConfig['mimo'] = MiMoConfig"),
        # vLLM's MiMoMTP drafts with layer 0 only (asserts spec_step_idx == 0)
        # only where reasonrl's MTP drafting is on (+reasonrl/mtp=mimo sets REASONRL_MTP_DRAFTER for
        # the run's workers): other vLLM processes of the environment keep vLLM's own class
        Registration(
            "vllm",
            "model",
            "MiMoMTPModel",
            _register_drafter,
            "MiMoMTPModel = reasonrl MiMoMultiLayerMTP (layer k drafts token k)",
            when=_drafter_skip_reason,
        ),
    ]


@hookimpl
def reasonrl_config_groups():
    from reasonrl.plugins.mtp.config import MTP_GROUP

    return [MTP_GROUP]


@hookimpl
def reasonrl_check_config(config) -> None:
    from reasonrl.plugins.mtp.config import check_run

    check_run(config)


@hookimpl
def reasonrl_sft_trainer(config):
    """MiMo §2.2: ``reasonrl sft`` with ``reasonrl.mtp.enable`` trains the MTP layers beside the
    SFT loss (``verl_sft.run``: verl's SFT trainer + the MTP loss on FSDP, verl's own on megatron)."""
    from reasonrl.plugins.mtp.config import settings_from

    if not settings_from(config).enable:
        return None
    from reasonrl.plugins.mtp.verl_sft import run

    return run


def _build_training_callback(config):
    from reasonrl.plugins.mtp.verl_rl import build

    return build(config)


@hookimpl
def reasonrl_trainer_callbacks() -> list[TrainerCallback]:
    # RL with trained MTP layers on verl's FSDP actor: the MTP loss in the actor workers
    return [TrainerCallback("mtp_training", _build_training_callback)]


@hookimpl
def reasonrl_cli_commands():
    from reasonrl.plugins.mtp.cli import MTP_COMMAND

    return [MTP_COMMAND]


@hookimpl
def reasonrl_benchmarks():
    # benchmarks/mtp/ of a source checkout; the installed package holds no benchmarks
    from reasonrl.source_checkout import checkout_benchmarks

    return checkout_benchmarks("mtp")


@hookimpl
def reasonrl_reaches() -> list:
    # the upstream internals only this plugin uses, declared beside their accessors
    from reasonrl.plugins.mtp.compat import REACHES

    return list(REACHES)


@hookimpl
def reasonrl_patches() -> list:
    # patches/mtp/: the upstream patches only this plugin needs
    from reasonrl.patches.mtp import shipped

    return shipped()
