"""The plugin contract as executable checks, for built-in and third-party plugins alike.

Use from your own tests::

    from reasonrl.testing.contract import check_plugin
    import my_plugin
    assert check_plugin(my_plugin, "my_plugin") == []

or run the whole suite against every installed plugin: ``pytest --pyargs reasonrl.testing``.
Each check returns human-readable problems; an empty list means the plugin keeps the contract.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
from typing import Any

from reasonrl.config import ConfigError, validate_group
from reasonrl.contracts import CliCommand, ConfigGroup, PluginInfo, Registration, TrainerCallback
from reasonrl.hookspecs import DECLARATION_HOOKS
from reasonrl.manager import new_plugin_manager, register_plugin
from reasonrl.patching import Patch

UPSTREAM_MODULES = ("verl", "vllm", "megatron", "ray")


def _hook_results(plugin: object, name: str) -> tuple[dict[str, Any], list[str]]:
    """Register ``plugin`` alone in a fresh manager and call each hook it implements."""
    problems: list[str] = []
    manager = new_plugin_manager(discover=False)
    error = register_plugin(manager, plugin, name)
    if error is not None:
        return {}, [f"does not register: {error.error}"]
    results: dict[str, Any] = {}
    for hook_name in DECLARATION_HOOKS:
        impls = getattr(manager.hook, hook_name).get_hookimpls()
        if not impls:
            continue
        try:
            results[hook_name] = impls[0].function()
        except Exception as exc:
            problems.append(f"{hook_name} raised {type(exc).__name__}: {exc}")
    return results, problems


def _check_list(value: Any, item_type: type, hook: str) -> list[str]:
    if not isinstance(value, list):
        return [f"{hook} must return a list, got {type(value).__name__}"]
    return [
        f"{hook} item {i} is {type(item).__name__}, expected {item_type.__name__}"
        for i, item in enumerate(value)
        if not isinstance(item, item_type)
    ]


def _check_registrations(value: Any, upstream: str, hook: str) -> list[str]:
    problems = _check_list(value, Registration, hook)
    if problems:
        return problems
    seen: set[tuple[str, str]] = set()
    for registration in value:
        if registration.upstream != upstream:
            problems.append(
                f"{hook}: {registration.kind}:{registration.name} has upstream {registration.upstream!r}, expected {upstream!r}"
            )
        key = (registration.kind, registration.name)
        if key in seen:
            problems.append(f"{hook}: {registration.kind}:{registration.name} declared twice")
        seen.add(key)
    return problems


def _check_config_groups(value: Any) -> list[str]:
    problems = _check_list(value, ConfigGroup, "reasonrl_config_groups")
    if problems:
        return problems
    for group in value:
        if not dataclasses.is_dataclass(group.schema):
            problems.append(f"config group {group.name!r}: schema must be a dataclass")
            continue
        for field in dataclasses.fields(group.schema):
            if not field.metadata.get("help"):
                problems.append(f"reasonrl.{group.name}.{field.name}: declare it with reasonrl.config.knob(help=...)")
        try:
            validate_group(group, {})
        except ConfigError as exc:
            problems.append(f"config group {group.name!r}: defaults do not validate: {exc}")
    return problems


def _check_cli_commands(value: Any, hook: str = "reasonrl_cli_commands") -> list[str]:
    problems = _check_list(value, CliCommand, hook)
    for command in value if not problems else []:
        try:
            command.configure(argparse.ArgumentParser(prog=f"reasonrl {command.name}"))
        except Exception as exc:
            problems.append(f"command {command.name!r}: configure() raised {type(exc).__name__}: {exc}")
    return problems


def check_declarations(plugin: object, name: str) -> list[str]:
    """Check every hook's return value against its declared type and rules."""
    results, problems = _hook_results(plugin, name)
    if "reasonrl_plugin_info" not in results:
        problems.append("reasonrl_plugin_info is required")
    else:
        info = results["reasonrl_plugin_info"]
        if not isinstance(info, PluginInfo) or not info.name or not info.summary:
            problems.append("reasonrl_plugin_info must return a PluginInfo with a name and a summary")
    for upstream in ("verl", "vllm"):
        hook = f"reasonrl_{upstream}_registrations"
        if hook in results:
            problems += _check_registrations(results[hook], upstream, hook)
    specs = results.get("reasonrl_megatron_layer_specs")
    if specs is not None and not (
        isinstance(specs, dict) and all(isinstance(k, str) and callable(v) for k, v in specs.items())
    ):
        problems.append("reasonrl_megatron_layer_specs must return {name: callable}")
    if "reasonrl_config_groups" in results:
        problems += _check_config_groups(results["reasonrl_config_groups"])
    paths = results.get("reasonrl_hydra_searchpath")
    if paths is not None and not (isinstance(paths, list) and all(isinstance(p, str) and "://" in p for p in paths)):
        problems.append("reasonrl_hydra_searchpath must return a list of 'pkg://…' or 'file://…' entries")
    if "reasonrl_patches" in results:
        patch_problems = _check_list(results["reasonrl_patches"], Patch, "reasonrl_patches")
        names = [p.name for p in results["reasonrl_patches"]] if not patch_problems else []
        patch_problems += [f"patch {n!r} declared twice" for n in set(names) if names.count(n) > 1]
        problems += patch_problems
    for hook in ("reasonrl_cli_commands", "reasonrl_benchmarks"):
        if hook in results:
            problems += _check_cli_commands(results[hook], hook)
    if "reasonrl_api_functions" in results:
        functions = results["reasonrl_api_functions"]
        if not isinstance(functions, dict):
            problems.append(f"reasonrl_api_functions must return a dict, got {type(functions).__name__}")
        else:
            problems += [
                f"reasonrl_api_functions: {name!r} must be an identifier naming a callable"
                for name, function in functions.items()
                if not (
                    isinstance(name, str) and name.isidentifier() and not name.startswith("_") and callable(function)
                )
            ]
    if "reasonrl_reaches" in results:
        from reasonrl.compat import DISTRIBUTIONS, MODULES, Reach

        reaches = results["reasonrl_reaches"]
        problems += _check_list(reaches, Reach, "reasonrl_reaches") or [
            f"reach {r.name!r}: name it '<upstream>.<piece>' with upstream one of {list(MODULES)}, package one of "
            f"{sorted(DISTRIBUTIONS)}, and say what it touches, who uses it and the public hook that would replace it"
            for r in reaches
            if r.name.split(".")[0] not in MODULES
            or r.package not in DISTRIBUTIONS
            or not (r.touches and r.used_by and r.public_hook)
        ]
    if "reasonrl_trainer_callbacks" in results:
        callbacks = results["reasonrl_trainer_callbacks"]
        callback_problems = _check_list(callbacks, TrainerCallback, "reasonrl_trainer_callbacks")
        problems += callback_problems or [
            f"trainer callback {c.name!r}: build must be callable" for c in callbacks if not callable(c.build)
        ]
    return problems


