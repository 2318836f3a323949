"""Plugin discovery: every object in the ``reasonrl.plugins`` entry-point group is a plugin.

Nothing fails silently here. A plugin that cannot be imported, that implements a hook the
contract does not know (``reasonrl_*`` typo, found by pluggy's ``check_pending``), or whose
hook raises, is recorded as a :class:`LoadError`, printed to stderr at once, and listed by
``reasonrl plugins``.

Two switches, read once when the process discovers its plugins, turn plugins off with pluggy's
own blocking (``set_blocked``: a blocked entry point is never imported): ``REASONRL_PLUGINS=a,b``
loads only the plugins named (unset: all; like vLLM's ``VLLM_PLUGINS``), and
``REASONRL_DISABLE_PLUGINS=a,b`` loads all but those (like pytest's ``-p no:a``). ``patches``
(the shipped upstream patches, each already guarded to act only where needed) is loaded unless
``REASONRL_DISABLE_PLUGINS`` names it: the allow list picks techniques, not upstream fixes. A
name in either switch that is no installed plugin is a :class:`LoadError`.
"""

from __future__ import annotations

import os
import sys
import traceback
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any, Iterator

import pluggy

from reasonrl import hookspecs
from reasonrl.hookspecs import ENTRY_POINT_GROUP, PROJECT

ALLOW_ENV = "REASONRL_PLUGINS"
DENY_ENV = "REASONRL_DISABLE_PLUGINS"
#: Entry points the allow list keeps whatever it names (the deny list can still block them).
ALWAYS_ALLOWED = frozenset({"patches"})


@dataclass(frozen=True)
class LoadError:
    """A plugin (or one of its hooks) that failed; ``where`` says which step."""

    plugin: str
    where: str
    error: str
    traceback: str = ""


@dataclass(frozen=True)
class Disabled:
    """A plugin a switch turned off: ``variable`` is the switch, ``value`` its setting."""

    plugin: str
    variable: str
    value: str
    #: set when the plugin is off because a plugin it requires is switched off (by this switch)
    requirement: str = ""

    @property
    def reason(self) -> str:
        """E.g. ``REASONRL_DISABLE_PLUGINS=sampling`` or ``REASONRL_PLUGINS=rewards does not name it``."""
        if self.requirement:
            switch = Disabled(self.requirement, self.variable, self.value)
            return f"it requires {self.requirement!r}, which is disabled: {switch.reason}"
        if not self.variable:
            return "blocked by code (pluggy's set_blocked)"
        return f"{self.variable}={self.value}" + (" does not name it" if self.variable == ALLOW_ENV else "")

    @property
    def remedy(self) -> str:
        """What turns the plugin back on."""
        if self.requirement:
            return Disabled(self.requirement, self.variable, self.value).remedy
        if self.variable == ALLOW_ENV:
            return f"add {self.plugin!r} to {ALLOW_ENV} (or unset it)"
        if self.variable == DENY_ENV:
            return f"remove {self.plugin!r} from {DENY_ENV} (or unset it)"
        return f"unblock {self.plugin!r}"


class PluginManager(pluggy.PluginManager):
    """pluggy's manager for the ``reasonrl`` project, plus why each blocked name is blocked."""

    def __init__(self) -> None:
        super().__init__(PROJECT)
        self.disabled: dict[str, Disabled] = {}

    def disable(self, switch: Disabled) -> None:
        """Block ``switch.plugin`` with pluggy's ``set_blocked``, remembering the switch."""
        self.set_blocked(switch.plugin)
        self.disabled[switch.plugin] = switch


_manager: PluginManager | None = None
_errors: list[LoadError] = []


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


def register_plugin(manager: pluggy.PluginManager, plugin: object, name: str) -> LoadError | None:
    """Register one plugin object and check it against the hook contract with pluggy's
    ``check_pending`` (a hook implementation no hookspec defines, e.g. a misspelt
    ``reasonrl_*`` name, unless marked ``optionalhook``); a plugin that fails is unregistered.
    Return the reported error, or None when it registered (or its name is blocked)."""
    error = None
    try:
        manager.register(plugin, name=name)
    except Exception as exc:  # pluggy.PluginValidationError (arguments), duplicate names
        error = LoadError(name, "register", f"{type(exc).__name__}: {exc}", traceback.format_exc())
    else:
        try:
            manager.check_pending()
        except pluggy.PluginValidationError as exc:
            if exc.plugin is not plugin:  # registered around this function: not this plugin's fault
                raise
            manager.unregister(plugin=plugin, name=name)
            error = LoadError(name, "contract", f"{exc}: the contract (reasonrl.hookspecs) defines no such hook")
    if error is not None:
        report(error)
    return error


def _listed(variable: str) -> list[str] | None:
    """The plugin names a switch lists; None when it is unset (set but empty: an empty list)."""
    value = os.environ.get(variable)
    return None if value is None else [name.strip() for name in value.split(",") if name.strip()]


