"""MTP on megatron-core: its own MTP (DeepSeek-V3 style), configured, not re-implemented.

Knob mapping: ``mtp_num_layers`` = D (verl takes it from the checkpoint's
``num_nextn_predict_layers``), ``mtp_loss_scaling_factor`` = λ (verl:
``actor_rollout_ref.model.mtp.mtp_loss_scaling_factor``, written by ``+reasonrl/mtp=mimo`` from
``reasonrl.mtp.loss_weight``). megatron-core 0.16.1 (``models/gpt/gpt_model.py``, the MTP branch
of ``_postprocess``) scales each depth's mean loss by ``mtp_loss_scaling_factor / mtp_num_layers``
and injects it into the backward pass (``MTPLossAutoScaler``), i.e. it trains
L_main + λ · (1/D) Σ_k L^k — our ``core.total_loss``. :func:`gradient_agreement` checks that on a
real GPTModel (``python -m reasonrl.plugins.mtp.megatron_adapter D λ`` runs it in a fresh process).
Its per-depth L^k is not MiMo's, though: megatron feeds MTP the *normed* h^0 and chains the normed
output of each depth; :func:`forward_agreement` (``... megatron_adapter forward D``) shows exactly that.
"""

from __future__ import annotations

import json
import sys

import torch


def megatron_mtp_settings(num_layers: int, loss_weight: float) -> dict:
    """megatron-core ``TransformerConfig`` fields for D MTP layers and weight λ."""
    if num_layers < 1:
        raise ValueError(f"num_layers must be >= 1, got {num_layers}")
    if loss_weight < 0:
        raise ValueError(f"loss_weight (λ) must be >= 0, got {loss_weight}")
    return {"mtp_num_layers": num_layers, "mtp_loss_scaling_factor": loss_weight}


def _tiny_model(depth: int, loss_weight: float):
    from megatron.core.models.gpt import GPTModel
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec, get_gpt_mtp_block_spec
    from megatron.core.transformer import TransformerConfig

    config = TransformerConfig(
        num_layers=2,
        hidden_size=32,
        num_attention_heads=4,
        ffn_hidden_size=64,
        use_cpu_initialization=True,
        params_dtype=torch.float32,
        normalization="RMSNorm",
        add_bias_linear=False,
        gated_linear_unit=True,
        hidden_dropout=0.0,
        attention_dropout=0.0,
        **megatron_mtp_settings(depth, loss_weight),
    )
    layer_spec = get_gpt_layer_local_spec(normalization="RMSNorm")
    model = GPTModel(
        config=config,
        transformer_layer_spec=layer_spec,
        vocab_size=64,
        max_sequence_length=32,
        position_embedding_type="rope",
        mtp_block_spec=get_gpt_mtp_block_spec(config, layer_spec, use_transformer_engine=False),
    )
    return model


def _host_buffers(model, batch: int, length: int) -> None:
    """megatron-core's local attention and rotary tables allocate on CUDA; give them host memory."""
    from reasonrl.compat.megatron import host_attention_buffer, use_host_rotary

    use_host_rotary(model)
    host_attention_buffer(batch * model.config.num_attention_heads * length * length, torch.float32)


_last_depth_losses: list = []


def _gradients(model, tokens, labels, mask, extra_weight: float | None, depth: int) -> dict:
    """Gradients of megatron's main loss (its MTP term rides in the backward pass); with
    ``extra_weight`` also + extra_weight · (1/D) Σ_k L^k computed here from megatron's per-depth
    cross-entropies, masked as the definition says (position i of depth k predicts t_{i+k+1})."""
    from reasonrl.plugins.mtp.compat import mtp_logged_losses, record_language_model_losses

    per_token_losses = []
    restore = record_language_model_losses(model, per_token_losses)
    model.zero_grad(set_to_none=True)
    mtp_logged_losses(depth)  # reset on the host (megatron allocates it on CUDA)
    length = tokens.shape[1]
    position_ids = torch.arange(length).unsqueeze(0).expand_as(tokens)
    output = model(input_ids=tokens, position_ids=position_ids, attention_mask=mask, labels=labels)
    main_loss = output.mean()
    total = main_loss
    if extra_weight is not None:
        from reasonrl.plugins.mtp.core import total_loss

        depth_losses = []
        for k, ce in enumerate(per_token_losses[:depth], start=1):  # the MTP depths come first, then the main loss
            valid = torch.arange(length) < length - k
            depth_losses.append((ce * valid).sum() / (valid.sum() * tokens.shape[0]))
        total = total_loss(main_loss, depth_losses, extra_weight)
        logged = mtp_logged_losses()  # megatron's own per-depth means (its logging)
        _last_depth_losses[:] = [(loss.item(), logged[k].item()) for k, loss in enumerate(depth_losses)]
    total.backward()
    restore()
    return {name: parameter.grad.clone() for name, parameter in model.named_parameters() if parameter.grad is not None}


