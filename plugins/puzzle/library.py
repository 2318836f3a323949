"""The block library (Llama-Nemotron §2): per layer, alternative attention and FFN
subblocks, initialised from the parent before local distillation.

The menu is configuration (``Menu.from_config``): attention ``parent`` | ``{kv_heads: k}`` (GQA,
KV heads merged by averaging each group of the parent's) | ``linear`` | ``no_op``; FFN
fractions of the parent's width (channels ranked by activation importance on calibration
data, the top ones kept) | ``linear`` | ``no_op``. Linear variants start from the least-squares
fit of the parent subblock on calibration activations.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from reasonrl.plugins.puzzle.block_config import FFN_ROUND, AttentionConfig, BlockConfig, FFNConfig, ffn_mult_for
from reasonrl.plugins.puzzle.settings import PuzzleError


@dataclass(frozen=True)
class AttentionVariant:
    kind: str  # attention | linear | no_op
    kv_heads: int | None = None

    @property
    def name(self) -> str:
        return f"attn_kv{self.kv_heads}" if self.kind == "attention" else f"attn_{self.kind}"


@dataclass(frozen=True)
class FfnVariant:
    kind: str  # ffn | linear | no_op
    size: int | None = None

    @property
    def name(self) -> str:
        return f"ffn_{self.size}" if self.kind == "ffn" else f"ffn_{self.kind}"


@dataclass(frozen=True)
class Menu:
    attention: tuple[AttentionVariant, ...]
    ffn: tuple[FfnVariant, ...]

    @classmethod
    def from_config(cls, config: dict[str, Any], parent_config) -> "Menu":
        """``{"attention": [...], "ffn": [...]}`` checked against the parent's shape (needs only
        its config: checked before any training); a bad entry raises PuzzleError naming it."""
        heads, kv = parent_config.num_attention_heads, parent_config.num_key_value_heads
        width = parent_config.intermediate_size
        if not isinstance(config, dict) or set(config) - {"attention", "ffn"}:
            extra = sorted(set(config) - {"attention", "ffn"}) if isinstance(config, dict) else None
            raise PuzzleError(
                f"unknown key {extra[0]!r}; the menu has attention and ffn lists" if extra else
                f"{config!r} is not a mapping; the menu is {{attention: [...], ffn: [...]}}",
                subject="menu",
            )  # fmt: skip
        for part in ("attention", "ffn"):
            if not isinstance(config.get(part, []), list) or not config.get(part, [None]):
                raise PuzzleError(f"{config[part]!r} is not a non-empty list of variants", subject=f"menu.{part}")
        attention = []
        for item in config.get("attention", ["parent"]):
            if isinstance(item, str) and item in ("parent", "linear", "no_op"):
                attention.append(AttentionVariant("attention", kv) if item == "parent" else AttentionVariant(item))
            elif isinstance(item, dict) and set(item) == {"kv_heads"}:
                k = item["kv_heads"]
                if not isinstance(k, int) or isinstance(k, bool) or k < 1 or kv % k or heads % k:
                    raise PuzzleError(
                        f"kv_heads={k!r}: must be a whole number dividing the parent's {kv} KV heads "
                        f"(and its {heads} query heads)",
                        subject="menu.attention",
                    )
                attention.append(AttentionVariant("attention", k))
            else:
                raise PuzzleError(
                    f"entry {item!r}: use 'parent', 'linear', 'no_op' or {{kv_heads: k}}", subject="menu.attention"
                )
        ffn = []
        for item in config.get("ffn", [1.0]):
            if isinstance(item, str) and item in ("linear", "no_op"):
                ffn.append(FfnVariant(item))
            elif item == "parent":
                ffn.append(FfnVariant("ffn", width))
            elif isinstance(item, (int, float)) and not isinstance(item, bool) and 0 < item <= 1:
                size = round(width * item)
                if size % FFN_ROUND:
                    raise PuzzleError(
                        f"fraction {item}: {size} channels of the parent's {width} is not a multiple "
                        f"of {FFN_ROUND}, which the exported block_configs (ffn_mult) cannot express",
                        subject="menu.ffn",
                    )
                ffn.append(FfnVariant("ffn", size))
            else:
                raise PuzzleError(
                    f"entry {item!r}: use a fraction in (0, 1], 'parent', 'linear' or 'no_op'", subject="menu.ffn"
                )
        if len(set(attention)) != len(attention) or len(set(ffn)) != len(ffn):
            raise PuzzleError("lists a variant twice", subject="menu")
        if AttentionVariant("attention", kv) not in attention:
            raise PuzzleError(
                "must keep the parent's own attention ('parent'): the budgets are fractions of the parent's",
                subject="menu.attention",
            )
        if FfnVariant("ffn", width) not in ffn:
            raise PuzzleError(
                "must keep the parent's own FFN (1.0 or 'parent'): the budgets are fractions of the parent's",
                subject="menu.ffn",
            )
        return cls(tuple(attention), tuple(ffn))

    def layer_variants(self) -> list[tuple[AttentionVariant, FfnVariant]]:
        """Every (attention, FFN) pair: the MIP's variants of one layer."""
        return [(a, f) for a in self.attention for f in self.ffn]


def block_config(attention: AttentionVariant, ffn: FfnVariant, heads: int, hidden: int) -> BlockConfig:
    attn = AttentionConfig(
        no_op=attention.kind == "no_op",
        replace_with_linear=attention.kind == "linear",
        n_heads_in_group=heads // attention.kv_heads if attention.kind == "attention" else None,
    )
    mlp = FFNConfig(
        no_op=ffn.kind == "no_op",
        replace_with_linear=ffn.kind == "linear",
        ffn_mult=ffn_mult_for(ffn.size, hidden) if ffn.kind == "ffn" else None,
    )
    return BlockConfig(attn, mlp)


# ---------------------------------------------------------------- initialisation from the parent
def merge_kv_heads(weight: torch.Tensor, parent_kv: int, kv: int, head_dim: int) -> torch.Tensor:
    """k_proj/v_proj rows of ``kv`` heads, each the mean of a group of the parent's heads."""
    grouped = weight.reshape(kv, parent_kv // kv, head_dim, -1)
    return grouped.mean(dim=1).reshape(kv * head_dim, -1)


def ffn_channel_importance(mlp, inputs: torch.Tensor) -> torch.Tensor:
    """Per intermediate channel: mean |act(gate x) · up x| over calibration tokens, times the
    norm of its down-projection column (its reach into the residual stream)."""
    with torch.no_grad():
        hidden = mlp.act_fn(mlp.gate_proj(inputs)) * mlp.up_proj(inputs)
        return hidden.abs().reshape(-1, hidden.shape[-1]).mean(dim=0) * mlp.down_proj.weight.norm(dim=0)


def prune_ffn(state: dict[str, torch.Tensor], importance: torch.Tensor, size: int) -> dict[str, torch.Tensor]:
    keep = importance.topk(size).indices.sort().values
    return {
        "gate_proj.weight": state["gate_proj.weight"][keep].clone(),
        "up_proj.weight": state["up_proj.weight"][keep].clone(),
        "down_proj.weight": state["down_proj.weight"][:, keep].clone(),
    }


def least_squares(inputs: torch.Tensor, outputs: torch.Tensor) -> torch.Tensor:
    """W (out × in) minimising ||inputs Wᵀ − outputs||² over calibration tokens."""
    x = inputs.reshape(-1, inputs.shape[-1]).double()
    y = outputs.reshape(-1, outputs.shape[-1]).double()
    return torch.linalg.lstsq(x, y).solution.T.float().contiguous()
