"""Kimi's per-iteration optimizer reset (§2.3.2) on verl's Megatron engine.

verl's FSDP engines build the actor's optimizer from a class path (``optim.optimizer_impl``), which
the recipe points at :class:`~reasonrl.plugins.objectives.optimizer.IterationResetAdamW`. verl's
Megatron engine has no such extension point: ``MegatronEngine._build_optimizer`` always builds
megatron-core's optimizer. Where the actor's ``optim`` names this plugin's optimizer (``optimizer_impl``, carried on Megatron by
:class:`~reasonrl.plugins.objectives.megatron_optim_config.ResettingMcoreOptimizerConfig`), that build is
wrapped: megatron-core builds its ``adam`` (torch's AdamW underneath: decoupled weight decay, the
same update) from the same learning rate, weight decay and clipping, and each torch optimizer inside
it then resets every ``updates_per_iteration`` steps, as ``IterationResetAdamW`` does on FSDP.
"""

from __future__ import annotations

import functools
from typing import Any

import torch
from verl.workers.engine.megatron import transformer_impl

from reasonrl.plugins.objectives import OPTIMIZER_MODULE
from reasonrl.plugins.objectives.optimizer import IterationResetAdamW, reset_each_iteration


class _AdamView:
    """The actor's optim config as megatron-core reads it: ``adam``, without reasonrl's keyword."""

    def __init__(self, optim: Any, overrides: dict) -> None:
        self._optim, self._overrides = optim, overrides

    optimizer = "adam"

    def __getattr__(self, name: str) -> Any:
        return getattr(self._optim, name)

    def get(self, name: str, default: Any = None) -> Any:
        if name == "override_optimizer_config":
            return self._overrides
        return self._optim.get(name, default)


def resetting_optimizer_config(optim: Any) -> tuple[Any, int] | None:
    """``(config megatron can build, updates per iteration)`` when ``optim`` asks for the reset, else None."""
    if getattr(optim, "optimizer_impl", None) != OPTIMIZER_MODULE or optim.optimizer != IterationResetAdamW.__name__:
        return None
    overrides = dict(optim.get("override_optimizer_config") or {})
    updates = overrides.pop("updates_per_iteration")
    return _AdamView(optim, overrides), int(updates)


def _wrap(original):
    @functools.wraps(original)
    def _build_optimizer(self):
        resetting = resetting_optimizer_config(self.optimizer_config)
        if resetting is None:
            return original(self)
        from verl.utils.megatron.optimizer import get_megatron_optimizer, init_megatron_optim_config

        view, updates = resetting
        config = init_megatron_optim_config(
            view,
            use_distributed_optimizer=self.engine_config.use_distributed_optimizer,
            fp16=self.param_dtype == torch.float16,
            bf16=self.param_dtype == torch.bfloat16,
        )
        optimizer = get_megatron_optimizer(model=self.module, config=config)
        transformer_impl.register_megatron_training_hooks(self.module, optimizer)
        inner = [chained.optimizer for chained in getattr(optimizer, "chained_optimizers", [optimizer])]
        for torch_optimizer in inner:
            reset_each_iteration(torch_optimizer, updates)
        print(
            f"[reasonrl] Kimi's optimizer reset on megatron-core's adam: every {updates} updates "
            f"({len(inner)} x {type(inner[0]).__name__})",
            flush=True,
        )
        return optimizer

    _build_optimizer.__reasonrl_adapter__ = __name__
    return _build_optimizer


def register() -> None:
    """Wrap ``MegatronEngine._build_optimizer`` once (idempotent)."""
    engine = transformer_impl.MegatronEngine
    if getattr(engine._build_optimizer, "__reasonrl_adapter__", None) != __name__:
        engine._build_optimizer = _wrap(engine._build_optimizer)


register()  # see reasonrl.bridges.import_hooks.register_adapter_when_loaded
