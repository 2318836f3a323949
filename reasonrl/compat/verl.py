"""verl internals reasonrl uses (verl 0.9.1), each behind its version guard.

Accessors import verl only when called. Subclasses that override verl's private methods take
their base class from here (:func:`sync_trainer_base`, :func:`colocate_async_trainer_base`,
:func:`replay_buffer_base`, :func:`replay_buffer_async_base`,
:func:`sft_trainer_base`), so the version check runs where the subclass is built.
"""

from __future__ import annotations

from typing import Any

from reasonrl.compat import Reach, config_value, declare
from reasonrl.config import REASONRL_ASYNC_TRAINER_MODE, REASONRL_SEPARATE_ASYNC_TRAINER_MODE, REASONRL_TRAINER_MODES

VERL_0_9 = ">=0.9.1,<0.10"


def _trainer_mode_is_ours(config: Any) -> bool:
    return config_value(config, "trainer.v1.trainer_mode") in REASONRL_TRAINER_MODES


def _async_trainer_mode_is_ours(config: Any) -> bool:
    return config_value(config, "trainer.v1.trainer_mode") == REASONRL_ASYNC_TRAINER_MODE


def _separate_async_trainer_mode_is_ours(config: Any) -> bool:
    return config_value(config, "trainer.v1.trainer_mode") == REASONRL_SEPARATE_ASYNC_TRAINER_MODE


def _reporting_buffer_selected(config: Any) -> bool:
    return "ReportingReplayBuffer" in str(config_value(config, "trainer.v1.sampler.custom_sampler.name") or "")


def _cpu_platform(config: Any) -> bool:
    return str(config_value(config, "ray_kwargs.ray_init.runtime_env.env_vars.VERL_PLATFORM") or "") == "cpu"


def _mtp_engine_selected(config: Any) -> bool:
    return config_value(config, "actor_rollout_ref.model.model_type") == "mtp_language_model"


def _engine_registered_by_us(config: Any) -> bool:
    return _cpu_platform(config) or _mtp_engine_selected(config)


SYNC_TRAINER = declare(
    Reach(
        name="verl.sync-trainer",
        package="verl",
        versions=VERL_0_9,
        touches="PPOTrainerSync._build_replay_buffer/_next_train_batch (part of _fetch_one_gen_batch)/_compute_advantage/"
        "_update_actor/_save_checkpoint/_load_checkpoint/_val_metrics_update, the trainer_mode attribute",
        used_by="trainer modes reasonrl_sync and reasonrl_colocate_async (plugin callbacks; the methods are "
        "PPOTrainer's, shared by verl's sync and colocate_async trainers)",
        public_hook="a trainer callback API (per-step hooks, prompt source, checkpoint state) in verl's v1 trainer",
        needed=_trainer_mode_is_ours,
    )
)

ASYNC_TRAINER = declare(
    Reach(
        name="verl.colocate-async-trainer",
        package="verl",
        versions=VERL_0_9,
        touches="PPOTrainerColocateAsync (subclassed with the same overrides as verl.sync-trainer), "
        "ReplayBufferAsync (ReportingReplayBuffer's async variant), the trainer_mode attribute set to "
        "'colocate_async' (verl branches on the name: TransferQueue prompt persistence and checkpoint, refills)",
        used_by="trainer mode reasonrl_colocate_async (verl's partial rollout across weight updates + plugin callbacks)",
        public_hook="a trainer callback API in verl's v1 trainer; trainer-mode behaviour keyed on a class attribute, "
        "not on the registered name",
        needed=_async_trainer_mode_is_ours,
    )
)

SEPARATE_ASYNC_TRAINER = declare(
    Reach(
        name="verl.separate-async-trainer",
        package="verl",
        versions=VERL_0_9,
        touches="PPOTrainerSeparateAsync (subclassed with the same overrides as verl.sync-trainer), its "
        "standalone_checkpoint_manager / standalone_server_manager attributes, the trainer_mode attribute set to "
        "'separate_async'",
        used_by="trainer mode reasonrl_separate_async (verl's disaggregated rollout + plugin callbacks)",
        public_hook="a trainer callback API in verl's v1 trainer; a configurable checkpoint-manager class",
        needed=_separate_async_trainer_mode_is_ours,
    )
)

REPLAY_BUFFER = declare(
    Reach(
        name="verl.replay-buffer",
        package="verl",
        versions=VERL_0_9,
        touches="ReplayBuffer._clear_groups/_materialize_batch/_terminal_eviction_reasons/_evict_terminal_groups/"
        "_metrics_prefix/_sync_metadata_from_transfer_queue/_sampleable_terminal_keys/_select_prompt_uids, "
        ".partitions (trajectory tags 'response_len'), .pending_keys/.running_keys/.finished_keys, "
        ".prompt_global_steps (the prompt tag 'global_steps' as the policy version), .refill_fn, "
        ".poll_interval, the '<uid>_<index>' key format, the constructor's DAPO arguments "
        "(sync_refill_failed_groups left at verl's default); a streaming schedule replaces sample()'s loop for "
        "training batches and aborts through the trainer's checkpoint_manager.abort_replicas(reject_request=True) / "
        "resume_generation_replicas(); a staleness-bounded schedule keeps finished groups in TransferQueue across "
        "steps and checkpoints them as verl's async modes do (transfer_queue.save_checkpoint/load_checkpoint into "
        "global_step_<n>/transfer_queue)",
        used_by="ReportingReplayBuffer (finished groups for the sampling plugin; groups held for partial rollout; "
        "the rollout plugin's seamless rollout schedule and its staleness-bounded reuse)",
        public_hook="a finished-group callback on verl's ReplayBuffer (groups trained, evicted by DAPO, discarded as "
        "surplus), a group-eviction predicate (hold a finished group back, refill its slot) and a selection policy "
        "(which finished groups to train and when to stop the step, aborting the rest)",
        needed=_reporting_buffer_selected,
    )
)

