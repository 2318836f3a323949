"""``reasonrl plan``: what a recipe needs on a cluster — devices per role, the parallel layout,
and per-device bytes of weights, gradients and optimizer state for one model.

The arithmetic is exact for the parameters: they are listed by building the model's transformers
class on PyTorch's ``meta`` device (shapes only, no memory), then placed as the training engine
shards them (:func:`megatron_shares`, :func:`fsdp_shares`). Activations, the KV cache, and
framework buffers are not counted: they depend on lengths and batch packing, not on the model.

Bytes per parameter follow verl 0.9.1's defaults for each engine:

================  ===================================  ======================================
                  Megatron (``model_engine=megatron``)  FSDP (verl's default engine)
================  ===================================  ======================================
weights           ``megatron.dtype`` (bf16: 2)          ``fsdp_config.model_dtype`` (fp32: 4)
gradients         fp32 main grads (4; verl sets         as the weights
                  ``grad_reduce_in_fp32``)
Adam state        fp32 master + m + v (12), sharded     m + v as the weights (8 for fp32)
                  over data parallel × context
                  parallel with the distributed
                  optimizer
================  ===================================  ======================================
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reasonrl.errors import UserError

DTYPE_BYTES = {"bfloat16": 2, "bf16": 2, "float16": 2, "fp16": 2, "float32": 4, "fp32": 4}
ADAM_MASTER_STATE_BYTES = 12  # Megatron's mixed-precision Adam: fp32 master weights, exp_avg, exp_avg_sq

_LAYER = re.compile(r"\.layers\.(\d+)\.")


@dataclass(frozen=True)
class Parameter:
    name: str
    numel: int
    rows: int = 1  # the first dimension: the vocabulary of an embedding or output layer


@dataclass(frozen=True)
class Layout:
    """The parallel layout of one run, read from its composed config (:func:`layout_of`)."""

    engine: str  # "megatron" or "fsdp"
    nodes: int
    devices_per_node: int
    tp: int = 1
    pp: int = 1
    cp: int = 1
    ep: int = 1
    etp: int = 1
    sequence_parallel: bool = False
    distributed_optimizer: bool = True
    weight_bytes: int = 2
    grad_bytes: int = 4
    fsdp_size: int = -1
    ulysses: int = 1  # FSDP's sequence parallel (Ulysses): splits sequences, not parameters
    param_offload: bool = False
    optimizer_offload: bool = False
    rollout_tp: int = 1
    rollout_dp: int = 1
    rollout_pp: int = 1
    rollout_bytes: int = 2
    uses_reference: bool = False
    reference_bytes: int = 2

    @property
    def devices(self) -> int:
        return self.nodes * self.devices_per_node

    @property
    def data_parallel(self) -> int:
        """Megatron's data-parallel size (without context parallel)."""
        return self.devices // (self.tp * self.pp * self.cp)

    @property
    def expert_data_parallel(self) -> int:
        return self.devices // (self.etp * self.ep * self.pp)

    @property
    def fsdp_group(self) -> int:
        """Devices one FSDP shard group spans (``fsdp_size``; -1 or 0: every device)."""
        return self.devices if self.fsdp_size in (-1, 0) else self.fsdp_size

    @property
    def rollout_devices_per_replica(self) -> int:
        return self.rollout_tp * self.rollout_dp * self.rollout_pp

    def check(self) -> None:
        """Each group size divides the devices (Megatron and verl refuse otherwise, later)."""
        if self.devices < 1:
            raise UserError("trainer.nnodes", f"{self.nodes} nodes × {self.devices_per_node} devices: no device")
        groups = {"tp × pp × cp": self.tp * self.pp * self.cp, "rollout tp × dp × pp": self.rollout_devices_per_replica}
        if self.engine == "megatron":
            groups["etp × ep × pp"] = self.etp * self.ep * self.pp
        elif self.fsdp_size > 0:
            groups["fsdp_size"] = self.fsdp_size
        for name, size in groups.items():
            if self.devices % size:
                raise UserError(
                    "trainer.n_gpus_per_node", f"{self.devices} devices are not a multiple of {name} = {size}"
                )


def _dtype_bytes(config: Any, key: str, default: str) -> int:
    name = str(_select(config, key, default))
    if name not in DTYPE_BYTES:
        raise UserError(key, f"dtype {name!r}: reasonrl plan knows {', '.join(sorted(DTYPE_BYTES))}")
    return DTYPE_BYTES[name]


def _select(config: Any, key: str, default: Any = None) -> Any:
    from omegaconf import OmegaConf

    value = OmegaConf.select(config, key, default=default)
    return default if value is None else value


