"""Run a callback right after a given module is imported, in whichever process imports it.

Bridges use it to register with an upstream registry that lives in a module ``import verl``
does not load (verl's trainer registry, its reward-manager registry): the registration then
happens exactly where that registry is used, and processes that never import it pay nothing.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from typing import Callable


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs its callbacks, in the order they were added, right after module ``name`` has been
    imported (its loader's ``exec_module`` finished); then steps aside."""

    def __init__(self, name: str, callback: Callable[[], None]) -> None:
        self.name, self.callbacks = name, [callback]

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return spec
        execute = spec.loader.exec_module

        def exec_module(module):
            execute(module)
            for callback in self.callbacks:
                callback()

        spec.loader.exec_module = exec_module
        return spec


def run_after_import(name: str, callback: Callable[[], None]) -> None:
    """``callback()`` now if ``name`` is already imported, else right after its import (once;
    several callbacks may wait for one module, e.g. two plugins' agent loops)."""
    if name in sys.modules:
        callback()
        return
    waiting = [finder for finder in sys.meta_path if isinstance(finder, _AfterImport) and finder.name == name]
    if waiting:
        if callback not in waiting[0].callbacks:
            waiting[0].callbacks.append(callback)
    else:
        sys.meta_path.insert(0, _AfterImport(name, callback))


def still_importing(name: str) -> bool:
    """Whether module ``name`` is being imported right now (in ``sys.modules``, not yet executed):
    a callback fired from inside its own import must not use it yet."""
    loading = sys.modules.get(name)
    return loading is not None and getattr(getattr(loading, "__spec__", None), "_initializing", False)


def pending_imports() -> list[str]:
    """Modules whose import a callback still waits for (in this process)."""
    return [finder.name for finder in sys.meta_path if isinstance(finder, _AfterImport)]


#: verl's engine package: every engine registers itself with ``EngineRegistry`` on its import
#: (~3 s, megatron-core included), which only the processes that build an engine pay.
VERL_ENGINE_PACKAGE = "verl.workers.engine"


def register_engines_when_loaded(register: Callable[[], None]) -> None:
    """``register()`` (a plugin's ``EngineRegistry`` additions) right after verl's engine package
    is imported, before any lookup can happen — not in every process that imports verl."""
    run_after_import(VERL_ENGINE_PACKAGE, register)


def register_adapter_when_loaded(package: str, adapter_module: str, function: str = "register") -> None:
    """Register a plugin's adapter right after the upstream ``package`` it registers with is
    imported: import ``adapter_module`` and call its ``function()``.

    The adapter imports that package itself, so importing the adapter first (a user, a test)
    imports the package, which runs this callback while the adapter is still half-imported: then
    the callback leaves it alone and the adapter registers itself on its last line. An adapter
    refused by its version guard stays unregistered; a run selecting it stops at start-up."""
    import importlib

    def register() -> None:
        from reasonrl.patching import UnsupportedUpstreamVersion

        if still_importing(adapter_module):
            return
        try:
            module = importlib.import_module(adapter_module)
        except UnsupportedUpstreamVersion:
            return
        getattr(module, function)()

    run_after_import(package, register)


def register_agent_loop_when_loaded(adapter_module: str) -> None:
    """A verl agent loop, registered when verl's agent-loop package is imported (the agent-loop
    workers); see :func:`register_adapter_when_loaded`."""
    register_adapter_when_loaded("verl.experimental.agent_loop", adapter_module)
