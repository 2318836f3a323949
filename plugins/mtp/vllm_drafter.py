"""A MiMo MTP drafter for vLLM that drafts token k with MTP layer k (MiMo §2.3; DeepSeek-V3 §2.2).

vLLM's own ``MiMoMTP`` drafts every token with layer 0 (it asserts ``spec_step_idx == 0``). This
class replaces it under the same architecture name (``MiMoMTPModel``, registered through
``vllm.general_plugins``) and runs the chained depths.

Depth j at sequence position m reads h^{j-1}_m and token t_{m+j}. vLLM's EAGLE loop labels the
draft of step j with position P+j, so depth j's entries are kept one label further per depth:
layer j at label i holds depth j at position i-j+1, computed from layer j-1's output at label
i-1 and the label's own input token t_{i+1}. Rotary attention only sees position differences,
so each layer attends exactly as in training. Hence:

* first pass (the target's accepted tokens, labels s..P): every layer runs over all labels;
  layer j's input at label s comes from label s-1 = the previous pass's sampled label (kept,
  per request, under that label's KV slot);
* draft step j (label P+j, token d_j): layers j+1..k run at that label; layer j+1's output
  drafts d_{j+1}.

The drafter needs the first pass's sample indices and attention metadata, which vLLM does not
pass to the model: ``patches/mtp/vllm_mtp_first_pass.py`` hands them over (``begin_first_pass``).
"""

from __future__ import annotations

import logging
import re
from collections import OrderedDict
from collections.abc import Iterable

import torch
from torch import nn

from reasonrl.plugins.mtp.compat import attention_boundaries, block_table

#: entries of (label s-1 → per-layer outputs) kept for requests between rounds
MAX_CARRIED = 65536


def register_with_vllm() -> str | None:
    """``MiMoMTPModel`` (vLLM's MiMo drafter architecture) → :class:`MiMoMultiLayerMTP`, only where
    reasonrl's MTP drafting is on (``REASONRL_MTP_DRAFTER``, set for the run's Ray workers by
    ``+reasonrl/mtp=mimo``) and vLLM is the version the drafter is written for; every other vLLM
    process of the environment keeps vLLM's own class. Returns why it did not register, or None."""
    from reasonrl.plugins.mtp.compat import mtp_drafter_active

    reason = mtp_drafter_active()
    if reason is not None:
        return reason
    from vllm import ModelRegistry

    ModelRegistry.register_model("MiMoMTPModel", "reasonrl.plugins.mtp.vllm_drafter:MiMoMultiLayerMTP")
    return None


class MTPDrafterLayer(nn.Module):
    """One MTP layer with vLLM's kernels, MiMo's parameter names (``mtp_block`` wraps the block as
    in vLLM's MiMo drafter); returns the block output *before* ``final_layernorm`` (the chained input
    of the next depth)."""

    def __init__(self, config, prefix: str, cache_config=None, quant_config=None):
        super().__init__()
        from vllm.model_executor.layers.layernorm import RMSNorm
        from vllm.model_executor.models.qwen2 import Qwen2DecoderLayer

        self.token_layernorm = RMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.hidden_layernorm = RMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.input_proj = nn.Linear(config.hidden_size * 2, config.hidden_size, bias=False)
        self.mtp_block = Qwen2DecoderLayer(
            config=config, cache_config=cache_config, quant_config=quant_config, prefix=prefix
        )
        self.final_layernorm = RMSNorm(config.hidden_size, eps=config.rms_norm_eps)

    def forward(self, token_embeddings: torch.Tensor, positions: torch.Tensor, previous: torch.Tensor) -> torch.Tensor:
        combined = self.input_proj(
            torch.cat([self.hidden_layernorm(previous), self.token_layernorm(token_embeddings)], dim=-1)
        )
        hidden, residual = self.mtp_block(positions=positions, hidden_states=combined, residual=None)
        return hidden + residual