def apply_switches(manager: PluginManager, installed: list[str]) -> None:
    """Block the ``installed`` entry-point names that ``REASONRL_PLUGINS`` leaves out or
    ``REASONRL_DISABLE_PLUGINS`` names; report each name a switch gives that is not installed."""
    allow, deny = _listed(ALLOW_ENV), _listed(DENY_ENV)
    known = sorted(set(installed))
    for variable, names in ((ALLOW_ENV, allow), (DENY_ENV, deny)):
        for name in names or ():
            if name not in known:
                report(
                    LoadError(
                        name,
                        variable,
                        f"{variable} names it, but no installed plugin has this name; installed: {known}",
                    )
                )
    for name in known:
        if deny is not None and name in deny:
            manager.disable(Disabled(name, DENY_ENV, os.environ[DENY_ENV]))
        elif allow is not None and name not in allow and name not in ALWAYS_ALLOWED:
            manager.disable(Disabled(name, ALLOW_ENV, os.environ[ALLOW_ENV]))


def new_plugin_manager(discover: bool = True) -> PluginManager:
    """A fresh manager with the hook specification, optionally filled from entry points
    (the switches ``REASONRL_PLUGINS`` / ``REASONRL_DISABLE_PLUGINS`` applied)."""
    manager = PluginManager()
    manager.add_hookspecs(hookspecs)
    if discover:
        points = entry_points(group=ENTRY_POINT_GROUP)
        apply_switches(manager, [point.name for point in points])
        for entry_point in points:
            if manager.is_blocked(entry_point.name) or manager.has_plugin(entry_point.name):
                continue  # switched off, or the same distribution seen twice on sys.path
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
        check_requirements(manager)
    return manager


def check_requirements(manager: pluggy.PluginManager) -> None:
    """A plugin whose ``PluginInfo.requires`` names a plugin that is not loaded (not installed,
    failed, or itself dropped for a missing requirement) is reported and unregistered: it would
    fail when it calls it. One whose requirements are only switched off is switched off too (a
    user's choice, not an error), with the switch named. Repeated until nothing more is dropped."""
    dropped = True
    while dropped:
        dropped = False
        loaded = {name for name, plugin in manager.list_name_plugin() if plugin is not None}
        for impl in manager.hook.reasonrl_plugin_info.get_hookimpls():
            name = manager.get_name(impl.plugin)
            try:
                requires = tuple(impl.function().requires)
            except Exception:  # a broken info hook is reported where the hook is called
                continue
            missing = [required for required in requires if required not in loaded]
            if missing:
                switched = disabled_plugins(manager)
                if all(m in switched and switched[m].variable for m in missing):
                    off = switched[missing[0]]
                    manager.unregister(impl.plugin)
                    manager.disable(Disabled(name, off.variable, off.value, off.requirement or off.plugin))
                    dropped = True
                    continue
                why = "; ".join(
                    f"{m!r} is disabled ({switched[m].reason})" if m in switched else f"{m!r} is not loaded"
                    for m in missing
                )
                report(LoadError(name, "requires", f"needs plugin(s) {missing}: {why}"))
                manager.unregister(impl.plugin)
                dropped = True


def get_plugin_manager() -> PluginManager:
    """The process-wide manager, discovered once."""
    global _manager
    if _manager is None:
        _manager = new_plugin_manager()
    return _manager


def disabled_plugins(manager: pluggy.PluginManager | None = None) -> dict[str, Disabled]:
    """The plugins blocked in ``manager`` (by default the process's) and the switch that did it."""
    manager = manager or get_plugin_manager()
    switches = getattr(manager, "disabled", {})
    return {
        name: switches.get(name, Disabled(name, "", ""))
        for name, plugin in manager.list_name_plugin()
        if plugin is None
    }


def describe_disabled(disabled: dict[str, Disabled]) -> str:
    """The disabled plugins grouped by switch, e.g. ``mtp, sampling (REASONRL_DISABLE_PLUGINS=mtp,sampling)``."""
    by_switch: dict[str, list[str]] = {}
    for name, switch in sorted(disabled.items()):
        setting = f"{switch.variable}={switch.value}" if switch.variable else "pluggy's set_blocked, by code"
        setting = f"not in {setting}" if switch.variable == ALLOW_ENV else setting
        by_switch.setdefault(setting, []).append(name)
    return "; ".join(f"{', '.join(names)} ({setting})" for setting, names in by_switch.items())


def call_each(
    hook_name: str,
    manager: pluggy.PluginManager | None = None,
    reraise: tuple[type[BaseException], ...] = (),
    **kwargs: Any,
) -> Iterator[tuple[str, Any]]:
    """Call ``hook_name`` on each plugin separately, yielding ``(plugin name, result)``.

    pluggy's ``manager.hook.<name>()`` is not used because a plugin whose hook raises would abort
    the call for all the others, and its result list would not say which plugin gave what.
    Here a plugin whose hook raises is reported and skipped (except for the exception types in
    ``reraise``, which are the hook's way of answering, e.g. a ``ConfigError``), and every
    result stays attributed to its plugin.
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
