"""The upstream internals the mtp plugin reaches into — verl's FSDP engine and SFT trainer, vLLM's
drafter metadata, megatron-core's MTP loss and forward — each behind its version guard, with the
accessors that call ``reach.require()`` first. Offered to ``reasonrl train`` and ``reasonrl
plugins`` through the plugin's ``reasonrl_reaches`` hook; importing this module imports no
upstream package. (Reaches the mtp plugin shares with others — verl's engine registry,
transformers' Auto registry, megatron's host buffers — stay in ``reasonrl.compat``.)
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Callable

from reasonrl.compat import Reach, config_value, never
from reasonrl.compat.megatron import MEGATRON_0_16
from reasonrl.compat.verl import VERL_0_9

if TYPE_CHECKING:  # torch is imported where it is used: `reasonrl plugins` reads this module's table only
    import torch

# ---------------------------------------------------------------------------------------- verl


def _mtp_engine_selected(config: Any) -> bool:
    return config_value(config, "actor_rollout_ref.model.model_type") == "mtp_language_model"


FSDP_ENGINE = Reach(
    name="verl.fsdp-engine-outputs",
    package="verl",
    versions=VERL_0_9,
    touches="FSDPEngineWithLMHead.prepare_model_inputs/prepare_model_outputs (subclassed: the model's per-token "
    "MTP losses requested in training forwards and added to model_output), the engine's keyword constructor and "
    "model_config.model_type == 'language_model' in _build_module",
    used_by="mtp plugin, engine model type mtp_language_model (trained MTP layers on verl's FSDP actor and SFT trainer)",
    public_hook="an engine option naming extra model-output fields that reach the loss function in model_output",
    needed=_mtp_engine_selected,
)


SFT_TRAINER = Reach(
    name="verl.sft-trainer",
    package="verl",
    versions=VERL_0_9,
    touches="SFTTrainer._build_engine (redone with model type mtp_language_model: TrainingWorker, "
    "TrainingWorkerConfig, the trainer's model/engine/optimizer/checkpoint/profiler configs), "
    "engine.forward_backward_batch (wrapped for per-depth MTP target counts)",
    used_by="mtp plugin, verl's SFT trainer with the MTP loss (python -m reasonrl.plugins.mtp.verl_sft)",
    public_hook="a loss-function hook in SFTTrainer that receives the global batch's token counts",
    needed=never,
)


def fsdp_language_model_engine() -> type:
    """verl's ``FSDPEngineWithLMHead`` (the MTP engine subclasses it)."""
    FSDP_ENGINE.require()
    from verl.workers.engine.fsdp.transformer_impl import FSDPEngineWithLMHead

    return FSDPEngineWithLMHead


def sft_trainer_base() -> type:
    """verl's ``SFTTrainer`` (the MTP SFT trainer subclasses it)."""
    SFT_TRAINER.require()
    from verl.trainer.sft_trainer import SFTTrainer

    return SFTTrainer


# ---------------------------------------------------------------------------------------- vLLM

#: the multi-layer MTP drafter and its first-pass hook: run on 0.32 (CPU build); 0.24 (verl's GPU pin)
#: source-compared (same proposer, metadata and layer interfaces) and loaded on a CPU host
VLLM_MTP_DRAFTER = ">=0.24.0,<0.33"
#: Set (``multi_layer=True``) in the Ray workers' environment by ``+reasonrl/mtp=mimo`` when drafting is on.
MTP_DRAFTER_ENV = "REASONRL_MTP_DRAFTER"


def _multi_layer_drafting(config: Any) -> bool:
    return bool(
        config_value(config, "reasonrl.mtp.enable")
        and config_value(config, "reasonrl.mtp.drafting")
        and int(config_value(config, "reasonrl.mtp.num_speculative_tokens", 1) or 1) > 1
    )


MTP_DRAFTER = Reach(
    name="vllm.mtp-drafter",
    package="vllm",
    versions=VLLM_MTP_DRAFTER,
    touches="the drafter's attention metadata (num_actual_tokens, query_start_loc, slot_mapping, block_table_tensor), "
    "SpecDecodeBaseProposer.set_inputs_first_pass (patch vllm-mtp-first-pass), Qwen2DecoderLayer's signature",
    used_by="mtp plugin's multi-layer drafter (reasonrl.mtp.num_speculative_tokens > 1; for k = 1 vLLM's own MiMoMTPModel computes the same)",
    public_hook="a per-step index and the first pass's sample indices passed to MTP drafters (vLLM's MiMo drafter asserts spec_step_idx == 0)",
    needed=_multi_layer_drafting,
)