_IMPORT_PROBE = """
import importlib, json, sys
from reasonrl.hookspecs import DECLARATION_HOOKS
from reasonrl.manager import new_plugin_manager, register_plugin
plugin = importlib.import_module(sys.argv[1])
manager = new_plugin_manager(discover=False)
register_plugin(manager, plugin, "probe")
for hook in DECLARATION_HOOKS:
    getattr(manager.hook, hook)()
print(json.dumps(sorted({m.split(".")[0] for m in sys.modules} & set(sys.argv[2:]))))
"""


def check_upstream_free(module_name: str) -> list[str]:
    """Importing the plugin and calling its hooks must import no upstream (fresh process)."""
    result = subprocess.run(
        [sys.executable, "-c", _IMPORT_PROBE, module_name, *UPSTREAM_MODULES],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if result.returncode != 0:
        return [f"importing {module_name} and calling its hooks failed:\n{result.stderr[-2000:]}"]
    imported = json.loads(result.stdout.strip().splitlines()[-1])
    return [
        f"importing {module_name} or calling its hooks imports {m!r}: move that import inside apply()/adapters"
        for m in imported
    ]


def check_registrations_idempotent(plugin: object, name: str, upstream: str = "verl") -> list[str]:
    """Apply every registration for ``upstream`` twice in this process; both must succeed.

    A registration deferred until its upstream module is imported
    (``bridges.import_hooks.run_after_import``) has registered nothing yet: the module is then
    imported (the deferred registration runs) and the registration applied twice more, now for real.
    """
    import importlib

    from reasonrl.bridges.import_hooks import pending_imports
    from reasonrl.manager import load_errors

    results, problems = _hook_results(plugin, name)
    for registration in results.get(f"reasonrl_{upstream}_registrations") or []:
        label = f"{registration.kind}:{registration.name}"
        waiting = set(pending_imports())
        for attempt in (1, 2):
            try:
                registration.apply()
            except Exception as exc:
                problems.append(f"{label} apply() #{attempt} raised {type(exc).__name__}: {exc}")
                break
        deferred = [module for module in pending_imports() if module not in waiting]
        if not deferred:
            continue
        reported = len(load_errors())  # a deferred registration reports its failure (the import goes on)
        try:
            for module in deferred:
                importlib.import_module(module)  # runs the deferred registration
            registration.apply()
            registration.apply()
        except Exception as exc:
            problems.append(
                f"{label} (deferred until {', '.join(deferred)} is imported) raised {type(exc).__name__}: {exc}"
            )
        problems += [
            f"{label}: {module} imported, its registration still pending"
            for module in deferred
            if module in pending_imports()
        ]
        problems += [f"{label}: {error.where}: {error.error}" for error in load_errors()[reported:]]
    return problems


def check_plugin(plugin: object, name: str, module_name: str | None = None) -> list[str]:
    """All contract checks that need no upstream: declarations and (given the module name)
    the no-upstream-import rule."""
    problems = check_declarations(plugin, name)
    module_name = module_name or getattr(plugin, "__name__", None)
    if module_name:
        problems += check_upstream_free(module_name)
    return problems


def installed_plugins() -> list[tuple[str, str]]:
    """``(entry-point name, module)`` of every installed reasonrl plugin."""
    from importlib.metadata import entry_points

    return [(ep.name, ep.value.split(":")[0]) for ep in entry_points(group="reasonrl.plugins")]


__all__ = [
    "check_declarations",
    "check_plugin",
    "check_registrations_idempotent",
    "check_upstream_free",
    "installed_plugins",
]
