"""MiMo's MTP function on megatron-core (MiMo §2.2), for verl's Megatron actor.

megatron-core 0.16.1's MTP (DeepSeek-V3's) feeds depth 1 the main model's state *after* the final
norm and hands each depth's *normed* output on to the next depth. MiMo, and vLLM's MiMo drafter
that the trained layers draft with, use both *before* the norm:

    h^0      = the decoder's output before ``decoder.final_layernorm``
    h^k      = Block_k(W_k [hnorm(h^{k-1}) ; enorm(Emb(t_{i+k}))])      chained un-normed
    logits^k = Head(final_layernorm_k(h^k))

:func:`use_mimo_function` turns a ``GPTModel``'s MTP block into that. Parameters, their names and
megatron's loss (``_postprocess``: per-depth CE, λ/D scaling) stay as they are, so checkpoints and
mbridge's MiMo name map are unchanged; only the forward differs. Measured against
``core.mtp_token_losses`` in :func:`reasonrl.plugins.mtp.megatron_adapter.forward_agreement`
(reading ``megatron_mimo``).
"""

from __future__ import annotations

import torch
from megatron.core.transformer.multi_token_prediction import (
    MultiTokenPredictionBlock,
    MultiTokenPredictionLayer,
    get_mtp_layer_offset,
)
from megatron.core.utils import make_viewless_tensor

_PRE_NORM = "_reasonrl_pre_norm_main_state"


class MiMoMTPLayer(MultiTokenPredictionLayer):
    """megatron's MTP layer handing on its transformer layer's output un-normed (the block norms
    the copy that goes to the head)."""

    def _postprocess(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return make_viewless_tensor(inp=hidden_states, requires_grad=True, keep_graph=True)


class MiMoMTPBlock(MultiTokenPredictionBlock):
    """megatron's MTP block with MiMo's inputs: depth 1 gets the decoder's pre-norm state (recorded
    by a hook on ``decoder.final_layernorm`` in this forward), depth k depth k-1's un-normed output.
    Returns what megatron's block returns: [main (normed) ; normed depth 1 ; ... ] along the sequence."""

    def forward(self, input_ids, position_ids, hidden_states, attention_mask, extra_block_kwargs=None, **kwargs):
        if get_mtp_layer_offset(self.config, self.vp_stage) != 0:
            raise NotImplementedError("MiMo's MTP function needs all MTP layers in one pipeline stage")
        state = self.__dict__.pop(_PRE_NORM, None)
        if state is None:
            raise RuntimeError("MiMo MTP: the decoder's final norm did not run in this forward (no pre-norm h^0)")
        outputs = [hidden_states]  # the main model's normed state: its logits
        for layer in self.layers:
            state, input_ids, position_ids = layer(
                input_ids=input_ids,
                position_ids=position_ids,
                hidden_states=state,
                attention_mask=attention_mask,
                **kwargs,
                **(extra_block_kwargs or {}),
            )
            outputs.append(layer.final_layernorm(state))
        return torch.cat(outputs, dim=0)


def use_mimo_function(model: torch.nn.Module) -> bool:
    """Give a megatron ``GPTModel`` (unwrapped) MiMo's MTP forward; False when it has no MTP block
    on this pipeline stage. Idempotent."""
    from reasonrl.plugins.mtp.compat import MIMO_MTP_BLOCK

    MIMO_MTP_BLOCK.require()
    block = getattr(model, "mtp", None)
    if block is None or getattr(model, "mtp_process", False) is False:
        return False
    if isinstance(block, MiMoMTPBlock):
        return True
    norm = getattr(model.decoder, "final_layernorm", None)
    if norm is None:
        raise NotImplementedError("MiMo MTP: the decoder's final norm is not on the MTP layers' pipeline stage")
    for layer in block.layers:
        layer.__class__ = MiMoMTPLayer
    block.__class__ = MiMoMTPBlock

    def forget(module, args, kwargs):  # a forward that skips the norm must not see the last one's state
        block.__dict__.pop(_PRE_NORM, None)

    def record(module, args):
        block.__dict__[_PRE_NORM] = args[0]

    model.register_forward_pre_hook(forget, with_kwargs=True)
    norm.register_forward_pre_hook(record)
    return True