def mtp_drafter_requested() -> bool:
    """reasonrl's MTP drafting is switched on for this process's run (``REASONRL_MTP_DRAFTER``)."""
    return os.environ.get(MTP_DRAFTER_ENV, "").strip().lower() in ("multi_layer=true", "1", "true")


def mtp_drafter_active() -> str | None:
    """None when reasonrl's multi-layer drafter should replace vLLM's ``MiMoMTPModel`` in this
    process; otherwise why not (the reason ``reasonrl plugins`` and the patch status show)."""
    if not mtp_drafter_requested():
        return (
            f"reasonrl's MTP drafting is off in this process ({MTP_DRAFTER_ENV} unset): vLLM's own MiMoMTPModel is kept"
        )
    state, installed = MTP_DRAFTER.state()
    if state != "supported":
        return (
            f"reasonrl's multi-layer MTP drafter is written for vllm{MTP_DRAFTER.versions}, vllm {installed} is installed: "
            "vLLM's own MiMoMTPModel drafts (layer 1 only; k > 1 is refused at start-up)"
            if installed
            else "vLLM is not installed"
        )
    return None


def attention_boundaries(metadata: Any) -> tuple[int, Any, Any]:
    """(tokens in the pass, per-request start offsets, KV slot per token) of vLLM 0.32's attention metadata."""
    return int(metadata.num_actual_tokens), metadata.query_start_loc[:-1].long(), metadata.slot_mapping


def block_table(metadata: Any) -> Any:
    """Per-request KV block ids (vLLM 0.32: ``block_table_tensor``)."""
    return metadata.block_table_tensor


def first_pass_patch_skip_reason() -> str | None:
    """The ``vllm-mtp-first-pass`` patch serves only reasonrl's multi-layer drafter."""
    reason = mtp_drafter_active()
    return None if reason is None else f"it serves only reasonrl's multi-layer MTP drafter: {reason}"


# ------------------------------------------------------------------------------- megatron-core

MTP_LOSS_INTERNALS = Reach(
    name="megatron.mtp-loss-internals",
    package="megatron-core",
    versions=MEGATRON_0_16,
    touches="GPTModel.compute_language_model_loss (wrapped to record per-token losses), "
    "MTPLossLoggingHelper.tracker['values'] (allocated on CUDA)",
    used_by="mtp plugin's proof that megatron-core's MTP loss equals L_main + λ·mean_k L^k",
    public_hook="per-depth MTP losses returned by GPTModel.forward, a device for the logging tracker",
    needed=never,
)


MTP_FORWARD_INTERNALS = Reach(
    name="megatron.mtp-forward-internals",
    package="megatron-core",
    versions=MEGATRON_0_16,
    touches="TransformerBlock.final_layernorm (hooked: the h^0 MTP receives), "
    "MultiTokenPredictionBlock.layers[k].{enorm,hnorm,eh_proj,final_layernorm} (weights read), "
    ".transformer_layer (hooked for its call's arguments, called directly), "
    "GPTModel.embedding / output_layer called directly",
    used_by="mtp plugin's check of megatron-core's MTP forward against core.mtp_token_losses",
    public_hook="per-depth MTP logits or hidden states returned by GPTModel.forward",
    needed=never,
)


def record_language_model_losses(model: Any, sink: list) -> Callable[[], None]:
    """Append every per-token loss ``model.compute_language_model_loss`` returns (the MTP depths
    first, then the main loss) to ``sink``; returns the function that undoes it."""
    MTP_LOSS_INTERNALS.require()
    original = model.compute_language_model_loss

    def recording(labels, logits):
        loss = original(labels, logits)
        sink.append(loss)
        return loss

    model.compute_language_model_loss = recording
    return lambda: setattr(model, "compute_language_model_loss", original)


