"""Public facade for code that uses reasonrl without the CLI (scripts, tests, other trainers).

``from reasonrl.api import <name>`` gives the core's functions (``config_groups``,
``validate_config``, ``megatron_layer_spec``, ``functions``) and the techniques' public functions,
each re-exported explicitly from the built-in plugin that owns it (the product calls the same
function objects), and the exceptions they raise. ``functions()`` lists every plugin's ``reasonrl_api_functions`` by plugin,
third-party ones included. Importing this module imports those plugin modules (torch among
them); the core's own code imports from ``reasonrl.config`` instead.
"""

from __future__ import annotations

from typing import Any, Callable

from reasonrl.config import config_groups, validate_config
from reasonrl.manager import call_each
from reasonrl.plugins.merging.fusion import fuse_task_vectors
from reasonrl.plugins.puzzle.facades import solve_architecture
from reasonrl.plugins.rewards.facades import (
    CodeJudgeError,
    calibrate_difficulty,
    math_reward,
    run_code_tests,
    test_difficulty_reward,
)
from reasonrl.plugins.rollout.seamless import fifo_early_termination
from reasonrl.plugins.sampling.sampler import build_sampler

__all__ = [
    "CodeJudgeError",
    "build_sampler",
    "calibrate_difficulty",
    "config_groups",
    "fifo_early_termination",
    "functions",
    "fuse_task_vectors",
    "math_reward",
    "megatron_layer_spec",
    "run_code_tests",
    "solve_architecture",
    "test_difficulty_reward",
    "validate_config",
]


def megatron_layer_spec(name: str, **kwargs: Any) -> Any:
    """Build the Megatron-core layer spec that a plugin registered under ``name``."""
    builders: dict[str, Callable[..., Any]] = {}
    for _plugin, specs in call_each("reasonrl_megatron_layer_specs"):
        builders.update(specs)
    if name not in builders:
        raise KeyError(f"no plugin provides a Megatron layer spec named {name!r}; known: {sorted(builders)}")
    return builders[name](**kwargs)


def functions() -> dict[str, tuple[str, Callable[..., Any]]]:
    """Every plugin-provided facade: ``name -> (plugin, function)``; a name offered twice is an error."""
    offered: dict[str, tuple[str, Callable[..., Any]]] = {}
    for plugin, declared in call_each("reasonrl_api_functions"):
        for name, function in declared.items():
            if name in offered or name in _CORE:
                owner = offered[name][0] if name in offered else "reasonrl"
                raise ValueError(f"reasonrl.api.{name} offered by plugin {plugin!r} and by {owner!r}")
            offered[name] = (plugin, function)
    return offered


_CORE = frozenset({"config_groups", "validate_config", "megatron_layer_spec", "functions"})
