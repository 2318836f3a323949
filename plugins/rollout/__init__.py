"""rollout: how responses are generated for a training step.

Kimi k1.5 §2.6.2 (partial rollout with a per-iteration token budget; repeat detection with early
termination and a penalty), MiMo-7B §3.4.1 (Seamless Rollout Engine: continuous rollout,
demand-driven launching, FIFO early termination), LongCat-Flash-Thinking §3.1.1 (DORA:
staleness-bounded streaming), Llama-Nemotron §5.2.3 (FP8 generation).

- ``seamless.py``, ``partial.py``, ``staleness.py``, ``repetition.py``: framework-free cores;
- ``verl_request.py``: request transforms of reasonrl's agent loop ``reasonrl`` (vLLM's repeat
  detection per request, stop reasons kept, partial rollout's budgeted and continued requests);
  ``verl_callback.py``: the penalty and the rates, the held groups' store, a ``reasonrl_sync`` callback;
- ``benchmarks/rollout/`` of the source checkout (not installed): ``simulator.py`` (policies) /
  ``sim_model.py`` (engine, records) / ``trace.py``: the schedulers on a long-tail trace
  (``reasonrl bench rollout``).
"""

from __future__ import annotations

from reasonrl.config import (
    REASONRL_SEPARATE_ASYNC_TRAINER_MODE,
    REASONRL_TRAINER_MODE,
    ConfigError,
    config_value,
    require_agent_loop,
    require_trainer_mode,
)
from reasonrl.contracts import ConfigGroup, PluginInfo, TrainerCallback
from reasonrl.hookspecs import hookimpl
from reasonrl.plugins.rollout.config import ROLLOUT_GROUP
from reasonrl.request_transforms import AGENT_LOOP


def _build_callback(config):
    from reasonrl.plugins.rollout.verl_callback import build

    return build(config)


@hookimpl
def reasonrl_plugin_info() -> PluginInfo:
    return PluginInfo(
        name="rollout",
        summary="rollout: vLLM repeat detection with a reward penalty; partial rollout with a token budget; "
        "seamless rollout (demand-driven launching, FIFO early termination); staleness-bounded reuse of finished "
        "groups (DORA); FP8 generation",
        reports=("Kimi k1.5 §2.6.2", "MiMo-7B §3.4.1", "LongCat-Flash-Thinking §3.1.1", "Llama-Nemotron §5.2.3"),
    )


@hookimpl
def reasonrl_trainer_callbacks() -> list[TrainerCallback]:
    return [TrainerCallback("rollout", _build_callback)]


@hookimpl
def reasonrl_config_groups() -> list[ConfigGroup]:
    return [ROLLOUT_GROUP]


@hookimpl
def reasonrl_benchmarks() -> list:
    # benchmarks/rollout/ of a source checkout; the installed package holds no benchmarks
    from reasonrl.source_checkout import checkout_benchmarks

    return checkout_benchmarks("rollout")


@hookimpl
def reasonrl_request_transforms(config) -> list:
    from reasonrl.plugins.rollout.config import settings_from
    from reasonrl.plugins.rollout.verl_request import transform_factories

    return transform_factories(settings_from(config))


def dora_parameter_sync_step(train_batch_size, ppo_mini_batch_size) -> int:
    """verl's separate_async takes ``train_batch_size / ppo_mini_batch_size`` mini-batches per weight sync
    (it asserts the product); a batch that is not a whole number of mini-batches is refused here."""
    batch, mini = int(train_batch_size), int(ppo_mini_batch_size)
    if mini <= 0 or batch % mini:
        raise ConfigError(
            "actor_rollout_ref.actor.ppo_mini_batch_size",
            f"({mini}) must divide data.train_batch_size ({batch}) in verl's separate_async (DORA)",
        )
    return batch // mini


@hookimpl
def reasonrl_config_resolvers() -> dict:
    return {"reasonrl.dora_parameter_sync_step": dora_parameter_sync_step}


@hookimpl
def reasonrl_api_functions() -> dict:
    from reasonrl.plugins.rollout.seamless import fifo_early_termination

    return {"fifo_early_termination": fifo_early_termination}


