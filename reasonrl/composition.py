"""Composing a run config as ``reasonrl train`` does: reasonrl's primary config over verl's trainer
config, the plugins' Hydra search paths and resolvers — for the CLI, for tools and plugins that
build runs of their own (the merging plugin's domain-parallel pipeline), and for tests; none of
them needs to import the CLI."""

from __future__ import annotations

import os
from typing import Any

CONFIG_MODULE = "reasonrl.hydra_configs"
CONFIG_NAME = "reasonrl_trainer"
VERL_CONFIG_SEARCHPATH = "pkg://verl.trainer.config"


def plugin_searchpath() -> list[str]:
    """Hydra search-path entries contributed by plugins (their own config groups)."""
    from reasonrl.manager import call_each

    return [entry for _plugin, entries in call_each("reasonrl_hydra_searchpath") for entry in entries]


def with_searchpath(overrides: list[str]) -> list[str]:
    """Add the plugins' search-path entries to the user's overrides (if any)."""
    extra = plugin_searchpath()
    if not extra:
        return list(overrides)
    return [*overrides, f"hydra.searchpath=[{','.join([VERL_CONFIG_SEARCHPATH, *extra])}]"]


def compose_config(overrides: list[str]) -> Any:
    """Compose the run config as ``reasonrl train`` would, without running anything."""
    from hydra import compose, initialize_config_module

    from reasonrl.config import register_resolvers

    register_resolvers()
    with initialize_config_module(CONFIG_MODULE, version_base=None):
        return compose(CONFIG_NAME, overrides=with_searchpath(overrides))


def missing_options(overrides: list[str]) -> dict[str, str]:
    """The plugin options (``reasonrl/<group>: <option>``) the composed defaults name that no
    installed plugin provides: ``{group: option}``. A recipe names its plugins' options as
    ``optional`` defaults, so that it composes where some of them are lifted out (a plugin alone);
    ``reasonrl train`` refuses to run such a recipe (nothing silently dropped)."""
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    from reasonrl.config import register_resolvers

    register_resolvers()
    with initialize_config_module(CONFIG_MODULE, version_base=None):
        full = with_searchpath(overrides)
        choices = compose(CONFIG_NAME, overrides=full, return_hydra_config=True).hydra.runtime.choices
        loader = GlobalHydra.instance().config_loader()
        return {
            group: option
            for group, option in choices.items()
            if group.startswith("reasonrl/")
            and option
            and option not in loader.get_group_options(group, overrides=full)
        }


def export_runtime_env(config: Any) -> None:
    """Resolve the env vars the config gives every Ray worker (verl hands Ray the runtime_env
    unresolved, so an interpolation such as ``${reasonrl.mtp.drafting}`` would reach the workers
    as its literal text) to strings, and give the driver the same ones (e.g. VERL_PLATFORM)."""
    from omegaconf import open_dict

    env_vars = config.get("ray_kwargs", {}).get("ray_init", {}).get("runtime_env", {}).get("env_vars", {}) or {}
    resolved = {str(key): str(value) for key, value in env_vars.items()}
    if resolved:
        with open_dict(config):
            config.ray_kwargs.ray_init.runtime_env.env_vars = resolved
    for key, value in resolved.items():
        os.environ.setdefault(key, value)


def resolve_in_driver(config: Any) -> None:
    """Resolve every interpolation here, with reasonrl's resolvers registered (verl's TaskRunner
    resolves the config again, in a Ray process that may not have them)."""
    from omegaconf import OmegaConf

    from reasonrl.config import register_resolvers

    register_resolvers()
    OmegaConf.resolve(config)