def gradient_agreement(depth: int, loss_weight: float, seed: int = 0) -> dict:
    """Max |Δ grad| between megatron-core with ``mtp_loss_scaling_factor = λ`` and our definition
    (megatron with factor 0 + λ · mean_k L^k added here), and against the other reading
    (λ per depth, summed). Needs a process group (call in a fresh process)."""
    from reasonrl.compat.megatron import close_single_process, init_single_process

    init_single_process(seed)
    torch.manual_seed(seed)
    megatron = _tiny_model(depth, loss_weight)
    reference = _tiny_model(depth, 0.0)
    reference.load_state_dict(megatron.state_dict())
    for model in (megatron, reference):
        model.train()
    batch, length = 2, 16
    _host_buffers(megatron, batch, length)
    reference.rotary_pos_emb.__class__ = megatron.rotary_pos_emb.__class__
    tokens = torch.randint(0, 64, (batch, length))
    labels = torch.roll(tokens, -1, 1)
    mask = torch.triu(torch.ones(length, length, dtype=torch.bool), diagonal=1)[None, None]
    theirs = _gradients(megatron, tokens, labels, mask, None, depth)
    ours = _gradients(reference, tokens, labels, mask, loss_weight, depth)
    summed = _gradients(reference, tokens, labels, mask, loss_weight * depth, depth)
    difference = lambda a, b: max((a[name] - b[name]).abs().max().item() for name in a)  # noqa: E731
    scale = max(grad.abs().max().item() for grad in theirs.values())
    result = {
        "depth_losses_ours_vs_megatron_logged": list(_last_depth_losses),
        "vs_ours": difference(theirs, ours),
        "vs_summed": difference(theirs, summed),
        "grad_scale": scale,
        "parameters": len(theirs),
        "mtp_parameters": sum(".mtp." in name or name.startswith("mtp.") for name in theirs),
    }
    close_single_process()
    return result


class _MegatronBlock(torch.nn.Module):
    """A megatron MTP layer's transformer layer in our [batch, seq, hidden] layout, called with the
    keyword arguments (attention mask, rotary table, ...) megatron passed it; with ``final_norm``
    also that norm on its output (megatron's reading, see :func:`forward_agreement`)."""

    def __init__(self, layer, kwargs: dict, final_norm=None):
        super().__init__()
        self.layer, self.final_norm = layer, final_norm
        self.__dict__["kwargs"] = kwargs

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        output = self.layer(hidden_states=hidden.transpose(0, 1), **self.kwargs)[0].transpose(0, 1)
        return output if self.final_norm is None else self.final_norm(output)


def _our_layers(model, block_kwargs: list, megatron_chain: bool) -> torch.nn.ModuleList:
    """Our ``MTPLayer`` per depth holding megatron's weights: token_layernorm ← enorm,
    hidden_layernorm ← hnorm, input_proj ← eh_proj with its halves swapped (megatron concatenates
    [embedding ; hidden], we [hidden ; embedding]), final_layernorm ← the layer's final layernorm.
    ``megatron_chain`` moves that final norm into the block, so the next depth gets the normed state."""
    from reasonrl.plugins.mtp.compat import mtp_layer_parts
    from reasonrl.plugins.mtp.core import MTPLayer

    layers = torch.nn.ModuleList()
    for part, kwargs in zip(mtp_layer_parts(model), block_kwargs):
        final_norm = part["final_layernorm"]
        block = _MegatronBlock(part["transformer_layer"], kwargs, final_norm if megatron_chain else None)
        layer = MTPLayer(model.config.hidden_size, block, eps=model.config.layernorm_epsilon)
        embedding_half, hidden_half = part["eh_proj"].weight.chunk(2, dim=1)
        layer.input_proj.weight.copy_(torch.cat([hidden_half, embedding_half], dim=1))
        layer.token_layernorm.weight.copy_(part["enorm"].weight)
        layer.hidden_layernorm.weight.copy_(part["hnorm"].weight)
        layer.final_layernorm.weight.copy_(final_norm.weight)
        if megatron_chain:
            layer.final_layernorm = torch.nn.Identity()
        layers.append(layer)
    return layers


