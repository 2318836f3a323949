"""Settings of a Puzzle run (Llama-Nemotron §2, SPEC §6): ``puzzle.yaml`` and ``--set`` overrides."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


class PuzzleError(ValueError):
    """Input the pipeline cannot work with (the message names what is wrong)."""


@dataclass
class PuzzleSettings:
    parent: str = "toy"  # "toy" (built and trained here) or a Hugging Face LlamaForCausalLM folder
    toy_layers: int = 6
    toy_steps: int = 250
    menu: dict = field(
        default_factory=lambda: {
            "attention": ["parent", {"kv_heads": 2}, {"kv_heads": 1}, "linear", "no_op"],
            "ffn": [1.0, 0.75, 0.5, 0.25, "linear", "no_op"],
        }
    )
    text_files: list = field(
        default_factory=list
    )  # real parents: plain-text files for calibration / distillation / held-out
    sequence_length: int = 48
    calibration_sequences: int = 64
    distill_sequences: int = 256
    heldout_sequences: int = 64
    distill_steps: int = 150
    distill_lr: float = 2e-3
    distill_batch: int = 16
    workers: int = 1  # > 1: one Ray task per layer
    device: str = "cpu"  # where the parent, the subblocks and the data live (e.g. "cuda")
    gpus_per_worker: float = 0.0  # Ray tasks' GPU share when device is a GPU
    quality: str = "kl"  # kl | lm_loss: the search's quality cost
    batch: int = 64  # KV cache and latency are costed at batch × sequence
    sequence: int = 4096
    hardware: dict = field(default_factory=dict)
    measure_latency: bool = False
    params_fraction: float | None = 0.6  # budgets, as fractions of the parent (None: unconstrained)
    kv_fraction: float | None = None
    latency_fraction: float | None = None
    pareto_points: int = 10
    ffn_fusion: bool = True
    check_engines: bool = False  # export: run the child in megatron-core and vLLM, compare log-probs with transformers
    nemo: bool = False  # export: also into NeMo (.venv-nemo; `--target nemo`): child_nemo/, nemo.json
    nemo_distill_steps: int = 0  # with nemo: KD of the child from the parent in NeMo (ModelOpt), this many steps
    nemo_distill_lr: float = 3e-5  # AdamW's; the child is already close to the parent after local distillation
    seed: int = 0

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> "PuzzleSettings":
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(values) - known)
        if unknown:
            raise PuzzleError(f"puzzle config: unknown key {unknown[0]!r} (known: {sorted(known)})")
        settings = cls(**values)
        if settings.quality not in ("kl", "lm_loss"):
            raise PuzzleError(f"puzzle config: quality = {settings.quality!r}, allowed 'kl' or 'lm_loss'")
        if settings.nemo_distill_steps < 0 or (settings.nemo_distill_steps and not settings.nemo):
            raise PuzzleError(
                f"puzzle config: nemo_distill_steps = {settings.nemo_distill_steps} must be >= 0, and > 0 only with nemo: true"
            )
        if not settings.nemo_distill_lr > 0:
            raise PuzzleError(f"puzzle config: nemo_distill_lr = {settings.nemo_distill_lr} must be > 0")
        for name in ("params_fraction", "kv_fraction", "latency_fraction"):
            value = getattr(settings, name)
            if value is not None and not 0 < value <= 1:
                raise PuzzleError(f"puzzle config: {name} = {value} must be in (0, 1]")
        return settings
