"""megatron-core internals reasonrl uses (megatron-core 0.16.1), each behind its version guard.

The CPU set-up that the mtp plugin's loss check and the puzzle plugin's engine check share:
one gloo process group with megatron's model-parallel state, megatron's inference RNG tracker
where CUDA's is missing, host memory for the rotary tables and the local attention's score
buffer (megatron-core allocates both on CUDA), the two hooks the MTP loss check records
through, and the MTP layers' parts and inputs the MTP forward check rebuilds megatron's forward from.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Callable

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

MTP_LOSS_INTERNALS = declare(
    Reach(
        name="megatron.mtp-loss-internals",
        package="megatron-core",
        versions=MEGATRON_0_16,
        touches="GPTModel.compute_language_model_loss (wrapped to record per-token losses), "
        "MTPLossLoggingHelper.tracker['values'] (allocated on CUDA)",
        used_by="mtp plugin's proof that megatron-core's MTP loss equals L_main + λ·mean_k L^k",
        public_hook="per-depth MTP losses returned by GPTModel.forward, a device for the logging tracker",
        needed=never,
    )
)


MTP_FORWARD_INTERNALS = declare(
    Reach(
        name="megatron.mtp-forward-internals",
        package="megatron-core",
        versions=MEGATRON_0_16,
        touches="TransformerBlock.final_layernorm (hooked: the h^0 MTP receives), "
        "MultiTokenPredictionBlock.layers[k].{enorm,hnorm,eh_proj,final_layernorm} (weights read), "
        ".transformer_layer (hooked for its call's arguments, called directly), "
        "GPTModel.embedding / output_layer called directly",
        used_by="mtp plugin's check of megatron-core's MTP forward against core.mtp_token_losses",
        public_hook="per-depth MTP logits or hidden states returned by GPTModel.forward",
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


def record_language_model_losses(model: Any, sink: list) -> Callable[[], None]:
    """Append every per-token loss ``model.compute_language_model_loss`` returns (the MTP depths
    first, then the main loss) to ``sink``; returns the function that undoes it."""
    MTP_LOSS_INTERNALS.require()
    original = model.compute_language_model_loss

    def recording(labels, logits):
        loss = original(labels, logits)
        sink.append(loss)
        return loss

    model.compute_language_model_loss = recording
    return lambda: setattr(model, "compute_language_model_loss", original)


def mtp_logged_losses(depth: int | None = None) -> torch.Tensor:
    """megatron's per-depth MTP loss log; with ``depth``, first reset to host zeros of that size."""
    MTP_LOSS_INTERNALS.require()
    import torch
    from megatron.core.transformer.multi_token_prediction import MTPLossLoggingHelper

    if depth is not None:
        MTPLossLoggingHelper.tracker["values"] = torch.zeros(depth)
    return MTPLossLoggingHelper.tracker["values"]


def mtp_layer_parts(model: Any) -> list[dict]:
    """Per MTP depth of a GPTModel: its ``enorm``, ``hnorm``, ``eh_proj`` (weight over
    [embedding ; hidden], megatron's order), ``final_layernorm`` modules and its ``transformer_layer``."""
    MTP_FORWARD_INTERNALS.require()
    names = ("enorm", "hnorm", "eh_proj", "final_layernorm", "transformer_layer")
    return [{name: getattr(layer, name) for name in names} for layer in model.mtp.layers]


def capture_mtp_inputs(model: Any, sink: dict) -> Callable[[], None]:
    """During ``model``'s forward record in ``sink``: ``h0_before_norm`` / ``h0_after_norm`` (the
    main decoder's last hidden state around its final layernorm, [s, b, h]) and ``block_kwargs``
    (per depth, the keyword arguments the MTP layer passes its transformer layer, less
    ``hidden_states``). Returns the function that removes the hooks."""
    MTP_FORWARD_INTERNALS.require()
    norm = model.decoder.final_layernorm
    sink["block_kwargs"] = [None] * len(model.mtp.layers)

    def block_inputs(depth: int) -> Callable:
        def hook(module, args, kwargs):
            sink["block_kwargs"][depth] = {name: value for name, value in kwargs.items() if name != "hidden_states"}

        return hook

    handles = [
        norm.register_forward_pre_hook(lambda module, args: sink.__setitem__("h0_before_norm", args[0])),
        norm.register_forward_hook(lambda module, args, output: sink.__setitem__("h0_after_norm", output)),
    ] + [
        layer.transformer_layer.register_forward_pre_hook(block_inputs(depth), with_kwargs=True)
        for depth, layer in enumerate(model.mtp.layers)
    ]
    return lambda: [handle.remove() for handle in handles]


def embedding_and_head(model: Any) -> tuple[Callable, Callable]:
    """``model``'s word embedding and output layer in [batch, seq, ·] layout (megatron's are
    [seq, batch, ·]; the output layer returns (logits, bias))."""
    MTP_FORWARD_INTERNALS.require()
    weight = model.shared_embedding_or_output_weight() if model.share_embeddings_and_output_weights else None

    def embed(input_ids: torch.Tensor) -> torch.Tensor:
        import torch

        positions = torch.arange(input_ids.shape[1], device=input_ids.device).expand_as(input_ids)
        return model.embedding(input_ids=input_ids, position_ids=positions).transpose(0, 1)

    def head(hidden: torch.Tensor) -> torch.Tensor:
        return model.output_layer(hidden.transpose(0, 1), weight=weight)[0].transpose(0, 1)

    return embed, head
