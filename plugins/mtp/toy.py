"""A task whose future tokens are predictable, for the MTP acceptance checks: each sequence
repeats a random motif of 3–6 tokens (after one period, every later token is determined), and
a tiny MiMo model (Qwen2 + MTP layers) trained on it with MiMo's objective."""

from __future__ import annotations

import json
import random
from pathlib import Path

import torch

from reasonrl.plugins.mtp.hf_model import MiMoConfig, MiMoForCausalLM
from reasonrl.plugins.mtp.training import train

VOCAB = 48
LENGTH = 48
#: the prompt of each bench request: two periods of the longest motif
PROMPT_LENGTH = 12


def motif_sequences(count: int, seed: int, length: int = LENGTH) -> list[list[int]]:
    rng = random.Random(seed)
    rows = []
    for _ in range(count):
        motif = [rng.randrange(2, VOCAB) for _ in range(rng.randint(3, 6))]
        rows.append([motif[index % len(motif)] for index in range(length)])
    return rows


def tiny_mimo(mtp_layers: int = 1, seed: int = 0, main_layers: int = 2, hidden: int = 64) -> MiMoForCausalLM:
    """Head dim 32 (vLLM's CPU attention needs >= 32)."""
    torch.manual_seed(seed)
    config = MiMoConfig(
        num_nextn_predict_layers=mtp_layers,
        vocab_size=VOCAB,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=main_layers,
        num_attention_heads=hidden // 32,
        num_key_value_heads=max(hidden // 64, 1),
        max_position_embeddings=256,
        tie_word_embeddings=False,
        bos_token_id=0,
        eos_token_id=1,
        pad_token_id=1,
    )
    return MiMoForCausalLM(config)


def build(out: Path, steps: int = 1500, seed: int = 0, log=print, main_layers: int = 2, hidden: int = 64) -> Path:
    """Train a tiny MiMo with one MTP layer on motif sequences (λ 0.3 → 0.1 at 3/4 of the steps),
    save it in MiMo's layout with train/held-out JSONL beside it."""
    from reasonrl.plugins.mtp.core import WeightSchedule

    out = Path(out)
    model = tiny_mimo(1, seed, main_layers, hidden)
    sequences = motif_sequences(4096, seed)
    train(model, sequences, steps, schedule=WeightSchedule(0.3, 0.1, switch_at=steps * 3 // 4), seed=seed, log=log)
    model.save_pretrained(out / "model")
    for name, rows in (("train", sequences), ("held_out", motif_sequences(256, seed + 1))):
        (out / f"{name}.jsonl").write_text("".join(json.dumps({"input_ids": row}) + "\n" for row in rows))
    return out
