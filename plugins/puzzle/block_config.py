"""Per-layer ``block_configs`` in the format of the public Llama-Nemotron (DeciLM,
``model_type: nemotron-nas``) checkpoints, read strictly and written so that values round-trip.

An FFN's width is stored as ``ffn_mult``; readers (vLLM's ``nemotron_nas``, megatron-core's
heterogeneous config, the public modelling code) compute the intermediate size as
``find_multiple(int(2 · ffn_mult · hidden / 3), 256)``, so only multiples of 256 are
expressible — :func:`ffn_mult_for` refuses anything else.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

#: keys of the public format with the only values this implementation (and vLLM) support
ATTENTION_FIXED = {
    "sparsify": None,
    "num_sink_tokens": None,
    "use_prefill_window_in_sink_attention": False,
    "unshifted_sink": False,
    "window_length": None,
}
FFN_FIXED = {"sparsify": None}
FFN_ROUND = 256


class BlockConfigError(ValueError):
    """A ``block_configs`` entry this library cannot represent."""


def find_multiple(n: int, k: int) -> int:
    return n if n % k == 0 else n + k - n % k


def intermediate_size(ffn_mult: float, hidden_size: int) -> int:
    """What every reader of the format computes from ``ffn_mult``."""
    return find_multiple(int(2 * ffn_mult * hidden_size / 3), FFN_ROUND)


def ffn_mult_for(size: int, hidden_size: int) -> float:
    """The ``ffn_mult`` that reads back as ``size`` (a multiple of 256)."""
    if size <= 0 or size % FFN_ROUND:
        raise BlockConfigError(
            f"FFN intermediate size {size} is not a positive multiple of {FFN_ROUND}: the public block_configs format (ffn_mult) cannot express it"
        )
    mult = 1.5 * size / hidden_size
    if intermediate_size(mult, hidden_size) != size:
        raise BlockConfigError(f"ffn_mult {mult!r} does not read back as {size} at hidden size {hidden_size}")
    return mult


@dataclass(frozen=True)
class AttentionConfig:
    no_op: bool = False
    replace_with_linear: bool = False
    n_heads_in_group: int | None = None  # query heads per KV head (None for no-op / linear)

    @property
    def kind(self) -> str:
        return "no_op" if self.no_op else "linear" if self.replace_with_linear else "attention"


@dataclass(frozen=True)
class FFNConfig:
    no_op: bool = False
    replace_with_linear: bool = False
    ffn_mult: float | None = None

    @property
    def kind(self) -> str:
        return "no_op" if self.no_op else "linear" if self.replace_with_linear else "ffn"


@dataclass(frozen=True)
class BlockConfig:
    attention: AttentionConfig = field(default_factory=AttentionConfig)
    ffn: FFNConfig = field(default_factory=FFNConfig)

    def to_json(self) -> dict[str, Any]:
        return {"attention": {**asdict(self.attention), **ATTENTION_FIXED}, "ffn": {**asdict(self.ffn), **FFN_FIXED}}


def _part(raw: Any, where: str, cls, fixed: dict) -> Any:
    if not isinstance(raw, dict):
        raise BlockConfigError(f"{where}: expected a mapping, got {type(raw).__name__}")
    known = {f for f in cls.__dataclass_fields__} | set(fixed)
    unknown = sorted(set(raw) - known)
    if unknown:
        raise BlockConfigError(f"{where}: unknown key {unknown[0]!r} (known: {sorted(known)})")
    for key, only in fixed.items():
        if raw.get(key, only) != only:
            raise BlockConfigError(f"{where}.{key} = {raw[key]!r} is not supported (only {only!r})")
    values = {k: v for k, v in raw.items() if k in cls.__dataclass_fields__}
    part = cls(**values)
    if part.no_op and part.replace_with_linear:
        raise BlockConfigError(f"{where}: no_op and replace_with_linear are both set")
    return part


def parse_block(raw: Any, index: int, num_attention_heads: int, hidden_size: int) -> BlockConfig:
    where = f"block_configs[{index}]"
    if not isinstance(raw, dict):
        raise BlockConfigError(f"{where}: expected a mapping, got {type(raw).__name__}")
    unknown = sorted(set(raw) - {"attention", "ffn"})
    if unknown:
        raise BlockConfigError(f"{where}: unknown key {unknown[0]!r} (known: ['attention', 'ffn'])")
    attention = _part(raw.get("attention", {}), f"{where}.attention", AttentionConfig, ATTENTION_FIXED)
    ffn = _part(raw.get("ffn", {}), f"{where}.ffn", FFNConfig, FFN_FIXED)
    if attention.kind == "attention":
        group = attention.n_heads_in_group
        if not isinstance(group, int) or group < 1 or num_attention_heads % group:
            raise BlockConfigError(
                f"{where}.attention.n_heads_in_group = {group!r} must divide num_attention_heads = {num_attention_heads}"
            )
    if ffn.kind == "ffn" and (not isinstance(ffn.ffn_mult, (int, float)) or ffn.ffn_mult <= 0):
        raise BlockConfigError(f"{where}.ffn.ffn_mult = {ffn.ffn_mult!r} must be a positive number")
    return BlockConfig(attention, ffn)


def parse_block_configs(raw: Any, num_attention_heads: int, hidden_size: int) -> list[BlockConfig]:
    if not isinstance(raw, list) or not raw:
        raise BlockConfigError("block_configs must be a non-empty list, one entry per layer")
    return [
        block if isinstance(block, BlockConfig) else parse_block(block, i, num_attention_heads, hidden_size)
        for i, block in enumerate(raw)
    ]
