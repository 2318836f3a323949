"""megatron-core 0.16.1 allocates on CUDA by literal: ``device="cuda"``, ``torch.cuda.current_device()``,
``torch.cuda.synchronize()`` and one ``'torch.cuda.FloatTensor'`` type check, with no device argument.
On the cpu platform (verl's Megatron engine in a CPU worker) those tensors belong in host memory.

Each module below gets a ``torch`` whose CUDA device means the host; the rest of torch is unchanged,
and nothing outside these modules sees it. Sites (megatron-core 0.16.1):

* ``pipeline_parallel/schedules.py:596,983,2138`` — token count of every forward-backward pass;
* ``distributed/param_and_grad_buffer.py:783,800,806`` — DDP's parameter and gradient buffers;
* ``utils.py:631,1207`` — the global memory buffer (local attention's scores) and the local L2 norm;
* ``optimizer/optimizer.py:907`` — ``FP32Optimizer``'s loss scale;
* ``optimizer/clip_grads.py:90,103,115,167,174,207`` — gradient norm, clipping (and its type check);
* ``transformer/utils.py:35,40`` — the default causal and sliding-window masks;
* ``models/common/embeddings/rotary_pos_embedding.py:78,162,297`` — rotary frequencies;
* ``pipeline_parallel/p2p_communication.py:190-321`` — pipeline shapes, receive buffers, synchronize;
* ``models/common/language_module/language_module.py:244`` — tied embeddings across pipeline stages
  (``weight.data.cuda()``);
* ``dist_checkpointing/strategies/state_dict_saver.py:204,252``, ``fully_parallel.py:272,281``,
  ``async_utils.py:165,212,604``, ``filesystem_async.py:230``, ``exchange_utils.py:98-110`` — saving
  and loading the optimizer's distributed checkpoint;
* ``transformer/multi_token_prediction.py:179,337`` — MTP's context-parallel roll buffers and its
  per-depth loss log.
"""

from __future__ import annotations

import functools
from typing import Any

from reasonrl.patching import Patch

#: megatron-core modules whose ``torch`` maps CUDA to the host (the sites are in the docstring).
HOST_DEVICE_MODULES = (
    "megatron.core.pipeline_parallel.schedules",
    "megatron.core.distributed.param_and_grad_buffer",
    "megatron.core.utils",
    "megatron.core.optimizer.optimizer",
    "megatron.core.optimizer.clip_grads",
    "megatron.core.transformer.utils",
    "megatron.core.models.common.embeddings.rotary_pos_embedding",
    "megatron.core.pipeline_parallel.p2p_communication",
    "megatron.core.dist_checkpointing.strategies.state_dict_saver",
    "megatron.core.dist_checkpointing.strategies.fully_parallel",
    "megatron.core.dist_checkpointing.strategies.async_utils",
    "megatron.core.dist_checkpointing.strategies.filesystem_async",
    "megatron.core.dist_checkpointing.exchange_utils",
    "megatron.core.transformer.multi_token_prediction",
)

#: torch functions megatron calls with a ``device=`` argument at the sites above.
_FACTORIES = ("zeros", "ones", "empty", "tensor", "full", "arange", "zeros_like", "empty_like", "ones_like")


def _host(device: Any) -> Any:
    import torch

    if isinstance(device, int) or (device is not None and torch.device(device).type == "cuda"):
        return torch.device("cpu")
    return device


class _HostCuda:
    """``torch.cuda`` whose current device is the host and whose synchronize is a no-op."""

    def __getattr__(self, name: str) -> Any:
        import torch

        return getattr(torch.cuda, name)

    @staticmethod
    def current_device() -> Any:
        import torch

        return torch.device("cpu")

    @staticmethod
    def synchronize(device: Any = None) -> None:
        return None


class HostTorch:
    """``torch`` for one megatron module: CUDA device arguments mean the host."""

    def __init__(self) -> None:
        import torch

        self._torch = torch
        self.cuda = _HostCuda()
        for name in _FACTORIES:
            setattr(self, name, self._on_host(getattr(torch, name)))

    @staticmethod
    def _on_host(factory):
        @functools.wraps(factory)
        def on_host(*args, **kwargs):
            if "device" in kwargs:
                kwargs["device"] = _host(kwargs["device"])
            return factory(*args, **kwargs)

        return on_host

    def __getattr__(self, name: str) -> Any:
        return getattr(self._torch, name)