MAIN_PPO = declare(
    Reach(
        name="verl.main-ppo-body",
        package="verl",
        versions=VERL_0_9,
        touches="verl.trainer.main_ppo.main.__wrapped__ (the @hydra.main body)",
        used_by="reasonrl train (runs verl's entry point on an already composed config)",
        public_hook="a run_ppo(config) function beside main_ppo.main (verl has run_ppo, but without main's device and validation set-up)",
    )
)

ENGINE_REGISTRY = declare(
    Reach(
        name="verl.engine-registry",
        package="verl",
        versions=VERL_0_9,
        touches="EngineRegistry._engines (is this engine already registered for this device?)",
        used_by="cpu_platform plugin (verl's FSDP engines on device 'cpu'), mtp plugin (engine model type mtp_language_model)",
        public_hook="EngineRegistry.get(model_type, backend, device) without raising, or device-agnostic registration",
        needed=_engine_registered_by_us,
    )
)


def sync_trainer_base() -> type:
    """verl's ``PPOTrainerSync`` (trainer mode ``reasonrl_sync`` subclasses it)."""
    SYNC_TRAINER.require()
    from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync

    return PPOTrainerSync


def colocate_async_trainer_base() -> type:
    """verl's ``PPOTrainerColocateAsync`` (trainer mode ``reasonrl_colocate_async`` subclasses it)."""
    ASYNC_TRAINER.require()
    from verl.trainer.ppo.v1.trainer_colocate_async import PPOTrainerColocateAsync

    return PPOTrainerColocateAsync


def separate_async_trainer_base() -> type:
    """verl's ``PPOTrainerSeparateAsync`` (trainer mode ``reasonrl_separate_async`` subclasses it)."""
    SEPARATE_ASYNC_TRAINER.require()
    from verl.trainer.ppo.v1.trainer_separate_async import PPOTrainerSeparateAsync

    return PPOTrainerSeparateAsync


def replay_buffer_async_base() -> type:
    """verl's ``ReplayBufferAsync`` (``ReportingReplayBuffer``'s async variant subclasses it)."""
    REPLAY_BUFFER.require()
    from verl.trainer.ppo.v1.replay_buffer import ReplayBufferAsync

    return ReplayBufferAsync


def replay_buffer_base() -> type:
    """verl's sync ``ReplayBuffer`` (``ReportingReplayBuffer`` subclasses it)."""
    REPLAY_BUFFER.require()
    from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer

    return ReplayBuffer


def non_tensor_items(value: Any) -> list:
    """A TransferQueue non-tensor field (a NonTensorStack, or a list of NonTensorData) as plain
    Python values, one per response."""
    value = value.tolist() if hasattr(value, "tolist") else list(value)
    return [getattr(v, "data", v) for v in value]


def replay_buffer_uid(key: str) -> str:
    """The prompt group (uid) of a replay-buffer key (verl 0.9.1: ``<uid>_<response index>``)."""
    return key.split("_")[0]


def run_main_ppo(config: Any) -> None:
    """verl's ``main_ppo.main`` body (device selection, verl's validation, Ray start, TaskRunner)
    on a composed config, without a second Hydra run."""
    MAIN_PPO.require()
    from verl.trainer.main_ppo import main

    main.__wrapped__(config)


def engine_registered(model_type: str, backend: str, device: str) -> Any:
    """The engine class verl's ``EngineRegistry`` holds for the triple, or None."""
    ENGINE_REGISTRY.require()
    from verl.workers.engine.base import EngineRegistry

    return EngineRegistry._engines.get(model_type, {}).get(backend, {}).get(device)


def _composed_agent_loop_on(config: Any) -> bool:
    from reasonrl.request_transforms import AGENT_LOOP

    return config_value(config, "actor_rollout_ref.rollout.agent.default_agent_loop") == AGENT_LOOP


AGENT_LOOP_BASE = declare(
    Reach(
        name="verl.agent-loop-single-turn",
        package="verl",
        versions=VERL_0_9,
        touches="SingleTurnAgentLoop (subclassed: run(sampling_params, **kwargs), .config, .response_length, "
        ".tokenizer, .server_manager wrapped per agent-loop instance and called as generate(**request) with "
        "prompt_ids/sampling_params), AgentLoopWorkerTQ.generate_sequences handing a training batch's NonTensorData "
        "fields to run(**kwargs), the agent-loop registry's register()",
        used_by="reasonrl's composable agent loop 'reasonrl' (the plugins' request transforms: length cap, repeat "
        "detection, partial rollout)",
        public_hook="request transforms (sampling-parameter and generate middleware) in verl's agent-loop API",
        needed=_composed_agent_loop_on,
    )
)


def single_turn_agent_loop_base() -> type:
    """verl's ``SingleTurnAgentLoop``, which reasonrl's composable agent loop subclasses."""
    AGENT_LOOP_BASE.require()
    from verl.experimental.agent_loop.single_turn_agent_loop import SingleTurnAgentLoop

    return SingleTurnAgentLoop
