"""megatron-core internals reasonrl uses (megatron-core 0.16.1), each behind its version guard.

The CPU set-up that the mtp plugin's loss check and the puzzle plugin's engine check share:
one gloo process group with megatron's model-parallel state, megatron's inference RNG tracker
where CUDA's is missing, host memory for the rotary tables and the local attention's score
buffer (megatron-core allocates both on CUDA), the two hooks the MTP loss check records
through, and the MTP layers' parts and inputs the MTP forward check rebuilds megatron's forward from.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from reasonrl.compat import Reach, declare, never

if TYPE_CHECKING:  # torch is imported where it is used: `reasonrl plugins` reads this module's table only
    import torch

MEGATRON_0_16 = ">=0.16.1,<0.17"

HOST_BUFFERS = declare(
    Reach(
        name="megatron.host-buffers",
        package="megatron-core",
        versions=MEGATRON_0_16,
        touches="RotaryEmbedding.get_emb replaced through a __class__ swap (frequencies built on CUDA), "
        "parallel_state.get_global_memory_buffer().buffer[('mpu', dtype)] (local attention's score buffer)",
        used_by="mtp plugin's megatron loss check and puzzle plugin's megatron engine check on CPU",
        public_hook="a device argument for RotaryEmbedding and for the global memory buffer",
        needed=never,
    )
)


def init_single_process(seed: int = 0) -> None:
    """A one-rank gloo process group, megatron's model-parallel state and its RNG tracker: CUDA's
    seeded tracker where CUDA exists, else megatron's inference tracker (its training tracker
    forks CUDA RNG state)."""
    HOST_BUFFERS.require()
    import torch
    from megatron.core import parallel_state
    from megatron.core.tensor_parallel.random import initialize_rng_tracker, model_parallel_cuda_manual_seed

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(29500 + os.getpid() % 1000))
    if not torch.distributed.is_initialized():
        torch.distributed.init_process_group("gloo", rank=0, world_size=1)
    parallel_state.initialize_model_parallel()
    if torch.cuda.is_available():
        model_parallel_cuda_manual_seed(seed)
    else:
        initialize_rng_tracker(inference_rng_tracker=True, force_reset=True)


def close_single_process() -> None:
    import torch
    from megatron.core import parallel_state

    parallel_state.destroy_model_parallel()
    torch.distributed.destroy_process_group()


def _host_rotary_class() -> type:
    import torch
    from megatron.core.models.common.embeddings.rotary_pos_embedding import RotaryEmbedding

    class HostRotaryEmbedding(RotaryEmbedding):
        """megatron-core 0.16.1's ``get_emb`` on the module's own device (it moves to CUDA)."""

        def get_emb(self, max_seq_len: int, offset: int = 0) -> torch.Tensor:
            freqs = self.get_freqs_non_repeated(max_seq_len, offset)
            if self.rotary_interleaved:
                emb = torch.stack((freqs.view(-1, 1), freqs.view(-1, 1)), dim=-1).view(freqs.shape[0], -1)
            else:
                emb = torch.cat((freqs, freqs), dim=-1)
            return emb[:, None, None, :]

    return HostRotaryEmbedding


_rotary_class: type | None = None


def use_host_rotary(model: Any) -> None:
    """Compute ``model``'s rotary tables in host memory (same values as megatron's)."""
    global _rotary_class
    HOST_BUFFERS.require()
    if _rotary_class is None:
        _rotary_class = _host_rotary_class()
    model.rotary_pos_emb.__class__ = _rotary_class


def host_attention_buffer(elements: int, dtype: torch.dtype) -> None:
    """Give megatron's local attention a host score buffer of at least ``elements`` (it would
    allocate one on CUDA)."""
    HOST_BUFFERS.require()
    import torch
    from megatron.core import parallel_state

    buffers = parallel_state.get_global_memory_buffer().buffer
    if buffers.get(("mpu", dtype)) is None or buffers[("mpu", dtype)].numel() < elements:
        buffers[("mpu", dtype)] = torch.empty(elements, dtype=dtype)