def mtp_logged_losses(depth: int | None = None) -> torch.Tensor:
    """megatron's per-depth MTP loss log; with ``depth``, first reset to host zeros of that size."""
    MTP_LOSS_INTERNALS.require()
    import torch
    from megatron.core.transformer.multi_token_prediction import MTPLossLoggingHelper

    if depth is not None:
        MTPLossLoggingHelper.tracker["values"] = torch.zeros(depth)
    return MTPLossLoggingHelper.tracker["values"]


def mtp_layer_parts(model: Any) -> list[dict]:
    """Per MTP depth of a GPTModel: its ``enorm``, ``hnorm``, ``eh_proj`` (weight over
    [embedding ; hidden], megatron's order), ``final_layernorm`` modules and its ``transformer_layer``."""
    MTP_FORWARD_INTERNALS.require()
    names = ("enorm", "hnorm", "eh_proj", "final_layernorm", "transformer_layer")
    return [{name: getattr(layer, name) for name in names} for layer in model.mtp.layers]


def capture_mtp_inputs(model: Any, sink: dict) -> Callable[[], None]:
    """During ``model``'s forward record in ``sink``: ``h0_before_norm`` / ``h0_after_norm`` (the
    main decoder's last hidden state around its final layernorm, [s, b, h]) and ``block_kwargs``
    (per depth, the keyword arguments the MTP layer passes its transformer layer, less
    ``hidden_states``). Returns the function that removes the hooks."""
    MTP_FORWARD_INTERNALS.require()
    norm = model.decoder.final_layernorm
    sink["block_kwargs"] = [None] * len(model.mtp.layers)

    def block_inputs(depth: int) -> Callable:
        def hook(module, args, kwargs):
            sink["block_kwargs"][depth] = {name: value for name, value in kwargs.items() if name != "hidden_states"}

        return hook

    handles = [
        norm.register_forward_pre_hook(lambda module, args: sink.__setitem__("h0_before_norm", args[0])),
        norm.register_forward_hook(lambda module, args, output: sink.__setitem__("h0_after_norm", output)),
    ] + [
        layer.transformer_layer.register_forward_pre_hook(block_inputs(depth), with_kwargs=True)
        for depth, layer in enumerate(model.mtp.layers)
    ]
    return lambda: [handle.remove() for handle in handles]


def embedding_and_head(model: Any) -> tuple[Callable, Callable]:
    """``model``'s word embedding and output layer in [batch, seq, ·] layout (megatron's are
    [seq, batch, ·]; the output layer returns (logits, bias))."""
    MTP_FORWARD_INTERNALS.require()
    weight = model.shared_embedding_or_output_weight() if model.share_embeddings_and_output_weights else None

    def embed(input_ids: torch.Tensor) -> torch.Tensor:
        import torch

        positions = torch.arange(input_ids.shape[1], device=input_ids.device).expand_as(input_ids)
        return model.embedding(input_ids=input_ids, position_ids=positions).transpose(0, 1)

    def head(hidden: torch.Tensor) -> torch.Tensor:
        return model.output_layer(hidden.transpose(0, 1), weight=weight)[0].transpose(0, 1)

    return embed, head


def _mtp_on_megatron(config: Any) -> bool:
    return bool(config_value(config, "actor_rollout_ref.model.mtp.enable")) and (
        config_value(config, "actor_rollout_ref.actor.strategy") == "megatron"
    )


MIMO_MTP_BLOCK = Reach(
    name="megatron.mtp-block-forward",
    package="megatron-core",
    versions=MEGATRON_0_16,
    touches="MultiTokenPredictionBlock.forward (subclassed: MiMo's inputs), MultiTokenPredictionLayer._postprocess "
    "(subclassed: no final norm on the state handed on), TransformerBlock.final_layernorm (pre-hooked: h^0), "
    "get_mtp_layer_offset; verl's MegatronEngine._build_megatron_module (wrapped)",
    used_by="mtp plugin's MiMo MTP function on verl's Megatron actor (megatron_mimo.py, verl_megatron.py)",
    public_hook="an MTP block spec option for the state each depth receives (pre-/post-norm)",
    needed=_mtp_on_megatron,
)


REACHES = (FSDP_ENGINE, SFT_TRAINER, MTP_DRAFTER, MTP_LOSS_INTERNALS, MTP_FORWARD_INTERNALS, MIMO_MTP_BLOCK)
