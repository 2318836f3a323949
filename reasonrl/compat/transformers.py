"""transformers internals reasonrl uses (transformers 5.x), each behind its version guard."""

from __future__ import annotations

from typing import Any

from reasonrl.compat import Reach, declare, never

TRANSFORMERS_5 = ">=5.9.0,<5.20"

ATTENTION_IMPLEMENTATION = declare(
    Reach(
        name="transformers.attn-implementation",
        package="transformers",
        versions=TRANSFORMERS_5,
        touches="PretrainedConfig._attn_implementation (set on configs built in memory)",
        used_by="puzzle plugin (subblocks, parent, toy models built without from_pretrained)",
        public_hook="PretrainedConfig(attn_implementation=...) honoured by every constructor path",
        needed=never,
    )
)

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


def set_attention_implementation(config: Any, name: str | None) -> None:
    """Make models built from ``config`` use attention ``name`` (``sdpa``, ``eager``, ...)."""
    ATTENTION_IMPLEMENTATION.require()
    config._attn_implementation = name


def attention_implementation(config: Any) -> str | None:
    return getattr(config, "_attn_implementation", None)


def register_causal_lm(model_type: str, config_class: type, model_class: type) -> None:
    """``AutoConfig`` / ``AutoModelForCausalLM`` learn ``model_type`` (idempotent)."""
    AUTO_REGISTRY.require()
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    if model_type not in CONFIG_MAPPING:
        AutoConfig.register(model_type, config_class)
        AutoModelForCausalLM.register(config_class, model_class)
