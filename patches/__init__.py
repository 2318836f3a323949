"""Shipped patches to upstream code (see :mod:`reasonrl.patching` for the mechanism).

One module per patch, each defining a :class:`~reasonrl.patching.Patch` named ``PATCH``. A
patch is added only when a change is needed that no upstream extension point allows. A patch
that one plugin needs lives in ``patches/<plugin>/`` and is declared by that plugin's
``reasonrl_patches`` hook (``cpu_platform``: six, ``mtp``: two), so it leaves with the plugin;
this package's own :data:`SHIPPED` holds the core's: verl 0.9.1's abort path on vLLM 0.32, which
every trainer mode that aborts requests uses, and verl's ``separate_async`` with standalone
replicas only (``patches/README.md``).
"""

from __future__ import annotations

import importlib

from reasonrl.contracts import PluginInfo
from reasonrl.hookspecs import hookimpl
from reasonrl.patching import Patch

#: Module names (inside this package) of the shipped patches.
SHIPPED: tuple[str, ...] = ("vllm_pause_generation_mode", "verl_separate_async_standalone")


@hookimpl
def reasonrl_plugin_info() -> PluginInfo:
    return PluginInfo(
        name="patches",
        summary="the core's version-guarded upstream patches (verl 0.9.1's abort path on vLLM 0.32, separate_async "
        "with standalone replicas only); plugins declare their own",
    )


@hookimpl
def reasonrl_patches() -> list[Patch]:
    return [importlib.import_module(f"{__name__}.{module}").PATCH for module in SHIPPED]
