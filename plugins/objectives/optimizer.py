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


class IterationResetAdamW(torch.optim.AdamW):
    """``torch.optim.AdamW`` that forgets its moments and step count every
    ``updates_per_iteration`` steps, before the first step of the next iteration."""

    def __init__(self, params, updates_per_iteration: int, **kwargs):
        if int(updates_per_iteration) < 1:
            raise ValueError(f"updates_per_iteration must be >= 1, got {updates_per_iteration}")
        super().__init__(params, **kwargs)
        self.updates_per_iteration = int(updates_per_iteration)
        self.resets = 0

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


def updates_per_iteration(train_batch_size: int, ppo_mini_batch_size: int, ppo_epochs: int = 1) -> int:
    """Optimizer steps of one verl training step: its prompts in mini-batches, ``ppo_epochs`` times."""
    train_batch_size, ppo_mini_batch_size, ppo_epochs = int(train_batch_size), int(ppo_mini_batch_size), int(ppo_epochs)
    if ppo_mini_batch_size < 1 or train_batch_size % ppo_mini_batch_size:
        raise ValueError(
            f"data.train_batch_size {train_batch_size} is not a multiple of actor.ppo_mini_batch_size {ppo_mini_batch_size}"
        )
    return train_batch_size // ppo_mini_batch_size * ppo_epochs
