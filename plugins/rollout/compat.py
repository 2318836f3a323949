"""The verl internals the rollout plugin's request transforms reach into, behind their version
guard (offered to ``reasonrl train`` and ``reasonrl plugins`` through the plugin's
``reasonrl_reaches`` hook)."""

from __future__ import annotations

from typing import Any

from reasonrl.compat import Reach, config_value
from reasonrl.compat.verl import VERL_0_9


def _rollout_requests_transformed(config: Any) -> bool:
    repeat = (config_value(config, "reasonrl.rollout.repetition_max_pattern") or 0) > 0
    return repeat or config_value(config, "reasonrl.rollout.token_budget") is not None


AGENT_LOOP_STOP_REASON = Reach(
    name="verl.agent-loop-stop-reason",
    package="verl",
    versions=VERL_0_9,
    touches="TokenOutput.stop_reason (vLLM's finish reason, e.g. 'repetition') and TokenOutput.extra_fields "
    "reaching the batch's 'extra_fields', the LLM server building vLLM SamplingParams from the request's "
    "sampling_params (max_tokens honoured), TokenOutput's constructor, run(**kwargs) receiving session_id and "
    "global_steps, extra_fields' min/max_global_steps read as verl's version tags",
    used_by="rollout plugin (vLLM repeat detection asked per request; each response's stop reason kept; "
    "partial rollout's budgeted, continued requests)",
    public_hook="the engine's stop reason in AgentLoopOutput, and engine-specific sampling parameters "
    "declared in the rollout config",
    needed=_rollout_requests_transformed,
)


def _dora_on(config: Any) -> bool:
    return bool(config_value(config, "reasonrl.rollout.dora"))


DORA_CHECKPOINT_MANAGER = Reach(
    name="verl.dora-checkpoint-manager",
    package="verl",
    versions=VERL_0_9,
    touches="CheckpointEngineManager (subclassed: its update_weights coroutine, __wrapped__ under @auto_await, "
    "run with .replicas narrowed to the updated group), RolloutReplica.server_address/server_handle, "
    "GlobalRequestLoadBalancer.remove_servers/add_servers, "
    "PPOTrainerSeparateAsync.standalone_checkpoint_manager/standalone_server_manager (replaced after on_init_end), "
    "the trajectory tags min/max_global_steps in TransferQueue",
    used_by="rollout plugin (DORA: replicas updated a group at a time, staleness by the trajectories' versions)",
    public_hook="a configurable checkpoint-manager class for the v1 trainers (verl's experimental/separation has an "
    "FQN checkpoint_manager_class the v1 trainers do not read), per-replica update_weights",
    needed=_dora_on,
)

REACHES = (AGENT_LOOP_STOP_REASON, DORA_CHECKPOINT_MANAGER)