def layout_of(config: Any) -> Layout:
    """The layout a composed ``reasonrl train`` config asks for (verl's keys)."""
    actor = "actor_rollout_ref.actor"
    engine = "megatron" if _select(config, f"{actor}.strategy") == "megatron" else "fsdp"
    rollout = "actor_rollout_ref.rollout"
    common = dict(
        engine=engine,
        nodes=int(_select(config, "trainer.nnodes", 1)),
        devices_per_node=int(_select(config, "trainer.n_gpus_per_node", 1)),
        rollout_tp=int(_select(config, f"{rollout}.tensor_model_parallel_size", 1)),
        rollout_dp=int(_select(config, f"{rollout}.data_parallel_size", 1)),
        rollout_pp=int(_select(config, f"{rollout}.pipeline_model_parallel_size", 1)),
        rollout_bytes=_dtype_bytes(config, f"{rollout}.dtype", "bfloat16"),
        uses_reference=bool(_select(config, f"{actor}.use_kl_loss", False))
        or bool(_select(config, "algorithm.use_kl_in_reward", False)),
    )
    if engine == "megatron":
        mcore = f"{actor}.megatron"
        tp = int(_select(config, f"{mcore}.tensor_model_parallel_size", 1))
        ddp = _select(config, f"{mcore}.override_ddp_config", {}) or {}
        dtype_bytes = _dtype_bytes(config, f"{mcore}.dtype", "bfloat16")
        return Layout(
            **common,
            tp=tp,
            pp=int(_select(config, f"{mcore}.pipeline_model_parallel_size", 1)),
            cp=int(_select(config, f"{mcore}.context_parallel_size", 1)),
            ep=int(_select(config, f"{mcore}.expert_model_parallel_size", 1)),
            # Megatron-core: expert tensor parallel defaults to the tensor-parallel size
            etp=int(_select(config, f"{mcore}.expert_tensor_parallel_size", tp)),
            sequence_parallel=bool(_select(config, f"{mcore}.sequence_parallel", False)) and tp > 1,
            distributed_optimizer=bool(_select(config, f"{mcore}.use_distributed_optimizer", True)),
            weight_bytes=dtype_bytes,
            grad_bytes=4 if ddp.get("grad_reduce_in_fp32", True) else dtype_bytes,
            param_offload=bool(_select(config, f"{mcore}.param_offload", False)),
            optimizer_offload=bool(_select(config, f"{mcore}.optimizer_offload", False)),
            reference_bytes=dtype_bytes,
        )
    fsdp = f"{actor}.fsdp_config"
    weight_bytes = _dtype_bytes(config, f"{fsdp}.model_dtype", "fp32")
    return Layout(
        **common,
        weight_bytes=weight_bytes,
        grad_bytes=weight_bytes,
        fsdp_size=int(_select(config, f"{fsdp}.fsdp_size", -1)),
        ulysses=int(_select(config, f"{actor}.ulysses_sequence_parallel_size", 1)),
        param_offload=bool(_select(config, f"{fsdp}.param_offload", False)),
        optimizer_offload=bool(_select(config, f"{fsdp}.optimizer_offload", False)),
        reference_bytes=_dtype_bytes(config, "actor_rollout_ref.ref.fsdp_config.model_dtype", "bf16"),
    )


def load_model_config(path: str | Path) -> Any:
    """A transformers config from a config file (``config.json`` or any name) or a model folder (no download)."""
    from transformers import AutoConfig

    path = Path(path).expanduser()
    if path.is_file():
        data = json.loads(path.read_text())
        if "model_type" not in data:
            raise UserError(str(path), "not a transformers config: no model_type")
        return AutoConfig.for_model(data.pop("model_type"), **data)
    if not (path / "config.json").is_file():
        raise UserError(str(path), "no config.json here: give model=<config.json or model folder>")
    return AutoConfig.from_pretrained(path, local_files_only=True)


@dataclass(frozen=True)
class ModelShape:
    parameters: list[Parameter]
    layers: int  # decoder layers, as the model's ``layers`` list holds them (Puzzle's no-op blocks too)
    tied: bool  # input and output embeddings are one tensor


def model_shape(model_config: Any) -> ModelShape:
    """Every parameter of the model's causal-LM class, built on the meta device (no memory);
    tied weights once, as ``named_parameters`` lists them."""
    import torch
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(model_config)
    parameters = []
    for name, parameter in model.named_parameters():
        numel, rows = parameter.numel(), parameter.shape[0] if parameter.dim() else 1
        for (model_type, suffix), real_share in UNUSED_SLOTS.items():
            if getattr(model_config, "model_type", None) == model_type and name.endswith(suffix):
                numel, rows = round(numel * real_share(model_config)), round(rows * real_share(model_config))
        parameters.append(Parameter(name, numel, rows))
    # a config's num_hidden_layers can count sub-layers (LongCat-Flash: 2 per layer); the list cannot
    lists = [m for n, m in model.named_modules() if isinstance(m, torch.nn.ModuleList) and n.endswith("layers")]
    layers = max((len(m) for m in lists), default=0)
    return ModelShape(parameters, layers, tied_embeddings(model_config))