class MiMoMultiLayerModel(nn.Module):
    def __init__(self, vllm_config, prefix: str, start: int):
        super().__init__()
        from vllm.model_executor.layers.vocab_parallel_embedding import VocabParallelEmbedding

        config = vllm_config.model_config.hf_config
        self.embed_tokens = VocabParallelEmbedding(config.vocab_size, config.hidden_size)
        self.mtp_layers = nn.ModuleList(
            [
                MTPDrafterLayer(
                    config, f"{prefix}.layers.{start + index}", vllm_config.cache_config, vllm_config.quant_config
                )
                for index in range(config.num_nextn_predict_layers)
            ]
        )

    def embed_input_ids(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.embed_tokens(input_ids)


class MiMoMultiLayerMTP(nn.Module):
    """vLLM drafter model: same inputs and weights as vLLM's ``MiMoMTP``; layer k drafts token k."""

    def __init__(self, *, vllm_config, prefix: str = ""):
        super().__init__()
        from vllm.model_executor.layers.logits_processor import LogitsProcessor
        from vllm.model_executor.layers.vocab_parallel_embedding import ParallelLMHead
        from vllm.model_executor.models.utils import maybe_prefix

        self.config = vllm_config.model_config.hf_config
        target = vllm_config.speculative_config.target_model_config.hf_text_config
        self.model = MiMoMultiLayerModel(vllm_config, maybe_prefix(prefix, "model"), start=target.num_hidden_layers)
        self.lm_head = ParallelLMHead(
            self.config.vocab_size, self.config.hidden_size, prefix=maybe_prefix(prefix, "lm_head")
        )
        self.logits_processor = LogitsProcessor(self.config.vocab_size)
        self.block_size = vllm_config.cache_config.block_size
        self.depth = self.config.num_nextn_predict_layers
        self._first_pass = None  # (sample indices, attention metadata) of the coming first pass
        self._carry = None  # [requests, depths, H]: each layer's output at the last drafted label
        self._step = None  # draft step of the next forward (None: no propose in progress)
        self._logits_layer = 0
        self._boundary: OrderedDict[int, torch.Tensor] = (
            OrderedDict()
        )  # KV slot of label P → outputs of layers 1..k-1 there
        self._announced = False

    # -- called by patches/mtp/vllm_mtp_first_pass.py right before the proposer's first forward
    def begin_first_pass(self, token_indices_to_sample: torch.Tensor, attention_metadata) -> None:
        self._first_pass = (token_indices_to_sample, attention_metadata)

    def embed_input_ids(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.model.embed_input_ids(input_ids)

    def forward(
        self, input_ids, positions, hidden_states, intermediate_tensors=None, inputs_embeds=None, spec_step_idx: int = 0
    ) -> torch.Tensor:
        embeddings = self.embed_input_ids(input_ids) if inputs_embeds is None else inputs_embeds
        layers = self.model.mtp_layers
        if self._first_pass is not None:
            return self._run_first_pass(embeddings, positions, hidden_states)
        if self._step is None:  # vLLM's profiling / warm-up runs: every layer once, nothing kept
            self._logits_layer = 0
            output = layers[0](embeddings, positions, hidden_states)
            for layer in layers[1:]:
                layer(embeddings, positions, output)
            return output
        step, batch = self._step, min(self._carry.shape[0], hidden_states.shape[0])
        previous = self._carry[:batch]
        outputs = [
            layers[depth](embeddings[:batch], positions[:batch], previous[:, depth - 1])
            for depth in range(step, self.depth)
        ]
        self._carry = torch.stack(outputs, 1) if outputs else None
        # (the proposer hands back outputs[0]'s rows as hidden_states; the carry keeps all depths)
        if self._carry is not None:
            self._carry = torch.cat([torch.zeros_like(self._carry[:, :1]).expand(-1, step, -1), self._carry], 1)
        self._logits_layer = step
        self._step = step + 1 if step + 1 < self.depth else None
        result = outputs[0]
        if result.shape[0] < hidden_states.shape[0]:
            result = torch.cat([result, hidden_states[batch:]])
        return result

    def _run_first_pass(self, embeddings, positions, target_hidden) -> torch.Tensor:
        sample_indices, metadata = self._first_pass
        self._first_pass = None
        if not self._announced:  # one line per process: proof in run logs that drafting happens
            self._announced = True
            logging.getLogger(__name__).warning(
                "reasonrl MiMoMultiLayerMTP: drafting with %d MTP layer(s), layer k drafts token k", self.depth
            )
        layers = self.model.mtp_layers
        count, starts, slot_mapping = attention_boundaries(metadata)
        boundary = self._take_boundary(positions, starts, metadata, target_hidden)
        outputs = [layers[0](embeddings, positions, target_hidden)]
        for depth in range(1, self.depth):
            shifted = torch.roll(outputs[-1], 1, 0)
            shifted[starts] = boundary[:, depth - 1]
            outputs.append(layers[depth](embeddings, positions, shifted))
        stacked = torch.stack(outputs, 1)  # [tokens, depths, H]
        sampled = sample_indices.long()
        self._keep_boundary(slot_mapping[:count][sampled], stacked[sampled, :-1])
        self._carry = stacked[sampled]
        self._logits_layer = 0
        self._step = 1 if self.depth > 1 else None
        return outputs[0]

    def _slot_of(self, positions: torch.Tensor, metadata) -> torch.Tensor:
        rows = torch.arange(positions.shape[0], device=positions.device)
        blocks = block_table(metadata)[rows, torch.div(positions, self.block_size, rounding_mode="floor")]
        return blocks.long() * self.block_size + positions % self.block_size

    def _take_boundary(self, positions, starts, metadata, like) -> torch.Tensor:
        """Outputs of layers 1..k-1 at label s-1 of each request (zeros at the sequence start)."""
        boundary = torch.zeros(
            starts.shape[0], max(self.depth - 1, 1), like.shape[-1], dtype=like.dtype, device=like.device
        )
        first_labels = positions[starts].long()
        previous_slots = self._slot_of(torch.clamp(first_labels - 1, min=0), metadata).tolist()
        for row, (label, slot) in enumerate(zip(first_labels.tolist(), previous_slots)):
            if label > 0 and slot in self._boundary:
                boundary[row] = self._boundary.pop(slot).to(like.device)
        return boundary

    def _keep_boundary(self, slots: torch.Tensor, outputs: torch.Tensor) -> None:
        if self.depth == 1:
            return
        for slot, value in zip(slots.tolist(), outputs.detach()):
            self._boundary[slot] = value
            self._boundary.move_to_end(slot)
        while len(self._boundary) > MAX_CARRIED:
            self._boundary.popitem(last=False)

    def compute_logits(self, hidden_states: torch.Tensor, spec_step_idx: int = 0) -> torch.Tensor | None:
        normed = self.model.mtp_layers[self._logits_layer].final_layernorm(hidden_states)
        return self.logits_processor(self.lm_head, normed)

    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> set[str]:
        """MiMo's Hugging Face names (``model.mtp_layers.{k}.self_attn.q_proj.weight`` ...); the rest
        of a full checkpoint (or of an RL weight sync) is skipped. An explicit stacked-parameter
        loop (q/k/v into ``qkv_proj``, gate/up into ``gate_up_proj``): vLLM 0.24's ``WeightsMapper``
        has no stacked mapping, and the layers' ``weight_loader(param, weight, shard)`` is the same
        in 0.24 and 0.32."""
        from vllm.model_executor.model_loader.weight_utils import default_weight_loader

        parameters = dict(self.named_parameters())
        loaded: set[str] = set()
        for name, tensor in weights:
            match = LAYER_NAME.match(name)
            if match and int(match.group(1)) < self.depth:
                name = _in_block(name)
            elif name not in ("model.embed_tokens.weight", "lm_head.weight"):
                continue
            for checkpoint_part, stacked_part, shard in STACKED_PARAMETERS:
                if checkpoint_part in name:
                    target = parameters[name.replace(checkpoint_part, stacked_part)]
                    target.weight_loader(target, tensor, shard)
                    loaded.add(name.replace(checkpoint_part, stacked_part))
                    break
            else:
                if name not in parameters:
                    continue  # e.g. a rotary inv_freq buffer
                target = parameters[name]
                getattr(target, "weight_loader", default_weight_loader)(target, tensor)
                loaded.add(name)
        return loaded


#: an MTP layer's checkpoint names; the block's parts sit under ``mtp_block`` in the module
LAYER_NAME = re.compile(r"^model\.mtp_layers\.(\d+)\.")
BLOCK_PARTS = (".self_attn.", ".mlp.", ".input_layernorm.", ".post_attention_layernorm.")
STACKED_PARAMETERS = (
    (".q_proj.", ".qkv_proj.", "q"),
    (".k_proj.", ".qkv_proj.", "k"),
    (".v_proj.", ".qkv_proj.", "v"),
    (".gate_proj.", ".gate_up_proj.", 0),
    (".up_proj.", ".gate_up_proj.", 1),
)


def _in_block(name: str) -> str:
    for part in BLOCK_PARTS:
        if part in name:
            return name.replace(part, ".mtp_block" + part, 1)
    return name
