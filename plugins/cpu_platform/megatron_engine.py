"""verl's Megatron engine on the host CPU (megatron-core 0.16.1, mbridge, gloo).

verl registers ``MegatronEngineWithLMHead`` for cuda and npu. This subclass runs it on the
``cpu`` platform with megatron-core's *local* layer spec (no Transformer Engine), fp32 and the
changes the host needs, each where verl or megatron-core takes it for granted that a GPU exists:

* megatron's RNG tracker keeps its named states in torch's host generator (megatron's forks CUDA
  RNG state), so dropout's streams and checkpoints' RNG states work as on a GPU;
* the bridge builds the local spec (``ColumnParallelLinear``, ``DotProductAttention``, torch
  ``RMSNorm``) and maps its separate norm weights to the Hugging Face names; it never calls ``.cuda()``;
* verl's 2-D padding mask (True = token) becomes the 4-D mask megatron's local attention reads
  (True = masked), causal;
* a vocabulary padded for tensor parallelism (the smoke model's 53 rows) gets no probability on
  its padding;
* weights go to vLLM, and checkpoints are saved, without verl's ``load_megatron_model_to_gpu``
  (nothing is offloaded on the host; it reads ``param_data``, None without the distributed optimizer);
* megatron-core's and mbridge's CUDA device literals: the patches ``megatron-core-host-device`` and
  ``mbridge-host-device``.

Select it with ``+preset=cpu_tiny_megatron`` (``model_engine=megatron``, ``vanilla_mbridge=true``).
"""

from __future__ import annotations

import functools
from typing import Any

import torch
from verl.workers.engine.megatron.transformer_impl import MegatronEngineWithLMHead

#: mbridge's Hugging Face name maps are for Transformer Engine's fused norms
#: (``linear_qkv.layer_norm_weight``); the local spec keeps the norms as modules of their own.
LOCAL_SPEC_NORMS = {
    "input_layernorm.weight": ["model.layers.{layer_number}.input_layernorm.weight"],
    "pre_mlp_layernorm.weight": ["model.layers.{layer_number}.post_attention_layernorm.weight"],
}


def host_bridge(bridge: Any, vocab_divisor: int) -> Any:
    """Turn an mbridge ``LLMBridge`` into one that builds megatron-core's local spec on the host."""
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_decoder_block_spec
    from verl.utils.megatron_utils import get_model

    base = type(bridge)

    class HostBridge(base):
        _OTHER_MAPPING = {
            **getattr(base, "_OTHER_MAPPING", {}),
            "input_layernorm.weight": LOCAL_SPEC_NORMS["input_layernorm.weight"],
        }
        _MLP_MAPPING = {**base._MLP_MAPPING, "pre_mlp_layernorm.weight": LOCAL_SPEC_NORMS["pre_mlp_layernorm.weight"]}
        # an MTP layer's transformer layer is mapped through the attention map (mbridge's MiMo)
        _ATTENTION_MAPPING = {
            **base._ATTENTION_MAPPING,
            "input_layernorm.weight": LOCAL_SPEC_NORMS["input_layernorm.weight"],
        }

        def _get_transformer_layer_spec(self, vp_stage=None):
            self.has_vp_stage = True
            return get_gpt_decoder_block_spec(
                self.config, use_transformer_engine=False, normalization="RMSNorm", vp_stage=vp_stage
            )

        def _get_gptmodel_args(self) -> dict:
            # mbridge's bridges (MiMo, DeepSeek-V3) build their MTP block for Transformer Engine
            # when mtp_num_layers is set: hidden from them, the local spec's block here instead
            layers, self.config.mtp_num_layers = self.config.mtp_num_layers, None
            try:
                arguments = super()._get_gptmodel_args()
            finally:
                self.config.mtp_num_layers = layers
            if layers:
                from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec, get_gpt_mtp_block_spec

                layer = get_gpt_layer_local_spec(normalization="RMSNorm", qk_layernorm=self.config.qk_layernorm)
                arguments["mtp_block_spec"] = get_gpt_mtp_block_spec(self.config, layer, use_transformer_engine=False)
            return arguments

        def get_model(
            self,
            post_model_creation_callbacks=(),
            wrap_with_ddp=False,
            fp16=False,
            bf16=False,
            ddp_config=None,
            **kwargs,
        ):
            # mbridge's get_model moves the model with .cuda(); verl's keeps it where
            # use_cpu_initialization built it (its DDP wrapper needs a newer megatron-core: ours below).
            model = get_model(
                self._model_provider(list(post_model_creation_callbacks)),
                wrap_with_ddp=False,
                transformer_config=self.config,
            )
            return wrap_with_megatron_ddp(model, ddp_config) if wrap_with_ddp else model

    HostBridge.__name__ = HostBridge.__qualname__ = f"Host{base.__name__}"
    bridge.__class__ = HostBridge
    vocab = bridge.hf_config.vocab_size
    if vocab % vocab_divisor:
        # megatron splits the vocabulary across tensor-parallel ranks; export trims the padding.
        bridge.make_vocab_size_divisible_by = vocab_divisor
    return bridge


