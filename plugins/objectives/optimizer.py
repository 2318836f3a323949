"""AdamW whose state is cleared at the start of every RL iteration (Kimi k1.5 §2.3.2: the
reference policy π_i of mirror descent changes every iteration, so "the optimizer is reset at
the start of each iteration").

verl builds the actor's optimizer from a class path (``actor.optim.optimizer_impl`` = this
module, ``actor.optim.optimizer`` = ``IterationResetAdamW``, keyword arguments from
``actor.optim.override_optimizer_config``): its own extension point, on every engine that
uses verl's ``build_optimizer`` (FSDP / FSDP2). One iteration makes ``updates_per_iteration``
optimizer steps (``train_batch_size · ppo_epochs / ppo_mini_batch_size``); AdamW's own per-
parameter ``step`` counter says how many were made since the last reset, so the reset needs
no state of its own and lands on the same step after a checkpoint restore. A step verl skips
(non-finite gradient norm) is not counted: that iteration's reset comes one update later.
"""

from __future__ import annotations

import torch


class IterationReset:
    """Mixin for a ``torch.optim.Optimizer``: forget moments and step count every
    ``updates_per_iteration`` steps, before the first step of the next iteration."""

    updates_per_iteration: int
    resets: int

    def updates_since_reset(self) -> int:
        for state in self.state.values():
            if "step" in state:
                return int(state["step"])
        return 0

    @torch.no_grad()
    def step(self, closure=None):
        if self.updates_since_reset() >= self.updates_per_iteration:
            self.state.clear()
            self.resets += 1
        return super().step(closure)


def _check(updates: int) -> int:
    if int(updates) < 1:
        raise ValueError(f"updates_per_iteration must be >= 1, got {updates}")
    return int(updates)


class IterationResetAdamW(IterationReset, torch.optim.AdamW):
    """``torch.optim.AdamW`` that resets every ``updates_per_iteration`` steps (verl's FSDP engines
    build it from ``optim.optimizer_impl``)."""

    def __init__(self, params, updates_per_iteration: int, **kwargs):
        updates = _check(updates_per_iteration)
        super().__init__(params, **kwargs)
        self.updates_per_iteration = updates
        self.resets = 0


def reset_each_iteration(optimizer: torch.optim.Optimizer, updates_per_iteration: int) -> torch.optim.Optimizer:
    """Make a built torch optimizer reset like :class:`IterationResetAdamW` (same class, plus the
    reset): for optimizers a framework builds itself, e.g. megatron-core's inside verl's Megatron engine."""
    updates = _check(updates_per_iteration)
    base = type(optimizer)
    if not isinstance(optimizer, IterationReset):
        optimizer.__class__ = type(f"IterationReset{base.__name__}", (IterationReset, base), {})
        optimizer.resets = 0
    optimizer.updates_per_iteration = updates
    return optimizer


def updates_per_iteration(train_batch_size: int, ppo_mini_batch_size: int, ppo_epochs: int = 1) -> int:
    """Optimizer steps of one verl training step: its prompts in mini-batches, ``ppo_epochs`` times."""
    train_batch_size, ppo_mini_batch_size, ppo_epochs = int(train_batch_size), int(ppo_mini_batch_size), int(ppo_epochs)
    if ppo_mini_batch_size < 1 or train_batch_size % ppo_mini_batch_size:
        raise ValueError(
            f"data.train_batch_size {train_batch_size} is not a multiple of actor.ppo_mini_batch_size {ppo_mini_batch_size}"
        )
    return train_batch_size // ppo_mini_batch_size * ppo_epochs


#: verl's optimizer config class per actor strategy, for the reset: FSDP's own (it has the class
#: path), or on Megatron verl's with the class path added (the plugin's Megatron adapter reads it).
OPTIMIZER_CONFIG_CLASSES = {
    "fsdp": "verl.workers.config.FSDPOptimizerConfig",
    "fsdp2": "verl.workers.config.FSDPOptimizerConfig",
    "megatron": "reasonrl.plugins.objectives.megatron_optim_config.ResettingMcoreOptimizerConfig",
}


def optimizer_config_class(strategy: str) -> str:
    """The ``_target_`` of the actor's ``optim`` that carries the reset on ``strategy``'s engine."""
    try:
        return OPTIMIZER_CONFIG_CLASSES[str(strategy)]
    except KeyError:
        raise ValueError(
            f"the per-iteration optimizer reset is built on verl's FSDP and Megatron engines "
            f"({', '.join(OPTIMIZER_CONFIG_CLASSES)}), not on actor strategy {strategy!r}"
        ) from None
