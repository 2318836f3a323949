"""NeMo 2.7.3 / megatron-core 0.15.3 on a machine without CUDA (docs/nemo.md §3): the config
flags megatron refuses without Transformer Engine, process-local replacements for the
hard-coded CUDA calls on the import / export / forward path, and a torch function mode that
keeps the training path's CUDA tensors on the CPU (``llm.distill``). Applied only by the NeMo adapter's
own process (``python -m reasonrl.plugins.puzzle.nemo_adapter``), only when CUDA is absent, and
only for the versions they were written against (``nemo_side.TESTED``)."""

from __future__ import annotations

import contextlib
from importlib.metadata import version

import torch
from torch.overrides import TorchFunctionMode

from reasonrl.plugins.puzzle.nemo_side import TESTED, NemoAdapterError

#: megatron-core checks these in TransformerConfig.__post_init__: the fused kernels need TE / apex / CUDA
CPU_CONFIG = {
    "apply_rope_fusion": False,  # "apply_rope_fusion is not available. Please install TE >= 1.4."
    "persist_layer_norm": False,  # WrappedTorchNorm asserts it is off
    "masked_softmax_fusion": False,
    "bias_dropout_fusion": False,
    "bias_activation_fusion": False,
    "gradient_accumulation_fusion": False,
    "cross_entropy_loss_fusion": False,
    "use_cpu_initialization": True,
}

_applied = False


def check_versions() -> None:
    found = {name: version(name) for name in TESTED}
    if found != TESTED:
        raise NemoAdapterError(
            f"the NeMo adapter's CPU replacements are written for {TESTED}, found {found}: "
            "rebuild .venv-nemo (bash scripts/setup_env.sh nemo; pins in constraints/nemo.txt)"
        )


def config_overrides() -> dict:
    """The model-config fields to set on this machine (none where CUDA is present; there the
    local layer specs only need ``persist_layer_norm`` off)."""
    return dict(CPU_CONFIG) if not torch.cuda.is_available() else {"persist_layer_norm": False}


def apply() -> None:
    """Replace the CUDA-only calls on NeMo's import / export / load / forward path (idempotent;
    nothing where CUDA is present). Each line names the upstream site it stands in for."""
    global _applied
    if _applied or torch.cuda.is_available():
        return
    check_versions()
    # megatron/core/models/common/embeddings/rotary_pos_embedding.py:162 moves inv_freq to
    # torch.cuda.current_device() on every forward
    torch.cuda.current_device = lambda: torch.device("cpu")
    # megatron/core/dist_checkpointing/strategies/filesystem_async.py:230 (preload_tensors, also
    # on a synchronous save) synchronises CUDA
    torch.cuda.synchronize = lambda *args, **kwargs: None
    # nemo/lightning/megatron_parallel.py:617 wraps DDP set-up in torch.cuda.stream(torch.cuda.Stream());
    # torch.cuda.stream(None) is a no-op context
    torch.cuda.Stream = lambda *args, **kwargs: None
    # nemo/lightning/io/pl.py:495 asserts torch.cuda.is_initialized() after every checkpoint load
    import nemo.lightning.io.pl as nemo_pl

    nemo_pl._fix_tensors_device = lambda checkpoint: checkpoint
    # megatron/core/tensor_parallel/random.py: dropout forks a CUDA RNG state that only
    # model_parallel_cuda_manual_seed (CUDA) adds; on CPU dropout draws from the CPU generator
    from megatron.core.tensor_parallel import random as megatron_random

    @contextlib.contextmanager
    def fork_on_cpu(self, name=None):
        yield

    megatron_random.CudaRNGStatesTracker.fork = fork_on_cpu
    _applied = True


class CudaCallsOnCpu(TorchFunctionMode):
    """Tensors that megatron-core's training schedule, DDP, optimizer and NeMo's data sampler
    create on ``device="cuda"`` (megatron's FP32Optimizer loss scale, optimizer.py:903; schedules.py:573 ``total_num_tokens``;
    ~20 sites), moved by
    ``.cuda()`` or pinned, stay on the CPU. Active only around NeMo's training call."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if kwargs.get("pin_memory"):
            kwargs["pin_memory"] = False
        if "cuda" in str(kwargs.get("device", "")):
            kwargs["device"] = "cpu"
        if func is torch.Tensor.cuda:
            return args[0]
        if func is torch.Tensor.to:
            args = tuple("cpu" if isinstance(a, (str, torch.device)) and "cuda" in str(a) else a for a in args)
        return func(*args, **kwargs)


def training_on_cpu():
    """The context NeMo's trainer trains in on this machine (``llm.distill``): :class:`CudaCallsOnCpu`
    where CUDA is absent (it also covers megatron's FP32Optimizer loss scale, optimizer.py:903)."""
    return CudaCallsOnCpu() if not torch.cuda.is_available() else contextlib.nullcontext()


def causal_mask(length: int) -> torch.Tensor:
    """megatron's boolean attention mask (True: masked). megatron/core/transformer/utils.py:35
    builds the default one on device='cuda' when none is passed."""
    return torch.triu(torch.ones(length, length, dtype=torch.bool), diagonal=1)[None, None]
