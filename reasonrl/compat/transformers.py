"""transformers internals reasonrl uses (transformers 5.x), each behind its version guard."""

from __future__ import annotations

from reasonrl.compat import Reach, declare

TRANSFORMERS_5 = ">=5.9.0,<5.20"

AUTO_REGISTRY = declare(
    Reach(
        name="transformers.auto-registry",
        package="transformers",
        versions=TRANSFORMERS_5,
        touches="transformers.models.auto.configuration_auto.CONFIG_MAPPING (is a model type registered?)",
        used_by="mtp plugin (MiMoForCausalLM), puzzle plugin (DeciLMForCausalLM) registered with the Auto classes",
        public_hook="an idempotent AutoConfig.register (it raises for a known type)",
    )
)


def register_causal_lm(model_type: str, config_class: type, model_class: type) -> None:
    """``AutoConfig`` / ``AutoModelForCausalLM`` learn ``model_type`` (idempotent)."""
    AUTO_REGISTRY.require()
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    if model_type not in CONFIG_MAPPING:
        AutoConfig.register(model_type, config_class)
        AutoModelForCausalLM.register(config_class, model_class)