def wrap_with_megatron_ddp(model: list, ddp_config: dict | None) -> list:
    """megatron-core's DDP around each model chunk, as mbridge wraps it (one bucket, no overlap)."""
    from megatron.core.distributed import DistributedDataParallel, DistributedDataParallelConfig
    from megatron.core.utils import get_model_config

    config = get_model_config(model[0])
    ddp = DistributedDataParallelConfig(
        **{"grad_reduce_in_fp32": True, "use_distributed_optimizer": False, **(ddp_config or {})}
    )
    if not ddp.overlap_grad_reduce:
        ddp.bucket_size = None
    wrapped = [
        DistributedDataParallel(config=config, ddp_config=ddp, module=chunk, disable_bucketing=index > 0)
        for index, chunk in enumerate(model)
    ]
    for chunk in wrapped:
        chunk.broadcast_params()
    return wrapped


def padding_mask_to_causal(valid: torch.Tensor) -> torch.Tensor:
    """verl's ``(batch, seq)`` mask, True = token, as megatron's ``(batch, 1, seq, seq)``, True = masked."""
    seq = valid.shape[-1]
    causal = torch.ones(seq, seq, dtype=torch.bool, device=valid.device).tril()
    return ~(causal[None] & valid.bool()[:, None, :])[:, None]


def _four_d_mask(module, args, kwargs):
    mask = kwargs.get("attention_mask")
    if mask is not None and mask.dim() == 2:
        kwargs["attention_mask"] = padding_mask_to_causal(mask)
    return args, kwargs


#: The logit of a padded vocabulary row: exp() of it vanishes next to any real logit, and unlike
#: -inf it keeps ``p * log p`` (entropy) finite.
PADDED_VOCAB_LOGIT = -1.0e4


def mask_padded_vocab(output_layer: torch.nn.Module, vocab_size: int) -> None:
    """Give the rows megatron pads the vocabulary with (to split it across tensor-parallel ranks) no
    probability: verl's log-probs and entropy then equal those over the real vocabulary, as vLLM's."""
    from megatron.core import parallel_state

    def hook(module, args, output):
        logits, bias = output
        local = logits.shape[-1]
        first = parallel_state.get_tensor_model_parallel_rank() * local
        padded = torch.arange(first, first + local, device=logits.device) >= vocab_size
        if padded.any():
            logits = logits.masked_fill(padded, PADDED_VOCAB_LOGIT)
        return logits, bias

    output_layer.register_forward_hook(hook)


@functools.cache
def host_rng_tracker_class() -> type:
    """megatron-core's RNG tracker on torch's host generator (its own tracker forks CUDA RNG state)."""
    import contextlib

    from megatron.core.tensor_parallel import random as megatron_random

    class HostRNGStatesTracker(megatron_random.CudaRNGStatesTracker):
        """Named generator states (data-parallel, tensor-parallel, expert seeds) that ``fork`` swaps
        into torch's host generator; saved and restored with verl's checkpoints as megatron's are."""

        def add(self, name, seed):
            if seed in self.seeds_ or name in self.states_:
                raise ValueError(f"RNG state {name!r} or seed {seed} is already tracked")
            self.seeds_.add(seed)
            outer = torch.get_rng_state()
            torch.manual_seed(seed)
            self.states_[name] = torch.get_rng_state()
            torch.set_rng_state(outer)

        @contextlib.contextmanager
        def fork(self, name=megatron_random._MODEL_PARALLEL_RNG_TRACKER_NAME):
            if name not in self.states_:
                raise ValueError(f"RNG state {name!r} is not tracked")
            outer = torch.get_rng_state()
            torch.set_rng_state(self.states_[name])
            try:
                yield
            finally:
                self.states_[name] = torch.get_rng_state()
                torch.set_rng_state(outer)

    return HostRNGStatesTracker


