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
    """Runs ``callback`` right after module ``name`` has been imported (its loader's
    ``exec_module`` finished); then steps aside."""

    def __init__(self, name: str, callback: Callable[[], None]) -> None:
        self.name, self.callback = name, callback

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
            self.callback()

        spec.loader.exec_module = exec_module
        return spec


def run_after_import(name: str, callback: Callable[[], None]) -> None:
    """``callback()`` now if ``name`` is already imported, else right after its import (once)."""
    if name in sys.modules:
        callback()
    elif not any(isinstance(finder, _AfterImport) and finder.name == name for finder in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport(name, callback))


def pending_imports() -> list[str]:
    """Modules whose import a callback still waits for (in this process)."""
    return [finder.name for finder in sys.meta_path if isinstance(finder, _AfterImport)]
