"""verl's FSDP language-model engine that hands the MiMo model's MTP losses to the loss function
(MiMo §2.2: the MTP loss kept in SFT / RL on verl's FSDP engine).

verl 0.9.1 selects a training engine from ``EngineRegistry`` by ``actor_rollout_ref.model.model_type``
(``language_model`` by default). Its FSDP engine builds the loss function's ``model_output`` from
log-probs and entropy only, so a model's extra outputs never reach the loss. Model type
``mtp_language_model`` is verl's FSDP engine plus two things, active only when verl's own switch
``model.mtp.enable_train`` is on:

* training forwards (gradients on: the actor's update, not its log-prob or reference passes) ask
  the model for its per-token MTP losses (``mtp_loss_depths``, ``hf_model.MiMoForCausalLM``);
* ``model_output`` carries them per depth k as verl's per-sequence nested tensors,
  ``mtp_{k}_token_loss`` / ``mtp_{k}_token_valid`` (flat token order, one row per sequence, as
  verl's log-probs), which the loss terms take out (:func:`take_token_losses`).

On megatron the model type maps to verl's own engine unchanged (frozen MTP layers only: training MiMo MTP
there is refused at start-up, megatron-core's MTP forward being a different function; see the README).
"""

from __future__ import annotations

import functools

import torch

MODEL_TYPE = "mtp_language_model"
LOSS_KEY, VALID_KEY = "mtp_{depth}_token_loss", "mtp_{depth}_token_valid"


def training_depths(model_config) -> int:
    """MTP depths whose losses the training forwards compute: all the checkpoint's layers when
    verl's ``mtp.enable`` and ``mtp.enable_train`` are on, else 0."""
    mtp = getattr(model_config, "mtp", None)
    if mtp is None or not (mtp.enable and mtp.enable_train):
        return 0
    return int(getattr(model_config.hf_config, "num_nextn_predict_layers", 0) or 0)


def to_flat(per_token: torch.Tensor, lengths: list[int], packed: bool) -> torch.Tensor:
    """A [batch, T] tensor in the model's layout as verl's flat token order (nested ``values()``):
    packed rows are [1, total (+ pad)]; padded rows are right-padded [batch, max_len]."""
    if packed:
        return per_token[0, : sum(lengths)]
    return torch.cat([per_token[row, :length] for row, length in enumerate(lengths)])


def nested_token_losses(output, micro_batch) -> dict[str, torch.Tensor]:
    """The model output's per-depth MTP losses as ``model_output`` entries (verl's nested layout)."""
    from verl.utils import tensordict_utils as tu

    offsets = micro_batch["input_ids"].offsets()
    lengths = offsets.diff().tolist()
    packed = tu.get_non_tensor_data(data=micro_batch, key="use_remove_padding", default=True)
    entries = {}
    for depth, (loss, valid) in enumerate(zip(output.mtp_token_losses, output.mtp_token_valid), start=1):
        for key, values in ((LOSS_KEY, loss), (VALID_KEY, valid)):
            flat = to_flat(values, lengths, packed)
            entries[key.format(depth=depth)] = torch.nested.nested_tensor_from_jagged(flat, offsets)
    return entries


def take_token_losses(model_output: dict) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Per depth, (loss, valid) in verl's flat token order, removed from ``model_output`` (so verl
    does not keep them with the step's outputs)."""
    depths = []
    depth = 1
    while LOSS_KEY.format(depth=depth) in model_output:
        loss = model_output.pop(LOSS_KEY.format(depth=depth)).values()
        valid = model_output.pop(VALID_KEY.format(depth=depth)).values()
        depths.append((loss, valid))
        depth += 1
    if not depths:
        raise RuntimeError(
            "MTP loss: the model output has no MTP losses: set actor_rollout_ref.model.model_type="
            f"{MODEL_TYPE} (+reasonrl/mtp=mimo does), verl's model.mtp.enable_train=true, and a MiMo checkpoint "
            "with MTP layers"
        )
    return depths


@functools.cache
def fsdp_engine_class() -> type:
    """verl's ``FSDPEngineWithLMHead`` with the MTP losses in ``model_output`` (built once)."""
    from reasonrl.plugins.mtp.compat import fsdp_language_model_engine

    base = fsdp_language_model_engine()  # version-guarded: overrides two verl engine methods

    class MTPLanguageModelEngine(base):
        def __init__(self, **kwargs):
            # verl's FSDP engine builds a causal LM only for model type "language_model" (it
            # selected this engine by "mtp_language_model"): the module is the same causal LM
            kwargs["model_config"].model_type = "language_model"
            super().__init__(**kwargs)

        def prepare_model_inputs(self, micro_batch):
            model_inputs, output_args = super().prepare_model_inputs(micro_batch=micro_batch)
            depths = training_depths(self.model_config)
            if depths and torch.is_grad_enabled():
                model_inputs["mtp_loss_depths"] = depths
            return model_inputs, output_args

        def prepare_model_outputs(self, output, output_args, micro_batch, logits_processor_func):
            model_output = super().prepare_model_outputs(
                output=output,
                output_args=output_args,
                micro_batch=micro_batch,
                logits_processor_func=logits_processor_func,
            )
            if getattr(output, "mtp_token_losses", None):
                model_output.update(nested_token_losses(output, micro_batch))
            return model_output

    MTPLanguageModelEngine.__qualname__ = MTPLanguageModelEngine.__name__
    return MTPLanguageModelEngine


def register_engines() -> None:
    """``EngineRegistry[mtp_language_model]``: the MTP engine for fsdp/fsdp2 on every device verl's
    own FSDP engine knows (and cpu), verl's megatron engine as is (:func:`megatron_engine_class`). Idempotent."""
    from verl.workers.engine.base import EngineRegistry

    from reasonrl.compat.verl import engine_registered

    engine = fsdp_engine_class()
    for backend in ("fsdp", "fsdp2"):
        for device in ("cuda", "npu", "cpu"):
            if engine_registered(MODEL_TYPE, backend, device) is None:
                EngineRegistry.register(model_type=MODEL_TYPE, backend=backend, device=device)(engine)
    for device in ("cuda", "npu", "cpu"):
        if engine_registered(MODEL_TYPE, "megatron", device) is None:
            EngineRegistry.register(model_type=MODEL_TYPE, backend="megatron", device=device)(megatron_engine_class())


@functools.cache
def megatron_engine_class() -> type:
    """A stand-in for verl's Megatron language-model engine of this process's device, looked up when
    the engine is built: a platform plugin (cpu_platform) may register its engine after this plugin."""
    from verl.workers.engine.base import BaseEngine, EngineRegistry

    class MegatronLanguageModelEngine(BaseEngine):
        def __new__(cls, *args, **kwargs):
            # an instance of the registered class (not of this one: Python does not run __init__ twice)
            return EngineRegistry.get_engine_cls("language_model", "megatron")(*args, **kwargs)

    return MegatronLanguageModelEngine
