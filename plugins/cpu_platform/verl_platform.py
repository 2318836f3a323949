"""verl adapter: ``PlatformCPU``, a ``verl.plugin.platform.PlatformBase`` for CPU-only hosts.

Ray places verl's workers on logical GPUs (``ray.init(num_gpus=…)``), so the Ray resource
stays ``GPU`` and the device under it is the CPU. Collectives use gloo; there is no IPC
weight sharing, no allocator, no profiler ranges and no CUDA runtime.
"""

from __future__ import annotations

from contextlib import contextmanager
from types import ModuleType
from typing import Any

import torch
from verl.plugin.platform import PlatformBase, PlatformRegistry


class PlatformCPU(PlatformBase):
    """The host CPU as verl's single device (index 0)."""

    @property
    def device_name(self) -> str:
        return "cpu"

    @property
    def vendor_name(self) -> str:
        return "cpu"

    @property
    def device_module(self) -> ModuleType:
        from reasonrl.plugins.cpu_platform.device_module import CPU_DEVICE_MODULE

        return CPU_DEVICE_MODULE

    def is_available(self) -> bool:
        return True

    def is_platform_available(self, use_smi_check: bool = False) -> bool:
        # Never auto-detected: only an explicit VERL_PLATFORM=cpu selects this platform.
        return False

    def current_device(self) -> torch.device:
        # verl passes this to ``tensor.to(...)``/``module.to(...)``; a bare ``0`` there means
        # "accelerator 0" to torch and fails on a machine without one.
        return torch.device("cpu")

    def get_device_uuid(self, device_id: Any) -> str:
        return f"{self.ray_resource_name()}-cpu"

    def device_count(self) -> int:
        return 1

    def set_device(self, device_index: int) -> None:
        if device_index not in (0, None):
            raise ValueError(f"the cpu platform has one device (0), got {device_index}")

    def synchronize(self, device_index: int | None = None) -> None:
        return None

    def manual_seed(self, seed: int) -> None:
        torch.manual_seed(seed)

    def manual_seed_all(self, seed: int) -> None:
        torch.manual_seed(seed)

    def set_allocator_settings(self, settings: str) -> None:
        return None

    def empty_cache(self) -> None:
        return None

    def get_device_capability(self, device_index: int = 0) -> tuple[int | None, int | None]:
        return (None, None)

    def communication_backend_name(self) -> str:
        return "gloo"

    def visible_devices_envvar(self) -> str:
        # Ray sets this for the logical GPUs it hands to a worker.
        return "CUDA_VISIBLE_DEVICES"

    @contextmanager
    def nvtx_range(self, msg: str):
        yield

    def profiler_start(self) -> None:
        return None

    def profiler_stop(self) -> None:
        return None

    def ray_resource_name(self) -> str:
        return "GPU"

    def ray_noset_envvars(self) -> list[str]:
        return ["RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES"]

    def is_ipc_supported(self) -> bool:
        return False

    def cudart(self) -> Any:
        return None


def register(name: str) -> type[PlatformBase]:
    """Register :class:`PlatformCPU` under ``name``; registering again is a no-op."""
    if PlatformRegistry.get(name) is not PlatformCPU:
        PlatformRegistry.register(platform=name)(PlatformCPU)
    return PlatformCPU


#: verl's FSDP engines (registered by verl for cuda/npu only) that also run on the CPU.
FSDP_ENGINES = {"language_model": "FSDPEngineWithLMHead", "value_model": "FSDPEngineWithValueHead"}


def register_fsdp_engines(device: str) -> None:
    """Make verl's own FSDP/FSDP2 engines selectable on ``device`` (``EngineRegistry``).

    The engines are device-agnostic torch FSDP2 code; verl's registry keys them by device
    name, so without this a cpu run stops with "No engine registered for device='cpu'".
    Idempotent.
    """
    from verl.workers.engine.base import EngineRegistry
    from verl.workers.engine.fsdp import transformer_impl

    from reasonrl.compat.verl import engine_registered

    for model_type, class_name in FSDP_ENGINES.items():
        engine_class = getattr(transformer_impl, class_name)
        for backend in ("fsdp", "fsdp2"):
            if engine_registered(model_type, backend, device) is engine_class:
                continue
            EngineRegistry.register(model_type=model_type, backend=backend, device=device)(engine_class)
