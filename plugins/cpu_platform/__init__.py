"""Plugin ``cpu_platform``: a verl device platform for machines without an accelerator.

verl 0.9.1 resolves every device call through ``verl.plugin.platform`` and ships CUDA, NPU
and ROCm platforms only. This plugin registers a ``cpu`` platform there. It is never
auto-detected: a run selects it with ``VERL_PLATFORM=cpu`` (the ``cpu_tiny`` preset sets it
in every Ray worker), so GPU machines are unaffected.
"""

import importlib.util
import os

from reasonrl.contracts import PluginInfo, Registration
from reasonrl.hookspecs import hookimpl

PLATFORM_NAME = "cpu"


def _register_with_verl() -> None:
    from reasonrl.plugins.cpu_platform.verl_platform import register

    register(PLATFORM_NAME)


def installed(module: str) -> bool:
    """Whether ``module`` can be imported (a dotted name whose parent package is missing too: False)."""
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # find_spec imports the parents: `megatron` absent without the megatron extra
        return False


def _register_engines_with_verl() -> None:
    # Only in processes that run on this platform: importing verl's FSDP engine is heavy,
    # and GPU runs never need it.
    if os.environ.get("VERL_PLATFORM") != PLATFORM_NAME:
        return
    from reasonrl.bridges.import_hooks import register_engines_when_loaded

    def register() -> None:
        from reasonrl.plugins.cpu_platform.verl_platform import register_fsdp_engines

        register_fsdp_engines(PLATFORM_NAME)
        if installed("megatron.core") and installed("mbridge"):
            from reasonrl.plugins.cpu_platform.megatron_engine import register_megatron_engines

            register_megatron_engines(PLATFORM_NAME)

    register_engines_when_loaded(register)


def _register_checkpoint_engine() -> None:
    # verl's disaggregated weight sync (separate_async, fully_async) has accelerator engines only
    from reasonrl.bridges.import_hooks import register_adapter_when_loaded

    register_adapter_when_loaded("verl.checkpoint_engine.base", "reasonrl.plugins.cpu_platform.gloo_checkpoint_engine")


@hookimpl
def reasonrl_plugin_info() -> PluginInfo:
    return PluginInfo(
        name="cpu_platform",
        summary="verl device platform 'cpu' (select with VERL_PLATFORM=cpu) for CPU-only smoke runs",
        reports=(),
    )


@hookimpl
def reasonrl_verl_registrations() -> list[Registration]:
    return [
        Registration(
            upstream="verl",
            kind="platform",
            name=PLATFORM_NAME,
            apply=_register_with_verl,
            description="verl.plugin.platform.PlatformRegistry['cpu'] = PlatformCPU",
        ),
        Registration(
            upstream="verl",
            kind="engine",
            name="fsdp2@cpu",
            apply=_register_engines_with_verl,
            description="verl.workers.engine.EngineRegistry: verl's FSDP/FSDP2 engines for device 'cpu', and "
            "CpuMegatronEngineWithLMHead (verl's Megatron engine on the host) where megatron-core and mbridge are "
            "installed (when VERL_PLATFORM=cpu; right after verl.workers.engine is imported)",
        ),
        Registration(
            upstream="verl",
            kind="checkpoint_engine",
            name="gloo",
            apply=_register_checkpoint_engine,
            description="verl.checkpoint_engine.CheckpointEngineRegistry['gloo'] = GlooCheckpointEngine: weights "
            "from actor rank 0 to the update's rollout workers over gloo (actor_rollout_ref.rollout."
            "checkpoint_engine.backend=gloo); right after verl.checkpoint_engine.base is imported",
        ),
    ]


@hookimpl
def reasonrl_patches() -> list:
    # patches/cpu_platform/: the upstream patches only this plugin needs
    from reasonrl.patches.cpu_platform import shipped

    return shipped()
