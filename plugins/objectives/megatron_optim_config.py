"""verl's Megatron optimizer config with FSDP's optimizer class path (``optimizer_impl``), so
that one option file asks for Kimi's per-iteration reset on both engines; read by
:mod:`reasonrl.plugins.objectives.verl_megatron_optimizer`."""

from __future__ import annotations

from dataclasses import dataclass

from verl.workers.config.optimizer import McoreOptimizerConfig


@dataclass
class ResettingMcoreOptimizerConfig(McoreOptimizerConfig):
    """``McoreOptimizerConfig`` plus ``optimizer_impl`` (module of ``optimizer``, as on FSDP)."""

    optimizer_impl: str = "torch.optim"