def clip_grad_by_total_norm_fp32(parameters, max_norm, total_norm, use_decoupled_grad=False) -> None:
    """megatron-core's ``clip_grad_by_total_norm_fp32`` without its ``torch.cuda.FloatTensor`` check:
    scale every gradient by ``max_norm / (total_norm + 1e-6)`` when that is below 1."""
    import torch
    from megatron.core.utils import to_local_if_dtensor

    if isinstance(parameters, torch.Tensor):
        parameters = [parameters]
    attribute = "decoupled_grad" if use_decoupled_grad else "grad"
    grads = [
        to_local_if_dtensor(getattr(param, attribute)).detach()
        for param in parameters
        if getattr(param, attribute, None) is not None
    ]
    clip_coeff = max_norm / (total_norm + 1.0e-6)
    if clip_coeff < 1.0:
        for grad in grads:
            grad.mul_(clip_coeff)


def _tied_embeddings_on_host(original):
    @functools.wraps(original)
    def setup_embeddings_and_output_layer(self) -> None:
        # language_module.py:244 moves the shared weight with ``.cuda()`` before its all-reduce.
        import torch

        cuda = torch.Tensor.cuda
        torch.Tensor.cuda = lambda tensor, *args, **kwargs: tensor
        try:
            original(self)
        finally:
            torch.Tensor.cuda = cuda

    return setup_embeddings_and_output_layer


def use_host_torch(module_names: tuple[str, ...]) -> None:
    """Give each named module a :class:`HostTorch` as its ``torch``."""
    import importlib

    host_torch = HostTorch()
    for module_name in module_names:
        importlib.import_module(module_name).torch = host_torch


def _apply() -> None:
    import importlib

    from megatron.core.models.common.language_module.language_module import LanguageModule

    use_host_torch(HOST_DEVICE_MODULES)
    clip_grads = importlib.import_module("megatron.core.optimizer.clip_grads")
    clip_grads.clip_grad_by_total_norm_fp32 = clip_grad_by_total_norm_fp32
    for importer in ("megatron.core.optimizer.optimizer", "megatron.core.optimizer.layer_wise_optimizer"):
        module = importlib.import_module(importer)
        if hasattr(module, "clip_grad_by_total_norm_fp32"):
            module.clip_grad_by_total_norm_fp32 = clip_grad_by_total_norm_fp32
    LanguageModule.setup_embeddings_and_output_layer = _tied_embeddings_on_host(
        LanguageModule.setup_embeddings_and_output_layer
    )


def needed_on_host() -> str | None:
    # The cpu platform computes on the host whatever else the machine has (no torch import here:
    # `reasonrl plugins` assesses patches without importing torch).
    import os

    if os.environ.get("VERL_PLATFORM") != "cpu":
        return "not on reasonrl's cpu platform (VERL_PLATFORM is not cpu)"
    return None


PATCH = Patch(
    name="megatron-core-host-device",
    package="megatron-core",
    versions=">=0.16.1,<0.17",
    changes=(
        "In fourteen megatron.core modules (schedules, param_and_grad_buffer, utils, optimizer, clip_grads, "
        "transformer.utils, rotary_pos_embedding, p2p_communication, five of dist_checkpointing, "
        "multi_token_prediction) the module's "
        "`torch` maps device 'cuda' / "
        "torch.cuda.current_device() to the host and torch.cuda.synchronize to a no-op; "
        "clip_grad_by_total_norm_fp32 without its 'torch.cuda.FloatTensor' check; "
        "LanguageModule.setup_embeddings_and_output_layer keeps the tied weight where it is. "
        "Applied by reasonrl's CPU Megatron engine when it is built (VERL_PLATFORM=cpu)."
    ),
    upstream_issue="",  # none filed
    upstream_problem="megatron-core hard-codes CUDA as the device of its buffers, masks and norms (no device argument)",
    apply=_apply,
    trigger="manual",
    when=needed_on_host,
)
