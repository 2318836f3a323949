"""Settings of a Puzzle run (Llama-Nemotron §2): ``puzzle.yaml`` and ``--set`` overrides."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from reasonrl.errors import UserError


class PuzzleError(UserError, ValueError):
    """Input the pipeline cannot work with: the message names what is wrong, ``subject`` the
    setting (``params_fraction``, ``menu``) or file where known. ``reasonrl puzzle`` prints it
    as ``reasonrl puzzle: <subject>: <message>`` (exit 2)."""

    def __init__(self, message: str, subject: str = "") -> None:
        super().__init__(subject, message)


#: what each annotation of :class:`PuzzleSettings` accepts (bool is no int here, an int is a float)
_KINDS = {
    "int": (lambda v: isinstance(v, int) and not isinstance(v, bool), "an integer"),
    "float": (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool), "a number"),
    "bool": (lambda v: isinstance(v, bool), "true or false"),
    "str": (lambda v: isinstance(v, str), "a string"),
    "dict": (lambda v: isinstance(v, dict), "a mapping"),
    "list": (lambda v: isinstance(v, list), "a list"),
}
#: the least value of each count (a run with less cannot work: no data, no steps, no worker)
_AT_LEAST = {
    "toy_layers": 1, "toy_steps": 1, "sequence_length": 4, "calibration_sequences": 1, "distill_sequences": 1,
    "heldout_sequences": 1, "distill_steps": 0, "distill_batch": 1, "workers": 1, "batch": 1, "sequence": 1,
    "pareto_points": 1, "gpus_per_worker": 0,
}  # fmt: skip
_FRACTIONS = ("params_fraction", "kv_fraction", "latency_fraction")


def _check_type(name: str, value: Any, annotation: str) -> Any:
    kinds = [kind.strip() for kind in annotation.split("|")]
    if value is None and "None" in kinds:
        return value
    if any(_KINDS[kind][0](value) for kind in kinds if kind in _KINDS):
        return float(value) if kinds[0] == "float" else value
    wanted = " or ".join([_KINDS[k][1] for k in kinds if k in _KINDS] + (["null"] if "None" in kinds else []))
    hint = ""
    if name in _FRACTIONS:
        hint = f"; allowed: a fraction of the parent in (0, 1], or null for no {name.split('_')[0]} budget"
    elif isinstance(value, str) and "float" in kinds:
        try:
            float(value)
            hint = " (YAML reads a number such as 1e-3 as text: write 1.0e-3)"
        except ValueError:
            pass
    raise PuzzleError(f"{value!r} is not {wanted}{hint}", subject=name)


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
        """Settings from a config's keys, each checked (type, then range) before any work:
        PuzzleError naming the key."""
        fields = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - set(fields))
        if unknown:
            raise PuzzleError(f"unknown key {unknown[0]!r} (known: {sorted(fields)})", subject="puzzle config")
        values = {name: _check_type(name, value, str(fields[name].type)) for name, value in values.items()}
        settings = cls(**values)
        if settings.quality not in ("kl", "lm_loss"):
            raise PuzzleError(f"{settings.quality!r}; allowed: 'kl' or 'lm_loss'", subject="quality")
        for name, least in _AT_LEAST.items():
            if getattr(settings, name) < least:
                raise PuzzleError(f"{getattr(settings, name)} must be >= {least}", subject=name)
        for name in ("distill_lr", "nemo_distill_lr"):
            if not getattr(settings, name) > 0:
                raise PuzzleError(f"{getattr(settings, name)} must be > 0", subject=name)
        if settings.nemo_distill_steps < 0 or (settings.nemo_distill_steps and not settings.nemo):
            raise PuzzleError(
                f"{settings.nemo_distill_steps} must be >= 0, and > 0 only with nemo: true",
                subject="nemo_distill_steps",
            )
        for name in _FRACTIONS:
            value = getattr(settings, name)
            if value is not None and not 0 < value <= 1:
                raise PuzzleError(
                    f"{value} is not in (0, 1]; allowed: a fraction of the parent, or null for no budget", subject=name
                )
        if not all(isinstance(f, str) for f in settings.text_files):
            raise PuzzleError("a list of plain-text file paths", subject="text_files")
        from reasonrl.plugins.puzzle.costs import Hardware

        known = {f.name for f in dataclasses.fields(Hardware)}
        for key, value in settings.hardware.items():
            if key not in known:
                raise PuzzleError(f"unknown key {key!r} (known: {sorted(known)})", subject="hardware")
            if not _KINDS["float"][0](value) or value <= 0:
                raise PuzzleError(f"{value!r} is not a positive number", subject=f"hardware.{key}")
        return settings
