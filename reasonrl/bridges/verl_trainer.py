"""verl trainer mode ``reasonrl_sync``: verl's synchronous trainer plus plugin callbacks.

Selected with ``trainer.v1.trainer_mode=reasonrl_sync`` (verl's own trainer registry).
It behaves exactly as verl's ``sync`` trainer — verl branches on the mode's *name* in
several places, so the instance reports ``sync`` — and calls every
:class:`~reasonrl.contracts.TrainerCallback` that plugins declare and the run needs.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from typing import Any

TRAINER_MODE = "reasonrl_sync"


def build_callbacks(config: Any) -> list[tuple[str, Any]]:
    """``(name, callback object)`` for every declared callback whose ``build`` accepts the run."""
    from reasonrl.manager import call_each

    built = []
    for _plugin, callbacks in call_each("reasonrl_trainer_callbacks"):
        for callback in callbacks:
            instance = callback.build(config)
            if instance is not None:
                built.append((callback.name, instance))
    return built


def register() -> None:
    """Add ``reasonrl_sync`` to verl's trainer registry (idempotent)."""
    from verl.trainer.ppo.v1.trainer_base import TRAINER_REGISTRY, register_trainer

    from reasonrl.bridges.verl_sync_trainer import ReasonrlSyncTrainer

    if TRAINER_REGISTRY.get(TRAINER_MODE) is not ReasonrlSyncTrainer:
        register_trainer(TRAINER_MODE)(ReasonrlSyncTrainer)


#: The package whose import makes verl's trainer registry usable.
TRAINERS_PACKAGE = "verl.trainer.ppo.v1"


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs ``callback`` right after module ``name`` has been imported (its loader's
    ``exec_module`` finished), in whichever process imports it; then steps aside."""

    def __init__(self, name: str, callback) -> None:
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


def register_when_imported() -> None:
    """Register ``reasonrl_sync`` as soon as verl's trainer package is imported — in verl's
    TaskRunner, the process that looks trainers up. Processes that never import it
    (workers, vLLM, reward loop) skip the ~1.5 s import of verl's trainer modules."""
    if TRAINERS_PACKAGE in sys.modules:
        register()
    elif not any(isinstance(finder, _AfterImport) for finder in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport(TRAINERS_PACKAGE, register))