@torch.no_grad()
def forward_agreement(depth: int, seed: int = 0) -> dict:
    """Max |Δ| per depth between megatron-core's per-token MTP cross-entropies and
    ``core.mtp_token_losses`` on the same weights, embedding, head and blocks, over the positions
    both count (i < T-k-1: megatron also counts i = T-k-1, whose label is whatever the caller's
    last label is). Three readings of ours:

    * ``mimo_definition``: the core as written (MiMo §2.2): h^0 before the main final norm, depth k
      chained on depth k-1's block output before its final norm;
    * ``post_norm_h0_only``: h^0 after the main final norm (megatron-core 0.16.1 puts the decoder's
      final layernorm in its last layer, so MTP receives the normed state), chaining as MiMo;
    * ``megatron_convention``: that, and depth k chained on depth k-1's *normed* output (megatron's
      ``MultiTokenPredictionLayer._postprocess`` applies ``final_layernorm`` before handing on);
    * ``megatron_mimo``: megatron's model again, its MTP block turned into MiMo's by
      ``megatron_mimo.use_mimo_function``, against ``mimo_definition``.

    Norm weights are randomised (1 + 0.5·N(0,1)) so a norm applied or skipped shows."""
    from reasonrl.compat.megatron import close_single_process, init_single_process
    from reasonrl.plugins.mtp.compat import capture_mtp_inputs, embedding_and_head, record_language_model_losses
    from reasonrl.plugins.mtp.core import mtp_token_losses

    init_single_process(seed)
    torch.manual_seed(seed)
    model = _tiny_model(depth, 0.3).eval()
    for parameter in model.parameters():
        if parameter.dim() == 1:
            parameter.copy_(1 + 0.5 * torch.randn_like(parameter))
    batch, length = 2, 16
    _host_buffers(model, batch, length)
    tokens = torch.randint(0, 64, (batch, length))
    labels = torch.roll(tokens, -1, 1)
    mask = torch.triu(torch.ones(length, length, dtype=torch.bool), diagonal=1)[None, None]
    theirs, captured = [], {}
    undo = [record_language_model_losses(model, theirs), capture_mtp_inputs(model, captured)]
    model(input_ids=tokens, position_ids=torch.arange(length).expand_as(tokens), attention_mask=mask, labels=labels)
    for restore in undo:
        restore()
    embed, head = embedding_and_head(model)
    readings = {
        "mimo_definition": ("h0_before_norm", False),
        "post_norm_h0_only": ("h0_after_norm", False),
        "megatron_convention": ("h0_after_norm", True),
    }
    result: dict = {"depth": depth}
    for reading, (h0, megatron_chain) in readings.items():
        layers = _our_layers(model, captured["block_kwargs"], megatron_chain)
        ours = mtp_token_losses(layers, captured[h0].transpose(0, 1), tokens, embed, head)
        result[reading] = [
            (ce - megatron_ce)[valid].abs().max().item()
            for ce, valid, megatron_ce in zip(ours.per_token, ours.valid, theirs[:depth])  # MTP depths first
        ]
    result["positions"] = [int(valid.sum()) for valid in ours.valid]
    result["ce_scale"] = max(ce.abs().max().item() for ce in theirs[:depth])
    # the same model with megatron_mimo's block: MiMo's function, against the definition
    from reasonrl.plugins.mtp.megatron_mimo import use_mimo_function

    use_mimo_function(model)
    mimo = []
    restore = record_language_model_losses(model, mimo)
    model(input_ids=tokens, position_ids=torch.arange(length).expand_as(tokens), attention_mask=mask, labels=labels)
    restore()
    layers = _our_layers(model, captured["block_kwargs"], False)
    ours = mtp_token_losses(layers, captured["h0_before_norm"].transpose(0, 1), tokens, embed, head)
    result["megatron_mimo"] = [
        (ce - megatron_ce)[valid].abs().max().item() for ce, valid, megatron_ce in zip(ours.per_token, ours.valid, mimo)
    ]
    close_single_process()
    return result


if __name__ == "__main__":
    if sys.argv[1] == "forward":
        print("RESULT", json.dumps(forward_agreement(int(sys.argv[2]))), flush=True)
    else:
        print("RESULT", json.dumps(gradient_agreement(int(sys.argv[1]), float(sys.argv[2]))), flush=True)
