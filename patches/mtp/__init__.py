"""The mtp plugin's patches: vLLM's speculative-decoding proposer hands the first pass's sample
indices to reasonrl's multi-layer drafter; mbridge's MiMo bridge orders the MTP input projection's
halves as megatron-core does. Declared by the plugin's ``reasonrl_patches`` hook;
the mechanism is :mod:`reasonrl.patching`, the table ``patches/README.md``."""

from __future__ import annotations

import importlib

#: Module names (inside this package) of the plugin's patches.
SHIPPED: tuple[str, ...] = ("vllm_mtp_first_pass", "mbridge_mimo_input_proj")


def shipped() -> list:
    return [importlib.import_module(f"{__name__}.{module}").PATCH for module in SHIPPED]