def _init_rng_tracker() -> None:
    # Installed before verl seeds megatron's tracker (workers/engine/megatron/utils.py:38), which
    # then adds its named states to this one.
    from megatron.core.tensor_parallel import random as megatron_random

    tracker_class = host_rng_tracker_class()
    if not isinstance(megatron_random._CUDA_RNG_STATE_TRACKER, tracker_class):
        megatron_random._CUDA_RNG_STATE_TRACKER = tracker_class()
        megatron_random._CUDA_RNG_STATE_TRACKER_INITIALIZED = True


class CpuMegatronEngineWithLMHead(MegatronEngineWithLMHead):
    """verl's Megatron language-model engine on the ``cpu`` platform (see the module docstring)."""

    def __init__(self, *args, **kwargs):
        from reasonrl.patches.cpu_platform import mbridge_host_device, megatron_host_device
        from reasonrl.patching import apply_patch

        apply_patch(megatron_host_device.PATCH)
        apply_patch(mbridge_host_device.PATCH)
        _init_rng_tracker()
        super().__init__(*args, **kwargs)

    def _build_tf_config(self):
        super()._build_tf_config()
        if not self.vanilla_bridge:
            raise ValueError(
                "verl's Megatron engine on the cpu platform needs "
                "actor_rollout_ref.actor.megatron.vanilla_mbridge=true (Megatron-Bridge needs Python >= 3.12 "
                "and Transformer Engine); +preset=cpu_tiny_megatron sets it"
            )
        self.bridge = host_bridge(self.bridge, self.engine_config.tensor_model_parallel_size)

    def _build_megatron_module(self):
        from megatron.core.utils import unwrap_model

        module = super()._build_megatron_module()
        vocab_size = self.model_config.hf_config.vocab_size
        for chunk in module:
            model = unwrap_model(chunk)
            model.register_forward_pre_hook(_four_d_mask, with_kwargs=True)
            if getattr(model, "post_process", False) and model.vocab_size > vocab_size:
                mask_padded_vocab(model.output_layer, vocab_size)
        return module

    def save_checkpoint(self, local_path, hdfs_path=None, global_step=0, max_ckpt_to_keep=None, **kwargs):
        # verl reloads "cpu" modules to the device first (transformer_impl.py:792): on the host they
        # are already there, and the reload reads param_data, None without the distributed optimizer.
        if self._is_offload_param:
            return super().save_checkpoint(local_path, hdfs_path, global_step, max_ckpt_to_keep, **kwargs)
        self.checkpoint_mananager.save_checkpoint(
            local_path=local_path, hdfs_path=hdfs_path, global_step=global_step, max_ckpt_to_keep=max_ckpt_to_keep
        )
        torch.distributed.barrier()

    def get_per_tensor_param(self, base_sync_done=False, **kwargs):
        if self._is_offload_param or self.peft_cls is not None or self._qat_enabled:
            return super().get_per_tensor_param(base_sync_done=base_sync_done, **kwargs)
        return self.bridge.export_weights(self.module), None


def register_megatron_engines(device: str) -> None:
    """Make :class:`CpuMegatronEngineWithLMHead` verl's Megatron language-model engine on ``device``."""
    from verl.workers.engine.base import EngineRegistry

    from reasonrl.compat.verl import engine_registered

    if engine_registered("language_model", "megatron", device) is not CpuMegatronEngineWithLMHead:
        EngineRegistry.register(model_type="language_model", backend="megatron", device=device)(
            CpuMegatronEngineWithLMHead
        )
