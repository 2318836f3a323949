"""CPU helpers for NeMo 2.7.3 LlamaNemotron (heterogeneous) without Transformer Engine."""
import os, dataclasses
from dataclasses import dataclass
import torch
from nemo.collections.llm.gpt.model import llama_nemotron as ln
from nemo.lightning import io

CPU_FLAGS = dict(
    apply_rope_fusion=False,          # megatron refuses without TE (TransformerConfig.__post_init__)
    masked_softmax_fusion=False,
    persist_layer_norm=False,
    bias_dropout_fusion=False,
    bias_activation_fusion=False,
    gradient_accumulation_fusion=False,
    cross_entropy_loss_fusion=False,
    use_cpu_initialization=True,
)


@dataclass
class CpuLlamaNemotronHeteroConfig(ln.Llama31NemotronUltra253BConfig):
    apply_rope_fusion: bool = False
    masked_softmax_fusion: bool = False
    persist_layer_norm: bool = False
    bias_dropout_fusion: bool = False
    bias_activation_fusion: bool = False
    gradient_accumulation_fusion: bool = False
    cross_entropy_loss_fusion: bool = False
    use_cpu_initialization: bool = True


class CpuLlamaNemotronModel(ln.LlamaNemotronModel):
    pass


@io.model_importer(CpuLlamaNemotronModel, "hf")
class CpuHFLlamaNemotronImporter(ln.HFLlamaNemotronImporter):
    """Same as HFLlamaNemotronImporter, but the config class picked for block_configs is CPU-safe."""
    trust_remote_code = False

    def init(self):
        return CpuLlamaNemotronModel(self.config, tokenizer=self.tokenizer)

    @property
    def config(self):
        saved = (ln.Llama33NemotronSuper49BConfig, ln.Llama31NemotronUltra253BConfig)
        ln.Llama33NemotronSuper49BConfig = ln.Llama31NemotronUltra253BConfig = CpuLlamaNemotronHeteroConfig
        try:
            return super().config
        finally:
            ln.Llama33NemotronSuper49BConfig, ln.Llama31NemotronUltra253BConfig = saved


def init_cpu_parallel():
    import torch.distributed as dist
    from megatron.core import parallel_state
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1"); os.environ.setdefault("MASTER_PORT", "29533")
    os.environ.setdefault("RANK", "0"); os.environ.setdefault("WORLD_SIZE", "1"); os.environ.setdefault("LOCAL_RANK", "0")
    if not dist.is_initialized():
        dist.init_process_group("gloo", rank=0, world_size=1)
    if not parallel_state.model_parallel_is_initialized():
        parallel_state.initialize_model_parallel(1, 1)


def patch_cuda_device_for_cpu():
    """megatron-core 0.15.3 RotaryEmbedding.forward (rotary_pos_embedding.py:162-164) moves inv_freq to
    torch.cuda.current_device() unconditionally; on a CPU-only torch that raises. Point it at the CPU."""
    if not torch.cuda.is_available():
        torch.cuda.current_device = lambda: torch.device("cpu")
        # megatron/core/dist_checkpointing/strategies/filesystem_async.py:230 (preload_tensors, used by the
        # torch_dist save strategy even when saving synchronously) calls torch.cuda.synchronize()
        torch.cuda.synchronize = lambda *a, **k: None
        # nemo/lightning/megatron_parallel.py:617 wraps init_ddp in torch.cuda.stream(torch.cuda.Stream())
        # (reached by ModelConnector.nemo_load, i.e. export); torch.cuda.stream(None) is a no-op context
        torch.cuda.Stream = lambda *a, **k: None
        # nemo/lightning/io/pl.py:495 _fix_tensors_device asserts torch.cuda.is_initialized() after every
        # dist-ckpt load (MegatronCheckpointIO.load_checkpoint, pl.py:307): identity on CPU
        import nemo.lightning.io.pl as nemo_pl
        nemo_pl._fix_tensors_device = lambda ckpt: ckpt
        # megatron/core/tensor_parallel/random.py: CudaRNGStatesTracker.fork needs CUDA rng states
        # (model_parallel_cuda_manual_seed calls torch.cuda.manual_seed); on CPU make fork a no-op.
        import contextlib
        from megatron.core.tensor_parallel import random as mrandom

        @contextlib.contextmanager
        def _fork(self, name=None):
            yield

        mrandom.CudaRNGStatesTracker.fork = _fork


