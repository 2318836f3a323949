"""The transformers internal the puzzle plugin reaches into, behind its version guard (offered
through the plugin's ``reasonrl_reaches`` hook). Shared reaches (transformers' Auto registry,
megatron's host buffers, vLLM's offline engine) stay in ``reasonrl.compat``."""

from __future__ import annotations

from typing import Any

from reasonrl.compat import Reach, never
from reasonrl.compat.transformers import TRANSFORMERS_5

ATTENTION_IMPLEMENTATION = Reach(
    name="transformers.attn-implementation",
    package="transformers",
    versions=TRANSFORMERS_5,
    touches="PretrainedConfig._attn_implementation (set on configs built in memory)",
    used_by="puzzle plugin (subblocks, parent, toy models built without from_pretrained)",
    public_hook="PretrainedConfig(attn_implementation=...) honoured by every constructor path",
    needed=never,
)


def set_attention_implementation(config: Any, name: str | None) -> None:
    """Make models built from ``config`` use attention ``name`` (``sdpa``, ``eager``, ...)."""
    ATTENTION_IMPLEMENTATION.require()
    config._attn_implementation = name


def attention_implementation(config: Any) -> str | None:
    return getattr(config, "_attn_implementation", None)


REACHES = (ATTENTION_IMPLEMENTATION,)