#: transformers classes that allocate parameters their forward never reads: (model_type, parameter
#: suffix) -> the share of the tensor that is real. LongCat-Flash's experts tensor has a slot for each
#: zero-computation expert too (transformers 5.19, ``LongcatFlashExperts.gate_up_proj``: ``total_experts``
#: rows, identity experts never indexed), which would add 180 B parameters to the 560 B model.
UNUSED_SLOTS = {
    ("longcat_flash", ".experts.gate_up_proj"): lambda c: c.n_routed_experts / (c.n_routed_experts + c.zero_expert_num),
}


def tied_embeddings(model_config: Any) -> bool:
    text = model_config.get_text_config() if hasattr(model_config, "get_text_config") else model_config
    return bool(getattr(text, "tie_word_embeddings", False))


def _replicated_in_layer(name: str) -> bool:
    """Megatron keeps these whole on every tensor-parallel rank: norms, the MoE router (and its
    bias), a row-parallel layer's bias, MLA's down projections (``*_a_proj``)."""
    parts = name.split(".")[:-1]
    return (
        any("norm" in part for part in parts)
        or "router" in parts
        or parts[-1:] == ["gate"]  # the MoE router, as Mixtral and Qwen-MoE name it (mlp.gate)
        or name.endswith(("e_score_correction_bias", "o_proj.bias", "down_proj.bias"))
        or any(part.endswith("_a_proj") or part.startswith("kv_a_proj") for part in parts)
    )


@dataclass
class StageShare:
    """What one device of one pipeline stage holds: dense and expert parameter counts."""

    dense: float = 0.0
    expert: float = 0.0

    @property
    def total(self) -> float:
        return self.dense + self.expert


def _stage_of_layer(layer: int, layers: int, pp: int) -> int:
    if layers % pp:
        raise UserError(
            "actor_rollout_ref.actor.megatron.pipeline_model_parallel_size",
            f"{layers} layers do not split evenly into {pp} pipeline stages",
        )
    return layer // (layers // pp)


def megatron_shares(parameters: Iterable[Parameter], layers: int, tied: bool, layout: Layout) -> list[StageShare]:
    """Per pipeline stage, the parameters one device holds under Megatron-core's sharding: the
    embedding on the first stage and the output layer on the last (a tied embedding's copy there
    too when pp > 1, as Megatron keeps it), both split over the vocabulary by TP; layer ``i`` on
    stage ``i // (layers / pp)``; MTP layers and the final norm on the last stage; linear weights
    split by TP, experts by EP × ETP, norms and routers whole."""
    stages = [StageShare() for _ in range(layout.pp)]
    last = layout.pp - 1

    def add(stage: int, parameter: Parameter, divisor: int, expert: bool = False) -> None:
        if parameter.numel % divisor:
            raise UserError(parameter.name, f"{parameter.numel} elements do not split {divisor} ways")
        share = parameter.numel / divisor
        if expert:
            stages[stage].expert += share
        else:
            stages[stage].dense += share

    for parameter in parameters:
        name = parameter.name
        layer = _LAYER.search(name)
        if ("embed_tokens" in name or name.startswith("lm_head")) and parameter.rows % layout.tp:
            raise UserError(name, f"a vocabulary of {parameter.rows} does not split over TP {layout.tp}")
        if "embed_tokens" in name:
            add(0, parameter, layout.tp)
            if tied and layout.pp > 1:
                add(last, parameter, layout.tp)
        elif name.startswith("lm_head"):
            add(last, parameter, layout.tp)
        elif layer and ".mtp" not in name:
            stage = _stage_of_layer(int(layer.group(1)), layers, layout.pp)
            if ".experts." in name:
                if name.rsplit(".", 2)[-2] == "experts" and parameter.rows % layout.ep:  # a fused experts tensor
                    raise UserError(name, f"{parameter.rows} experts do not split over EP {layout.ep}")
                add(stage, parameter, layout.ep * layout.etp, expert=True)
            else:
                add(stage, parameter, 1 if _replicated_in_layer(name) else layout.tp)
        elif ".mtp" in name:  # MiMo's MTP layers: Megatron builds them on the last stage
            add(last, parameter, 1 if _replicated_in_layer(name) else layout.tp)
        else:  # the final norm and anything else outside the layers: whole, on the last stage
            add(last, parameter, 1)
    return stages


