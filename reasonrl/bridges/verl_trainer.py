"""verl trainer modes ``reasonrl_sync``, ``reasonrl_colocate_async`` and ``reasonrl_separate_async``:
verl's synchronous trainer, its colocated and its disaggregated asynchronous trainer, each plus
plugin callbacks.

Selected with ``trainer.v1.trainer_mode=reasonrl_sync`` (what the plugins' options set),
``reasonrl_colocate_async`` or ``reasonrl_separate_async`` (verl's own trainer registry). Each behaves
exactly as verl's ``sync`` / ``colocate_async`` / ``separate_async`` trainer — verl branches on the mode's *name* in
several places, so the instance reports verl's name — and calls every
:class:`~reasonrl.contracts.TrainerCallback` that plugins declare and the run needs (one mixin,
``verl_trainer_classes.ReasonrlTrainerMixin``).
"""

from __future__ import annotations

import os
from typing import Any

from reasonrl.config import REASONRL_ASYNC_TRAINER_MODE, REASONRL_SEPARATE_ASYNC_TRAINER_MODE, REASONRL_TRAINER_MODE


def build_callbacks(config: Any) -> list[tuple[str, Any]]:
    """``(name, callback object)`` for every declared callback whose ``build`` accepts the run; each
    object is a :class:`reasonrl.callbacks.StepCallback` (the trainer calls its methods, never probes)."""
    from reasonrl.callbacks import StepCallback
    from reasonrl.manager import call_each

    built = []
    for plugin, callbacks in call_each("reasonrl_trainer_callbacks"):
        for callback in callbacks:
            instance = callback.build(config)
            if instance is None:
                continue
            if not isinstance(instance, StepCallback):
                raise TypeError(
                    f"plugin {plugin!r}: trainer callback {callback.name!r} built a {type(instance).__name__}, "
                    "not a reasonrl.callbacks.StepCallback (subclass it: its methods are no-ops by default)"
                )
            built.append((callback.name, instance))
    return built


def register() -> None:
    """Add reasonrl's trainer modes to verl's trainer registry (idempotent)."""
    from verl.trainer.ppo.v1.trainer_base import TRAINER_REGISTRY, register_trainer

    from reasonrl.bridges.verl_trainer_classes import (
        ReasonrlColocateAsyncTrainer,
        ReasonrlSeparateAsyncTrainer,
        ReasonrlSyncTrainer,
    )

    modes = (
        (REASONRL_TRAINER_MODE, ReasonrlSyncTrainer),
        (REASONRL_ASYNC_TRAINER_MODE, ReasonrlColocateAsyncTrainer),
        (REASONRL_SEPARATE_ASYNC_TRAINER_MODE, ReasonrlSeparateAsyncTrainer),
    )
    for mode, trainer in modes:
        if TRAINER_REGISTRY.get(mode) is not trainer:
            register_trainer(mode)(trainer)


#: The package whose import makes verl's trainer registry usable.
TRAINERS_PACKAGE = "verl.trainer.ppo.v1"


def register_when_imported() -> None:
    """Register reasonrl's trainer modes as soon as verl's trainer package is imported — in verl's
    TaskRunner, the process that looks trainers up. Processes that never import it
    (workers, vLLM, reward loop) skip the ~1.5 s import of verl's trainer modules."""
    from reasonrl.bridges.import_hooks import run_after_import

    run_after_import(TRAINERS_PACKAGE, register)


def single_prompt_source(callbacks: list[tuple[str, Any]]) -> tuple[str | None, Any]:
    """``(name, callback)`` of the one :class:`~reasonrl.callbacks.PromptSource` of the run, or
    ``(None, None)``: verl's dataloader."""
    from reasonrl.callbacks import PromptSource, single

    return single(callbacks, PromptSource) or (None, None)


def callback_state_path(checkpoint_folder: str, name: str) -> str:
    """Where a callback's state lives inside verl's ``global_step_<n>`` folder."""
    return os.path.join(checkpoint_folder, "reasonrl", f"{name}.npz")