def check_rollout(config) -> None:
    """Repeat detection and partial rollout run in reasonrl's agent loop ``reasonrl``; partial,
    seamless and staleness-bounded rollout in trainer mode ``reasonrl_sync`` and reasonrl's replay
    buffer (which holds the unfinished groups / runs the schedule); the repetition penalty in any
    of reasonrl's trainer modes."""
    from reasonrl.plugins.rollout.config import settings_from

    settings = settings_from(config)
    partial = settings.token_budget is not None
    if settings.repetition_detection or partial:
        require_agent_loop(config, AGENT_LOOP, "repeat detection / partial rollout (+reasonrl/rollout=<option>)")
    if settings.dora:
        check_dora(config)
    elif partial or settings.seamless or settings.staleness is not None:
        option = "partial" if partial else "staleness" if settings.staleness is not None else "seamless"
        require_trainer_mode(
            config,
            f"{option} rollout (a synchronous step's schedule in reasonrl's replay buffer; verl's colocate_async is "
            "its own partial rollout)",
            modes=(REASONRL_TRAINER_MODE,),
        )
        require_reporting_buffer(config, f"{option} rollout", option)
    elif settings.repetition_detection and settings.repetition_penalty:
        require_trainer_mode(config, "the repetition penalty (a trainer callback)")
    check_async_mode(config)
    from reasonrl.plugins.rollout.fp8 import check_fp8

    check_fp8(config)


def require_reporting_buffer(config, needs: str, option: str) -> None:
    """Refuse a run without reasonrl's ReportingReplayBuffer (verl's ``custom_sampler``): ``needs`` runs there."""
    buffer = config_value(config, "trainer.v1.sampler.custom_sampler.name")
    if buffer != "ReportingReplayBuffer":
        raise ConfigError(
            "trainer.v1.sampler.custom_sampler.name",
            f"is {buffer!r}: {needs} runs in reasonrl's ReportingReplayBuffer (+reasonrl/rollout={option} sets it)",
        )


def check_dora(config) -> None:
    """DORA runs in trainer mode ``reasonrl_separate_async`` on reasonrl's replay buffer (its staleness rule
    replaces verl's prompt-age rule, so verl's ``max_off_policy_threshold`` must be off), with at least two
    standalone generation replicas (one replica holds one version)."""
    require_trainer_mode(
        config,
        "DORA (+reasonrl/rollout=dora: generation replicas apart from the trainer)",
        modes=(REASONRL_SEPARATE_ASYNC_TRAINER_MODE,),
    )
    require_reporting_buffer(config, "DORA's staleness rule", "dora")
    if config_value(config, "trainer.v1.sampler.max_off_policy_threshold") is not None:
        raise ConfigError(
            "trainer.v1.sampler.max_off_policy_threshold",
            "must be null with DORA: reasonrl.rollout.staleness bounds samples by the versions that generated them "
            "(verl's threshold counts the prompt's age)",
        )
    tensor_parallel = int(config_value(config, "actor_rollout_ref.rollout.tensor_model_parallel_size", 1) or 1)
    devices = int(config_value(config, "actor_rollout_ref.rollout.nnodes", 0) or 0) * int(
        config_value(config, "actor_rollout_ref.rollout.n_gpus_per_node", 0) or 0
    )
    if devices // max(1, tensor_parallel) < 2:
        raise ConfigError(
            "actor_rollout_ref.rollout.n_gpus_per_node",
            f"DORA needs >= 2 standalone generation replicas (rollout.nnodes x n_gpus_per_node / tensor parallel = "
            f"{devices} / {tensor_parallel}): one replica holds one policy version",
        )


#: verl's checkpoint-engine key: how weights reach the rollout replicas
CHECKPOINT_ENGINE = "actor_rollout_ref.rollout.checkpoint_engine.backend"


def check_async_mode(config) -> None:
    """verl's ``separate_async`` (disaggregated rollout) moves weights through a non-``naive``
    checkpoint engine (nccl / nixl / mooncake ...; gloo on CPU) and asserts so only inside its trainer, after Ray
    and the workers have started: refused here first. (``colocate_async`` runs on vLLM's CPU build:
    its abort path needs patch ``vllm-pause-generation-mode`` on vLLM 0.32, applied by reasonrl.)"""
    if config_value(config, "trainer.v1.trainer_mode") not in ("separate_async", REASONRL_SEPARATE_ASYNC_TRAINER_MODE):
        return
    backend = config_value(config, CHECKPOINT_ENGINE, "naive")
    if backend == "naive":
        raise ConfigError(
            CHECKPOINT_ENGINE,
            "is 'naive', but verl's separate_async trainer needs a checkpoint engine that sends weights "
            "to a separate rollout pool: nccl, nixl, mooncake, ... on GPU machines, gloo on a CPU machine",
        )


@hookimpl
def reasonrl_check_config(config) -> None:
    check_rollout(config)


@hookimpl
def reasonrl_reaches() -> list:
    # the upstream internals only this plugin uses, declared beside their accessors
    from reasonrl.plugins.rollout.compat import REACHES

    return list(REACHES)
