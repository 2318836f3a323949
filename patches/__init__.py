"""Shipped patches to upstream code (see :mod:`reasonrl.patching` for the mechanism).

One module per patch, each defining a :class:`~reasonrl.patching.Patch` named ``PATCH``
and listed in :data:`SHIPPED`. A patch is added only when a plugin needs a change that no
upstream extension point allows. Five ship: three for verl's/vLLM's CPU platform, one for the
MTP drafter, one for verl's abort path on vLLM 0.32 (``patches/README.md``).
"""

from __future__ import annotations

import importlib

from reasonrl.contracts import PluginInfo
from reasonrl.hookspecs import hookimpl
from reasonrl.patching import Patch

#: Module names (inside this package) of the shipped patches.
SHIPPED: tuple[str, ...] = (
    "verl_cpu_process_group",
    "vllm_cpu_updatable_weights",
    "vllm_mtp_first_pass",
    "vllm_cpu_spec_decode_expand",
    "vllm_pause_generation_mode",
)


@hookimpl
def reasonrl_plugin_info() -> PluginInfo:
    return PluginInfo(name="patches", summary="version-guarded upstream patches shipped with reasonrl")


@hookimpl
def reasonrl_patches() -> list[Patch]:
    return [importlib.import_module(f"{__name__}.{module}").PATCH for module in SHIPPED]
