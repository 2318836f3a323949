"""MTP on Hugging Face decoder-only models (Qwen2 / Llama / MiMo) and MiMo's checkpoint class.

``attach(model, n)`` gives any model with the Qwen2/Llama module tree (``model.layers``,
``model.norm``, ``model.rotary_emb``, ``model.embed_tokens``, ``lm_head``) ``n`` MTP layers at
``model.mtp_layers`` built from its own decoder-layer class; ``mtp_outputs`` computes the main
loss and the per-depth MTP losses (``core.mtp_forward``) in one pass.

transformers has no MiMo class (MiMo-7B ships remote code): :class:`MiMoForCausalLM` is Qwen2
plus ``model.mtp_layers.{k}.*`` and ``num_nextn_predict_layers`` in config.json — the layout
vLLM's ``MiMoForCausalLM`` / ``MiMoMTP`` read — registered with ``AutoConfig`` /
``AutoModelForCausalLM`` so verl's FSDP engine loads and saves it with its MTP layers.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from transformers import Qwen2ForCausalLM
from transformers.masking_utils import create_causal_mask
from transformers.modeling_outputs import CausalLMOutputWithPast

from reasonrl.plugins.mtp.core import MTPLayer, MTPOutput, MTPTokenLosses, mtp_token_losses
from reasonrl.plugins.mtp.hf_config import ARCHITECTURE, MODEL_TYPE, MiMoConfig


def new_mtp_layer(model: nn.Module) -> MTPLayer:
    """One MTP layer whose block is a fresh decoder layer of the host's own class (built as the
    last main layer is: same attention type; the index only matters for generation caches)."""
    config = model.config
    block = type(model.model.layers[0])(config, config.num_hidden_layers - 1)
    return MTPLayer(config.hidden_size, block, eps=config.rms_norm_eps)


def attach(model: nn.Module, num_layers: int) -> nn.Module:
    """Give ``model`` ``num_layers`` MTP layers (``model.model.mtp_layers``), in place."""
    if num_layers < 1:
        raise ValueError(f"num_layers must be >= 1, got {num_layers}")
    reference = next(model.parameters())
    model.model.mtp_layers = nn.ModuleList([new_mtp_layer(model) for _ in range(num_layers)]).to(
        reference.device, reference.dtype
    )
    model.config.num_nextn_predict_layers = num_layers
    return model


@dataclass
class MTPForwardOutput:
    main_loss: torch.Tensor
    main_logits: torch.Tensor
    mtp: MTPOutput


def _main_forward(model: nn.Module, main_forward=None, **inputs):
    """The main model's output (``main_forward``, default ``model``) and its last hidden state
    before the final norm (what vLLM hands its MTP drafter, and h^0 of the MTP chain)."""
    captured = {}
    hook = model.model.norm.register_forward_pre_hook(lambda module, args: captured.setdefault("hidden", args[0]))
    try:
        output = (main_forward or model)(**inputs)
    finally:
        hook.remove()
    return output, captured["hidden"]


def _mtp_token_losses(
    model: nn.Module,
    main_hidden: torch.Tensor,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor | None,
    position_ids: torch.Tensor | None,
    loss_mask: torch.Tensor | None,
    depths: int | None,
) -> MTPTokenLosses:
    """The MTP depths on the main model's inputs, with the main model's own attention mask
    (padding, or packed rows told apart by restarting ``position_ids``) and rotary positions."""
    packed_positions = position_ids
    if position_ids is None:
        position_ids = torch.arange(input_ids.shape[1], device=input_ids.device).unsqueeze(0)
    causal_mask = create_causal_mask(
        config=model.config,
        inputs_embeds=main_hidden,
        attention_mask=attention_mask,
        past_key_values=None,
        position_ids=position_ids,
    )
    position_embeddings = model.model.rotary_emb(main_hidden, position_ids)
    valid = None if attention_mask is None else attention_mask.bool()
    if loss_mask is not None:
        valid = loss_mask.bool() if valid is None else valid & loss_mask.bool()
    layers = model.model.mtp_layers if depths is None else model.model.mtp_layers[:depths]
    return mtp_token_losses(
        layers,
        main_hidden,
        input_ids,
        model.model.embed_tokens,
        model.lm_head,
        loss_mask=valid,
        sequence_positions=packed_positions,
        attention_mask=causal_mask,
        position_embeddings=position_embeddings,
        position_ids=position_ids,
    )


def mtp_outputs(
    model: nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor | None = None,
    loss_mask: torch.Tensor | None = None,
    depths: int | None = None,
) -> MTPForwardOutput:
    """Main next-token loss and the first ``depths`` MTP depths' losses (default: all).
    ``loss_mask`` marks the target tokens that count (e.g. responses only); padding never counts."""
    main, main_hidden = _main_forward(model, input_ids=input_ids, attention_mask=attention_mask)
    valid = torch.ones_like(input_ids, dtype=torch.bool) if attention_mask is None else attention_mask.bool()
    if loss_mask is not None:
        valid = valid & loss_mask.bool()
    targets = input_ids[:, 1:]
    per_token = nn.functional.cross_entropy(
        main.logits[:, :-1].float().reshape(-1, main.logits.shape[-1]), targets.reshape(-1), reduction="none"
    ).view_as(targets)
    main_loss = (per_token * valid[:, 1:]).sum() / valid[:, 1:].sum().clamp_min(1)
    tokens = _mtp_token_losses(model, main_hidden, input_ids, attention_mask, None, valid, depths)
    return MTPForwardOutput(main_loss, main.logits, MTPOutput(tokens.means(), tokens.logits))


@dataclass
class MiMoCausalLMOutput(CausalLMOutputWithPast):
    mtp_token_losses: tuple[torch.Tensor, ...] | None = None  # per depth [batch, T] float, when asked for
    mtp_token_valid: tuple[torch.Tensor, ...] | None = None  # per depth [batch, T] bool: the target exists


class MiMoForCausalLM(Qwen2ForCausalLM):
    """Qwen2 with MiMo's MTP layers. ``forward`` is the main model only (as MiMo's own code)
    unless the caller passes ``mtp_loss_depths=D``: then its output also carries the per-token
    losses of the first D MTP depths (``mtp_token_losses`` / ``mtp_token_valid``). verl's FSDP
    engine of model type ``mtp_language_model`` (``verl_engine.py``) asks for them in training
    forwards and hands them to the loss function in ``model_output``; ``mtp_outputs`` adds the
    reduced MTP losses to a main forward (``reasonrl mtp`` training)."""

    config_class = MiMoConfig

    def __init__(self, config: MiMoConfig):
        super().__init__(config)
        self.model.mtp_layers = nn.ModuleList([new_mtp_layer(self) for _ in range(config.num_nextn_predict_layers)])

    def forward(self, input_ids=None, attention_mask=None, position_ids=None, mtp_loss_depths: int = 0, **kwargs):
        depths = min(mtp_loss_depths, self.config.num_nextn_predict_layers)
        if not depths or input_ids is None:
            return super().forward(
                input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, **kwargs
            )
        output, main_hidden = _main_forward(
            self,
            super().forward,
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            **kwargs,
        )
        tokens = _mtp_token_losses(self, main_hidden, input_ids, attention_mask, position_ids, None, depths)
        # Fields of the output: FSDP2 hooks the output's (dataclass) fields to gather the root
        # unit's parameters (MTP layers, shared head) again before backward reaches them.
        return MiMoCausalLMOutput(
            **output, mtp_token_losses=tuple(tokens.per_token), mtp_token_valid=tuple(tokens.valid)
        )

    def mtp_outputs(self, input_ids, attention_mask=None, loss_mask=None, depths=None) -> MTPForwardOutput:
        return mtp_outputs(self, input_ids, attention_mask, loss_mask, depths)


def register_with_transformers() -> None:
    """``AutoConfig`` / ``AutoModelForCausalLM`` learn ``mimo`` (idempotent)."""
    from reasonrl.compat.transformers import register_causal_lm

    register_causal_lm(MODEL_TYPE, MiMoConfig, MiMoForCausalLM)


def to_mimo(model: nn.Module, num_layers: int) -> MiMoForCausalLM:
    """A Qwen2 model as MiMo (same main weights, ``num_layers`` new MTP layers), so its checkpoint
    carries the MTP layers in MiMo's layout. Qwen2 only: MiMo's attention is Qwen2's (q/k/v bias)."""
    if model.config.model_type not in ("qwen2", MODEL_TYPE):
        raise ValueError(
            f"MiMo's layout is Qwen2's: cannot convert model_type {model.config.model_type!r} (attach() works in memory)"
        )
    values = model.config.to_dict()
    values.pop("model_type", None)
    values["num_nextn_predict_layers"] = num_layers
    values["architectures"] = [ARCHITECTURE]
    mimo = MiMoForCausalLM(MiMoConfig(**values)).to(next(model.parameters()).dtype)
    missing, unexpected = mimo.load_state_dict(
        {k: v for k, v in model.state_dict().items() if ".mtp_layers." not in k}, strict=False
    )
    if unexpected or any(".mtp_layers." not in name for name in missing):
        raise ValueError(f"weights do not match MiMo's layout: missing {missing[:5]}, unexpected {unexpected[:5]}")
    return mimo
