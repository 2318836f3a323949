"""MTP on megatron-core: its own MTP (DeepSeek-V3 style), configured, not re-implemented.

Knob mapping: ``mtp_num_layers`` = D (verl takes it from the checkpoint's
``num_nextn_predict_layers``), ``mtp_loss_scaling_factor`` = λ (verl:
``actor_rollout_ref.model.mtp.mtp_loss_scaling_factor``, written by ``+reasonrl/mtp=mimo`` from
``reasonrl.mtp.loss_weight``). megatron-core 0.16.1 (``models/gpt/gpt_model.py``, the MTP branch
of ``_postprocess``) scales each depth's mean loss by ``mtp_loss_scaling_factor / mtp_num_layers``
and injects it into the backward pass (``MTPLossAutoScaler``), i.e. it trains
L_main + λ · (1/D) Σ_k L^k — our ``core.total_loss``. :func:`gradient_agreement` checks that on a
real GPTModel (``python -m reasonrl.plugins.mtp.megatron_adapter D λ`` runs it in a fresh process).
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
    from reasonrl.compat.megatron import mtp_logged_losses, record_language_model_losses

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


if __name__ == "__main__":
    print("RESULT", json.dumps(gradient_agreement(int(sys.argv[1]), float(sys.argv[2]))), flush=True)
