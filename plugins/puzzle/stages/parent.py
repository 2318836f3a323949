"""Stage ``parent`` (Llama-Nemotron §2): the toy parent trained here into ``parent/``, or
a Hugging Face folder checked to be a Llama and recorded in ``parent/SOURCE``."""

from __future__ import annotations

from pathlib import Path

from reasonrl.plugins.puzzle.context import PuzzleContext
from reasonrl.plugins.puzzle.settings import PuzzleError


def stage_parent(ctx: PuzzleContext) -> None:
    target, s = ctx.parent_dir, ctx.settings
    if (target / "config.json").exists() or (target / "SOURCE").exists():
        return  # done: a toy parent saved here, or a real parent recorded
    if s.parent == "toy":
        from reasonrl.plugins.puzzle.toy import train_parent

        ctx.log(f"training the toy parent ({s.toy_layers} layers, {s.toy_steps} steps)")
        train_parent(steps=s.toy_steps, layers=s.toy_layers, seed=s.seed, log=ctx.log).save_pretrained(target)
    else:
        check_llama_parent(s.parent)
        target.mkdir(parents=True)
        (target / "SOURCE").write_text(str(Path(s.parent).resolve()))


def check_llama_parent(path: str) -> None:
    from transformers import AutoConfig

    try:
        config = AutoConfig.from_pretrained(path)
    except (OSError, ValueError) as error:
        raise PuzzleError(f"parent {path!r}: cannot read a Hugging Face config ({error})") from None
    if config.model_type != "llama":
        raise PuzzleError(
            f"parent {path!r} is model_type {config.model_type!r} ({', '.join(config.architectures or [])}): "
            "Puzzle needs a Llama-architecture parent (LlamaForCausalLM)"
        )
