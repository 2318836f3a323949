"""Public facade for code that uses reasonrl without the CLI (scripts, tests, other trainers).

The core's own functions are defined here. Techniques' functions (``math_reward``,
``calibrate_difficulty``, ``test_difficulty_reward``, ``build_sampler``, ``solve_architecture``,
...) are offered by their plugins through the ``reasonrl_api_functions`` hook and resolved on
first use: ``reasonrl.api.math_reward`` *is* the rewards plugin's function, so the names stay
stable while the core names no technique. ``reasonrl.api.functions()`` lists them by plugin.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from reasonrl.config import ConfigError, validate_reasonrl_section
from reasonrl.contracts import ConfigGroup
from reasonrl.manager import call_each


def config_groups() -> dict[str, ConfigGroup]:
    """Every ``reasonrl.<group>`` any installed plugin declares, by group name."""
    groups: dict[str, ConfigGroup] = {}
    for plugin, declared in call_each("reasonrl_config_groups"):
        for group in declared:
            if group.name in groups:
                raise ConfigError(f"reasonrl.{group.name}", f"declared twice (again by plugin {plugin!r})")
            groups[group.name] = group
    return groups


def validate_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """Validate a composed run config: the ``reasonrl`` section against every plugin's schema,
    then each plugin's cross-field checks. Returns ``{group: validated schema instance}``."""
    from omegaconf import DictConfig, OmegaConf

    section = config.get("reasonrl")
    if isinstance(section, DictConfig):
        section = OmegaConf.to_container(section, resolve=True)
    validated = validate_reasonrl_section(section, config_groups())
    for _plugin, _result in call_each("reasonrl_check_config", reraise=(ConfigError,), config=config):
        pass  # a check answers by raising ConfigError; return values are ignored
    return validated


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


def __getattr__(name: str) -> Callable[..., Any]:
    if name.startswith("__"):
        raise AttributeError(name)
    found = functions().get(name)
    if found is None:
        raise AttributeError(f"reasonrl.api has no {name!r}: no installed plugin offers it (reasonrl_api_functions)")
    globals()[name] = found[1]  # resolved once per process
    return found[1]


def __dir__() -> list[str]:
    return sorted({*globals(), *functions()})
