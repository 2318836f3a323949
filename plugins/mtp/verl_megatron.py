"""MiMo MTP trained on verl's Megatron actor (MiMo §2.2; ``reasonrl.mtp.train=true`` with
``actor.strategy=megatron``).

verl 0.9.1 trains MTP layers on its Megatron engine with megatron-core's MTP loss
(``mtp_loss_scaling_factor`` = λ, mirrored from ``reasonrl.mtp.loss_weight``), but megatron-core's
MTP *forward* is DeepSeek-V3's, not MiMo's, and mbridge's MiMo bridge loads the MTP input projection
with its halves in the wrong order. Where verl builds a MiMo model with MTP on,
``MegatronEngine._build_megatron_module`` is wrapped: the patch ``mbridge-mimo-input-proj`` is applied
before the weights load, and each model chunk's MTP block then computes MiMo's function
(:mod:`reasonrl.plugins.mtp.megatron_mimo`). The trained layers are exported through mbridge to
vLLM's drafter in Hugging Face MiMo layout like every other weight.
"""

from __future__ import annotations

import functools

from verl.workers.engine.megatron import transformer_impl

MIMO_MODEL_TYPE = "mimo"


def builds_mimo_mtp(model_config) -> bool:
    """verl's model config asks for a MiMo model with its MTP layers."""
    mtp = getattr(model_config, "mtp", None)
    hf_config = getattr(model_config, "hf_config", None)
    return bool(mtp is not None and mtp.enable and getattr(hf_config, "model_type", None) == MIMO_MODEL_TYPE)


def _wrap(original):
    @functools.wraps(original)
    def _build_megatron_module(self):
        if not builds_mimo_mtp(self.model_config):
            return original(self)
        from megatron.core.utils import unwrap_model

        from reasonrl.patches.mtp import mbridge_mimo_input_proj
        from reasonrl.patching import apply_patch
        from reasonrl.plugins.mtp.megatron_mimo import use_mimo_function

        apply_patch(mbridge_mimo_input_proj.PATCH)
        module = original(self)
        converted = sum(use_mimo_function(unwrap_model(chunk)) for chunk in module)
        if converted:
            layers = self.tf_config.mtp_num_layers
            print(
                f"[reasonrl] MiMo's MTP function on megatron-core: {layers} MTP layer(s), h^0 before the final norm, "
                "un-normed chaining",
                flush=True,
            )
        return module

    _build_megatron_module.__reasonrl_adapter__ = __name__
    return _build_megatron_module


def register() -> None:
    """Wrap ``MegatronEngine._build_megatron_module`` once (idempotent)."""
    engine = transformer_impl.MegatronEngine
    if getattr(engine._build_megatron_module, "__reasonrl_adapter__", None) != __name__:
        engine._build_megatron_module = _wrap(engine._build_megatron_module)


register()  # see reasonrl.bridges.import_hooks.register_adapter_when_loaded
