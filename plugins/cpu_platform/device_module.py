"""``torch.cpu`` completed with the CUDA-style calls verl makes on its device module.

verl calls ``get_torch_device().<fn>`` (memory statistics, ``empty_cache``, RNG state,
``ipc_collect`` …) assuming ``torch.cuda``'s surface; ``torch.cpu`` lacks most of it. This
module answers them for the host: memory figures are the process's resident set size
(peak: the OS's high-water mark), ``mem_get_info`` is the machine's available/total RAM,
the rest are no-ops or the global RNG. Everything else is ``torch.cpu``'s own.
"""

from __future__ import annotations

import resource
import sys
from types import ModuleType
from typing import Any

import psutil
import torch


def _rss() -> int:
    return psutil.Process().memory_info().rss


def _peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


class CpuDeviceModule(ModuleType):
    """Module-like object: ``torch.cpu`` plus CUDA-style memory, cache and RNG calls."""

    def __init__(self) -> None:
        super().__init__("reasonrl_cpu_device")

    def __getattr__(self, name: str) -> Any:
        return getattr(torch.cpu, name)

    # memory statistics
    def memory_allocated(self, device: Any = None) -> int:
        return _rss()

    def memory_reserved(self, device: Any = None) -> int:
        return _rss()

    def max_memory_allocated(self, device: Any = None) -> int:
        return _peak_rss()

    def max_memory_reserved(self, device: Any = None) -> int:
        return _peak_rss()

    def mem_get_info(self, device: Any = None) -> tuple[int, int]:
        memory = psutil.virtual_memory()
        return memory.available, memory.total

    def memory_stats(self, device: Any = None) -> dict[str, int]:
        return {"allocated_bytes.all.current": _rss(), "allocated_bytes.all.peak": _peak_rss()}

    def reset_peak_memory_stats(self, device: Any = None) -> None:
        return None

    def reset_accumulated_memory_stats(self, device: Any = None) -> None:
        return None

    # caches and IPC: the host allocator has none
    def empty_cache(self) -> None:
        return None

    def ipc_collect(self) -> None:
        return None

    # RNG: the CPU generator is torch's global one
    def get_rng_state(self, device: Any = None) -> torch.Tensor:
        return torch.get_rng_state()

    def set_rng_state(self, state: torch.Tensor, device: Any = None) -> None:
        torch.set_rng_state(state)

    def manual_seed(self, seed: int) -> None:
        torch.manual_seed(seed)

    def manual_seed_all(self, seed: int) -> None:
        torch.manual_seed(seed)

    # device identity
    def get_device_name(self, device: Any = None) -> str:
        return "cpu"

    def get_device_properties(self, device: Any = None) -> Any:
        from types import SimpleNamespace

        return SimpleNamespace(
            name="cpu", total_memory=psutil.virtual_memory().total, multi_processor_count=psutil.cpu_count()
        )


CPU_DEVICE_MODULE = CpuDeviceModule()
sys.modules.setdefault(CPU_DEVICE_MODULE.__name__, CPU_DEVICE_MODULE)
