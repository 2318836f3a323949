"""What the Puzzle stages (Llama-Nemotron §2) share: the settings, the run directory, the
log, and the parent, its menu, the token data and the parent's held-out logits — each loaded from
the run directory on first use, so any stage can run alone on what the earlier ones left there.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Callable

import torch

from reasonrl.plugins.puzzle.compat import set_attention_implementation
from reasonrl.plugins.puzzle.library import AttentionVariant, FfnVariant, Menu, block_config
from reasonrl.plugins.puzzle.settings import PuzzleError, PuzzleSettings
from reasonrl.plugins.puzzle.subblocks import build_model, split_layers

PARTS = ("attention", "ffn")


def log(message: str) -> None:
    print(f"[puzzle] {message}", flush=True)


@dataclass(eq=False)
class PuzzleContext:
    settings: PuzzleSettings
    run_dir: Path
    log: Callable[[str], None] = log

    def __post_init__(self) -> None:
        self.run_dir = Path(self.run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)

    # ---------------------------------------------------------------- where things are
    @property
    def parent_dir(self) -> Path:
        return self.run_dir / "parent"

    def parent_path(self) -> Path:
        """The parent's weights: ``parent/`` (the toy) or the folder ``parent/SOURCE`` names."""
        source = self.parent_dir / "SOURCE"
        return Path(source.read_text()) if source.exists() else self.parent_dir

    def subblock_path(self, stage: str, layer: int, variant) -> Path:
        """``library/<init|distilled>/layerNNN/<variant>.safetensors`` (variant names are unique across parts)."""
        return self.run_dir / "library" / stage / f"layer{layer:03d}" / f"{variant.name}.safetensors"

    # ---------------------------------------------------------------- loaded on first use
    @cached_property
    def _loaded_parent(self) -> tuple[Any, Any]:
        """(config, model): the parent as a heterogeneous model with every block the parent's."""
        from transformers import LlamaForCausalLM

        llama = LlamaForCausalLM.from_pretrained(self.parent_path(), torch_dtype=torch.float32)
        config = llama.config
        set_attention_implementation(config, "sdpa")
        parent_blocks = [
            block_config(
                AttentionVariant("attention", config.num_key_value_heads),
                FfnVariant("ffn", config.intermediate_size),
                config.num_attention_heads,
                config.hidden_size,
            )
        ] * config.num_hidden_layers
        model = build_model(config, parent_blocks, *split_layers(llama.state_dict(), config.num_hidden_layers))
        return config, model.to(self.settings.device)

    @property
    def parent_config(self):
        """The parent's LlamaConfig (loads the parent)."""
        return self._loaded_parent[0]

    @property
    def parent(self):
        """The parent as a heterogeneous model with every block the parent's (same weights)."""
        return self._loaded_parent[1]

    @cached_property
    def menu(self) -> Menu:
        return Menu.from_config(self.settings.menu, self.parent_config)

    @cached_property
    def data(self) -> dict[str, torch.Tensor]:
        """Token windows: ``calibration``, ``distill``, ``heldout`` (made once into ``data.pt``)."""
        path = self.run_dir / "data.pt"
        if not path.exists():
            s = self.settings
            total = s.calibration_sequences + s.distill_sequences + s.heldout_sequences
            if s.parent == "toy":
                from reasonrl.plugins.puzzle.toy import corpus

                tokens = corpus(total, s.sequence_length, seed=s.seed + 1)
            else:
                tokens = text_windows(self.parent_path(), s.text_files, total, s.sequence_length)
            a, b = s.calibration_sequences, s.calibration_sequences + s.distill_sequences
            torch.save({"calibration": tokens[:a], "distill": tokens[a:b], "heldout": tokens[b:]}, path)
        return {split: tokens.to(self.settings.device) for split, tokens in torch.load(path).items()}

    @cached_property
    def parent_logits(self) -> torch.Tensor:
        """The parent's next-token logits on the held-out windows (KL reference)."""
        with torch.no_grad():
            return self.parent(input_ids=self.data["heldout"]).logits[:, :-1].float()

    # ---------------------------------------------------------------- the parent's own variants
    def variants(self, part: str):
        return self.menu.attention if part == "attention" else self.menu.ffn

    def is_parent_variant(self, part: str, variant) -> bool:
        config = self.parent_config
        if part == "attention":
            return variant == AttentionVariant("attention", config.num_key_value_heads)
        return variant == FfnVariant("ffn", config.intermediate_size)

    def parent_choice(self) -> list[tuple[Any, Any]]:
        """The parent's (attention, FFN) variant pair in every layer."""
        config = self.parent_config
        return [
            (AttentionVariant("attention", config.num_key_value_heads), FfnVariant("ffn", config.intermediate_size))
        ] * config.num_hidden_layers


def text_windows(parent_path: Path, files: list, count: int, length: int) -> torch.Tensor:
    """``count`` windows of ``length`` tokens of ``files``, tokenised with the parent's tokenizer."""
    from transformers import AutoTokenizer

    if not files:
        raise PuzzleError(
            "puzzle config: text_files is empty: a real parent needs text for calibration, distillation and the held-out set"
        )
    tokenizer = AutoTokenizer.from_pretrained(parent_path)
    ids = []
    for name in files:
        ids += tokenizer(Path(name).read_text(), add_special_tokens=False)["input_ids"]
    windows = len(ids) // length
    if windows < count:
        raise PuzzleError(f"text_files hold {windows} windows of {length} tokens; the config asks for {count}")
    return torch.tensor(ids[: count * length]).reshape(count, length)
