"""reasonrl-example-plugin: the worked example of docs/architecture.md.

Adds verl policy-loss mode ``example_reinforce`` and its switch
``+reasonrl/example_reinforce=on``, with one validated knob (``entropy_bonus``) mapped onto
verl's ``actor_rollout_ref.actor.entropy_coeff``.
"""

from __future__ import annotations

from dataclasses import dataclass

from reasonrl.config import ConfigError, knob
from reasonrl.contracts import ConfigGroup, PluginInfo, Registration
from reasonrl.hookspecs import hookimpl


@dataclass
class ExampleReinforceConfig:
    """Knobs at ``reasonrl.example_reinforce``."""

    entropy_bonus: float = knob(
        0.0, help="entropy bonus coefficient, mapped onto actor.entropy_coeff", low=0.0, high=0.1
    )


def _register_loss() -> None:
    from reasonrl_example_plugin.verl_loss import register  # verl is imported only here

    register()


@hookimpl
def reasonrl_plugin_info() -> PluginInfo:
    return PluginInfo(
        name="example_reinforce", summary="REINFORCE policy loss for verl (worked example)", reports=("Williams 1992",)
    )


@hookimpl
def reasonrl_verl_registrations() -> list[Registration]:
    return [
        Registration(
            "verl",
            "policy_loss",
            "example_reinforce",
            _register_loss,
            "core_algos.POLICY_LOSS_REGISTRY['example_reinforce']",
        )
    ]


@hookimpl
def reasonrl_config_groups() -> list[ConfigGroup]:
    return [ConfigGroup("example_reinforce", ExampleReinforceConfig, "REINFORCE example knobs")]


@hookimpl
def reasonrl_hydra_searchpath() -> list[str]:
    return ["pkg://reasonrl_example_plugin.conf"]


@hookimpl
def reasonrl_check_config(config) -> None:
    if config.get("reasonrl", {}).get("example_reinforce") is None:
        return
    mode = config.actor_rollout_ref.actor.policy_loss.loss_mode
    if mode != "example_reinforce":
        raise ConfigError(
            "actor_rollout_ref.actor.policy_loss.loss_mode",
            f"is {mode!r} but reasonrl.example_reinforce is set; use +reasonrl/example_reinforce=on",
        )