def fsdp_share(parameters: Iterable[Parameter], layout: Layout) -> StageShare:
    """FSDP shards every parameter evenly over its group (``fsdp_size``; -1: every device)."""
    return StageShare(dense=sum(p.numel for p in parameters) / layout.fsdp_group)


@dataclass(frozen=True)
class RoleBytes:
    role: str
    devices: int
    layout: str
    weights: float
    gradients: float = 0.0
    optimizer: float = 0.0

    @property
    def total(self) -> float:
        return self.weights + self.gradients + self.optimizer


def _actor_bytes(share: StageShare, layout: Layout) -> tuple[float, float, float]:
    """(weights, gradients, optimizer state) in bytes on one device holding ``share``."""
    if layout.engine == "megatron":
        dense_shards, expert_shards = (
            (layout.data_parallel * layout.cp, layout.expert_data_parallel) if layout.distributed_optimizer else (1, 1)
        )
        optimizer = ADAM_MASTER_STATE_BYTES * (share.dense / dense_shards + share.expert / expert_shards)
    else:
        optimizer = 2 * layout.weight_bytes * share.total  # Adam's m and v in the parameters' dtype
    weights = 0.0 if layout.param_offload else share.total * layout.weight_bytes
    return weights, share.total * layout.grad_bytes, 0.0 if layout.optimizer_offload else optimizer


def plan_roles(model: ModelShape, layout: Layout) -> list[RoleBytes]:
    """Per role (actor, rollout, reference), its devices and the bytes on its fullest device.
    verl's hybrid engine colocates the roles on every device: their bytes add up unless verl
    offloads the one that is idle (``param_offload`` / ``optimizer_offload``, vLLM's sleep)."""
    layout.check()
    parameters = model.parameters
    total = sum(p.numel for p in parameters)
    expert_total = sum(p.numel for p in parameters if ".experts." in p.name)
    if layout.engine == "megatron":
        stages = megatron_shares(parameters, model.layers, model.tied, layout)
        fullest = max(stages, key=lambda share: sum(_actor_bytes(share, layout)))
        parallel = f"TP {layout.tp} · PP {layout.pp} · CP {layout.cp} · DP {layout.data_parallel}"
        parallel += f" · EP {layout.ep} · ETP {layout.etp}" if expert_total else ""
        parallel += " · SP" if layout.sequence_parallel else ""
    else:
        fullest = fsdp_share(parameters, layout)
        parallel = f"FSDP over {layout.fsdp_group} devices" + (
            f" · Ulysses SP {layout.ulysses}" if layout.ulysses > 1 else ""
        )
    weights, gradients, optimizer = _actor_bytes(fullest, layout)
    roles = [RoleBytes("actor", layout.devices, parallel, weights, gradients, optimizer)]
    # vLLM: dense weights split by TP and PP; experts also over the replica's DP ranks (expert parallel)
    replica = layout.rollout_devices_per_replica
    per_device = (total - expert_total) / (layout.rollout_tp * layout.rollout_pp) + expert_total / replica
    rollout = f"{layout.devices // replica} replicas × TP {layout.rollout_tp} · DP {layout.rollout_dp} · PP {layout.rollout_pp}"
    roles.append(RoleBytes("rollout (vLLM)", layout.devices, rollout, weights=per_device * layout.rollout_bytes))
    if layout.uses_reference:
        roles.append(RoleBytes("reference", layout.devices, parallel, weights=fullest.total * layout.reference_bytes))
    return roles


def format_plan(recipe: str, preset: str, model: str, parameters: list[Parameter], roles: list[RoleBytes]) -> str:
    total = sum(p.numel for p in parameters)
    lines = [
        f"reasonrl plan: recipe {recipe}, preset {preset or '(none)'}",
        f"model {model}: {total:,} parameters",
        "",
        f"{'role':<16} {'devices':>7}  {'layout':<50} {'weights':>9} {'grads':>9} {'optimizer':>9} {'total':>9}",
    ]
    for role in roles:
        lines.append(
            f"{role.role:<16} {role.devices:>7}  {role.layout:<50} {_gib(role.weights)} {_gib(role.gradients)} "
            f"{_gib(role.optimizer)} {_gib(role.total)}"
        )
    together = sum(role.total for role in roles)
    lines += [
        "",
        f"bytes per device, on the fullest device; colocated roles together: {human_bytes(together)} "
        "before activations, KV cache and buffers",
    ]
    return "\n".join(lines)


def _gib(value: float) -> str:
    return f"{human_bytes(value):>9}"


def human_bytes(value: float) -> str:
    """``1.50 GiB``: binary units, two decimals (``0 B`` for nothing)."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.2f} {unit}"
        value /= 1024
    return f"{value:.2f} TiB"
