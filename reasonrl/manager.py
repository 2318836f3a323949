"""Plugin discovery: every object in the ``reasonrl.plugins`` entry-point group is a plugin.

Nothing fails silently here. A plugin that cannot be imported, that implements a hook the
contract does not know (``reasonrl_*`` typo), or whose hook raises, is recorded as a
:class:`LoadError`, printed to stderr at once, and listed by ``reasonrl plugins``.
"""

from __future__ import annotations

import sys
import traceback
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any, Iterator

import pluggy

from reasonrl import hookspecs
from reasonrl.hookspecs import ENTRY_POINT_GROUP, PROJECT


@dataclass(frozen=True)
class LoadError:
    """A plugin (or one of its hooks) that failed; ``where`` says which step."""

    plugin: str
    where: str
    error: str
    traceback: str = ""


_manager: pluggy.PluginManager | None = None
_errors: list[LoadError] = []
_HOOK_NAMES = frozenset(name for name in dir(hookspecs) if name.startswith(f"{PROJECT}_"))


def report(error: LoadError) -> None:
    """Record a failure and print it where a person will see it (verl logs plugin errors
    only at debug level, so the bridges must not rely on logging configuration)."""
    if error in _errors:
        return
    _errors.append(error)
    print(f"reasonrl: ERROR in plugin {error.plugin!r} ({error.where}): {error.error}", file=sys.stderr, flush=True)


def load_errors() -> list[LoadError]:
    """Every failure recorded in this process so far."""
    get_plugin_manager()
    return list(_errors)


def _unknown_hooks(plugin: object) -> list[str]:
    return sorted(
        name
        for name in dir(plugin)
        if name.startswith(f"{PROJECT}_") and name not in _HOOK_NAMES and callable(getattr(plugin, name))
    )


def register_plugin(manager: pluggy.PluginManager, plugin: object, name: str) -> LoadError | None:
    """Register one plugin object after checking it against the hook contract; return the
    reported error, or None when it registered."""
    unknown = _unknown_hooks(plugin)
    error = None
    if unknown:
        error = LoadError(name, "contract", f"implements hooks the contract does not define: {unknown}")
    else:
        try:
            manager.register(plugin, name=name)
        except Exception as exc:  # pluggy.PluginValidationError, duplicate names
            error = LoadError(name, "register", f"{type(exc).__name__}: {exc}", traceback.format_exc())
    if error is not None:
        report(error)
    return error


def new_plugin_manager(discover: bool = True) -> pluggy.PluginManager:
    """A fresh manager with the hook specification, optionally filled from entry points."""
    manager = pluggy.PluginManager(PROJECT)
    manager.add_hookspecs(hookspecs)
    if discover:
        for entry_point in entry_points(group=ENTRY_POINT_GROUP):
            if manager.has_plugin(entry_point.name):
                continue  # the same distribution seen twice on sys.path
            try:
                plugin = entry_point.load()
            except Exception as exc:
                report(
                    LoadError(
                        entry_point.name,
                        f"import {entry_point.value}",
                        f"{type(exc).__name__}: {exc}",
                        traceback.format_exc(),
                    )
                )
                continue
            register_plugin(manager, plugin, entry_point.name)
    return manager


def get_plugin_manager() -> pluggy.PluginManager:
    """The process-wide manager, discovered once."""
    global _manager
    if _manager is None:
        _manager = new_plugin_manager()
    return _manager


def call_each(
    hook_name: str,
    manager: pluggy.PluginManager | None = None,
    reraise: tuple[type[BaseException], ...] = (),
    **kwargs: Any,
) -> Iterator[tuple[str, Any]]:
    """Call ``hook_name`` on each plugin separately, yielding ``(plugin name, result)``.

    Unlike ``manager.hook.<name>()``, a plugin whose hook raises is reported and skipped
    instead of aborting the others (except for the exception types in ``reraise``, which
    are the hook's way of answering, e.g. a ``ConfigError``), and every result stays
    attributed to its plugin.
    """
    manager = manager or get_plugin_manager()
    hook = getattr(manager.hook, hook_name)
    for impl in hook.get_hookimpls():  # registration order
        plugin_name = manager.get_name(impl.plugin) or repr(impl.plugin)
        try:
            result = impl.function(*(kwargs[arg] for arg in impl.argnames))
        except reraise:
            raise
        except Exception as exc:
            report(LoadError(plugin_name, hook_name, f"{type(exc).__name__}: {exc}", traceback.format_exc()))
            continue
        if result is not None:
            yield plugin_name, result