def _merge_qkv_groups(q, k, v, head_num, groups, head_size, hidden):
    hpg = head_num // groups
    q = q.view(head_num, head_size, hidden); k = k.view(groups, head_size, hidden); v = v.view(groups, head_size, hidden)
    parts = []
    for i in range(groups):
        parts += [q[i * hpg:(i + 1) * hpg], k[i:i + 1], v[i:i + 1]]
    return torch.cat(parts).reshape(head_size * (head_num + 2 * groups), hidden)


def fixed_hetero_convert_state(source, target):
    """HF nemotron-nas -> NeMo (local, non-TE spec) with explicit per-layer keys: maps the layer norms to the
    non-TE names, maps linear replacements (self_attn.linear_attn / mlp.linear_mlp), and merges QKV with each
    layer's own GQA. No wildcards (NeMo's _match_keys pairs wildcard matches by position, not layer number)."""
    from nemo.lightning.io.state import TransformFns
    cfg = target.config if not hasattr(target, "module") else target.module.config
    hcfg = source.config
    sd = source.state_dict()
    mapping = {"model.embed_tokens.weight": "embedding.word_embeddings.weight",
               "model.norm.weight": "decoder.final_layernorm.weight"}
    if not getattr(hcfg, "tie_word_embeddings", False):
        mapping["lm_head.weight"] = "output_layer.weight"
    transforms = []
    H, hd, nh = hcfg.hidden_size, cfg.kv_channels, hcfg.num_attention_heads
    for i, blk in enumerate(cfg.per_block_parameters):
        p, t = f"model.layers.{i}.", f"decoder.layers.{i}."
        if not blk.attention.no_op:
            mapping[p + "input_layernorm.weight"] = t + "input_layernorm.weight"
            if blk.attention.replace_with_linear:
                mapping[p + "self_attn.linear_attn.weight"] = t + "self_attention.weight"
            else:
                mapping[p + "self_attn.o_proj.weight"] = t + "self_attention.linear_proj.weight"
                g = blk.attention.num_query_groups
                def make(g):
                    def fn(ctx, q, k, v):  # NeMo maps source keys to fn's parameter names: no extra params
                        return _merge_qkv_groups(q, k, v, nh, g, hd, H)
                    return fn
                fn = make(g)
                transforms.append(io.state_transform(
                    source_key=(p + "self_attn.q_proj.weight", p + "self_attn.k_proj.weight", p + "self_attn.v_proj.weight"),
                    target_key=t + "self_attention.linear_qkv.weight", fn=fn))
        if not blk.mlp.no_op:
            mapping[p + "post_attention_layernorm.weight"] = t + "pre_mlp_layernorm.weight"
            if blk.mlp.replace_with_linear:
                mapping[p + "mlp.linear_mlp.weight"] = t + "mlp.weight"
            else:
                mapping[p + "mlp.down_proj.weight"] = t + "mlp.linear_fc2.weight"
                transforms.append(io.state_transform(
                    source_key=(p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight"),
                    target_key=t + "mlp.linear_fc1.weight", fn=TransformFns.merge_fc1))
    used = set(mapping) | {k for tr in transforms for k in tr.source_key}
    unused = [k for k in sd if k not in used and "rotary" not in k]
    assert not unused, f"HF weights not mapped: {unused}"
    return io.apply_transforms(source, target, mapping=mapping, transforms=transforms)


class CpuHFLlamaNemotronImporterFixed(CpuHFLlamaNemotronImporter):
    def convert_state(self, source, target):
        return fixed_hetero_convert_state(source, target)


class CpuSyncSaveMixin:
    """MegatronStrategy defaults to ckpt_async_save=True; its preload calls torch.cuda.synchronize()
    (megatron/core/dist_checkpointing/strategies/filesystem_async.py:230). Save synchronously on CPU."""

    def nemo_setup(self, model, trainer=None, *args, **kwargs):
        kwargs.setdefault("ckpt_async_save", False)
        return super().nemo_setup(model, trainer, *args, **kwargs)


class CpuHFLlamaNemotronImporterFixedSync(CpuSyncSaveMixin, CpuHFLlamaNemotronImporterFixed):
    pass


@io.model_exporter(CpuLlamaNemotronModel, "hf")
class CpuHFLlamaNemotronExporter(ln.HFLlamaNemotronExporter):
    """Stock exporter (connectors are registered per model class, not inherited)."""
    trust_remote_code = False


def _split_qkv_groups(qkv, head_num, groups, head_size, hidden):
    hpg = head_num // groups
    w = qkv.reshape(groups, hpg + 2, head_size, hidden)
    q = w[:, :hpg].reshape(head_num * head_size, hidden)
    k = w[:, hpg].reshape(groups * head_size, hidden)
    v = w[:, hpg + 1].reshape(groups * head_size, hidden)
    return q, k, v


def fixed_hetero_export_state(source, target):
    """NeMo (local, non-TE spec) -> HF nemotron-nas, explicit per-layer keys (inverse of fixed_hetero_convert_state)."""
    from nemo.lightning.io.state import TransformFns
    src = source.module if hasattr(source, "module") else source
    while hasattr(src, "module"):
        src = src.module
    cfg = src.config
    H, hd, nh = cfg.hidden_size, cfg.kv_channels, cfg.num_attention_heads
    mapping = {"decoder.final_layernorm.weight": "model.norm.weight"}
    transforms = [
        io.state_transform(source_key="embedding.word_embeddings.weight", target_key="model.embed_tokens.weight",
                           fn=TransformFns.prune_padding),
    ]
    if not cfg.share_embeddings_and_output_weights:
        transforms.append(io.state_transform(source_key="output_layer.weight", target_key="lm_head.weight",
                                             fn=TransformFns.prune_padding))
    for i, blk in enumerate(cfg.per_block_parameters):
        t, p = f"decoder.layers.{i}.", f"model.layers.{i}."
        if not blk.attention.no_op:
            mapping[t + "input_layernorm.weight"] = p + "input_layernorm.weight"
            if blk.attention.replace_with_linear:
                mapping[t + "self_attention.weight"] = p + "self_attn.linear_attn.weight"
            else:
                mapping[t + "self_attention.linear_proj.weight"] = p + "self_attn.o_proj.weight"
                def make(g):
                    def fn(ctx, qkv):
                        return _split_qkv_groups(qkv, nh, g, hd, H)
                    return fn
                transforms.append(io.state_transform(
                    source_key=t + "self_attention.linear_qkv.weight",
                    target_key=(p + "self_attn.q_proj.weight", p + "self_attn.k_proj.weight", p + "self_attn.v_proj.weight"),
                    fn=make(blk.attention.num_query_groups)))
        if not blk.mlp.no_op:
            mapping[t + "pre_mlp_layernorm.weight"] = p + "post_attention_layernorm.weight"
            if blk.mlp.replace_with_linear:
                mapping[t + "mlp.weight"] = p + "mlp.linear_mlp.weight"
            else:
                mapping[t + "mlp.linear_fc2.weight"] = p + "mlp.down_proj.weight"
                transforms.append(io.state_transform(
                    source_key=t + "mlp.linear_fc1.weight",
                    target_key=(p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight"), fn=TransformFns.split_fc1))
    return io.apply_transforms(source, target, mapping=mapping, transforms=transforms)


@io.model_exporter(CpuLlamaNemotronModel, "hf")
class CpuHFLlamaNemotronExporterFixed(ln.HFLlamaNemotronExporter):
    trust_remote_code = False

    def convert_state(self, source, target):
        return fixed_hetero_export_state(source, target)


def patch_megatron_fp32_optimizer_for_cpu():
    """megatron/core/optimizer/optimizer.py:903: FP32Optimizer.__init__ puts its loss scale on device='cuda'."""
    from megatron.core.optimizer import optimizer as mopt

    def __init__(self, optimizer, config, init_state_fn):
        mopt.MegatronOptimizer.__init__(self, optimizer, config, init_state_fn)
        self._scale = torch.tensor([1.0], dtype=torch.float)
        self.is_stub_optimizer = optimizer is None

    mopt.FP32Optimizer.__init__ = __init__
