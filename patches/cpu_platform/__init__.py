"""The cpu_platform plugin's patches: verl's process-group backend and vLLM's CPU build (weight
updates, speculative decoding's token expansion). Declared by the plugin's ``reasonrl_patches``
hook; the mechanism is :mod:`reasonrl.patching`, the table ``patches/README.md``."""

from __future__ import annotations

import importlib

#: Module names (inside this package) of the plugin's patches.
SHIPPED: tuple[str, ...] = (
    "verl_cpu_process_group",
    "verl_megatron_fp32",
    "megatron_host_device",
    "mbridge_host_device",
    "vllm_cpu_updatable_weights",
    "vllm_cpu_spec_decode_expand",
)


def shipped() -> list:
    return [importlib.import_module(f"{__name__}.{module}").PATCH for module in SHIPPED]
