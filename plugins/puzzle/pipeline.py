"""The Puzzle pipeline (Llama-Nemotron §2) in stages, each writing its artefacts into
the run directory and skipped when they are already there (resumable stage by stage):

parent → build-library → distill → score → search (+ Pareto front) → export (+ FFN Fusion).

The stages live in ``stages/`` and share one ``PuzzleContext`` (``context.py``); ``Pipeline``
runs them in order, after :func:`check_inputs` has checked what they will need (the parent, the
menu against the parent's shape, the text files, the device, NeMo's environment) — from configs
and file names only, so a bad input stops the run in seconds, before the parent trains.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import torch

from reasonrl.plugins.puzzle.context import PuzzleContext, log
from reasonrl.plugins.puzzle.settings import PuzzleError, PuzzleSettings
from reasonrl.plugins.puzzle.stages import common
from reasonrl.plugins.puzzle.stages.distill import stage_distill
from reasonrl.plugins.puzzle.stages.export import stage_export
from reasonrl.plugins.puzzle.stages.library import stage_build_library
from reasonrl.plugins.puzzle.stages.parent import check_llama_parent, stage_parent
from reasonrl.plugins.puzzle.stages.pareto import plot_pareto
from reasonrl.plugins.puzzle.stages.score import stage_score
from reasonrl.plugins.puzzle.stages.search import stage_search

__all__ = ["Pipeline", "PuzzleContext", "PuzzleError", "PuzzleSettings", "check_llama_parent", "plot_pareto"]

_STAGES: dict[str, Callable[[PuzzleContext], None]] = {
    "parent": stage_parent,
    "build-library": stage_build_library,
    "distill": stage_distill,
    "score": stage_score,
    "search": stage_search,
    "export": stage_export,
}


def planned_parent_config(ctx: PuzzleContext):
    """The parent's LlamaConfig without loading or training it: the run directory's parent, the
    toy's config, or the configured folder's config.json."""
    from transformers import AutoConfig

    if (ctx.parent_dir / "config.json").exists() or (ctx.parent_dir / "SOURCE").exists():
        return AutoConfig.from_pretrained(ctx.parent_path())
    if ctx.settings.parent == "toy":
        from reasonrl.plugins.puzzle.toy import parent_config

        return parent_config(ctx.settings.toy_layers)
    return AutoConfig.from_pretrained(ctx.settings.parent)


def check_inputs(ctx: PuzzleContext, stages) -> None:
    """What ``stages`` will need, checked before any of them runs (PuzzleError naming the setting)."""
    from reasonrl.plugins.puzzle.library import Menu

    s = ctx.settings
    try:
        device = torch.device(s.device)
    except (RuntimeError, TypeError) as error:
        raise PuzzleError(f"{s.device!r} is not a torch device ({error})", subject="device") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise PuzzleError(f"{s.device!r}, but torch sees no CUDA device here; allowed: 'cpu'", subject="device")
    recorded = (ctx.parent_dir / "config.json").exists() or (ctx.parent_dir / "SOURCE").exists()
    if s.parent != "toy" and not recorded:
        check_llama_parent(s.parent)
    if set(stages) <= {"parent"}:
        return  # the menu and the data are first used by build-library
    Menu.from_config(s.menu, planned_parent_config(ctx))
    if s.parent != "toy" and not (ctx.run_dir / "data.pt").exists():
        if not s.text_files:
            raise PuzzleError(
                "is empty: a real parent needs plain-text files for calibration, distillation and the held-out set",
                subject="text_files",
            )
        missing = [name for name in s.text_files if not Path(name).is_file()]
        if missing:
            raise PuzzleError(f"{missing[0]}: no such file", subject="text_files")
    if s.nemo and "export" in stages:
        from reasonrl.plugins.puzzle.nemo_side import nemo_venv

        python = nemo_venv() / "bin" / "python"
        if not python.exists():
            raise PuzzleError(
                f"true, but NeMo's side environment {python} is missing; run: bash scripts/setup_env.sh nemo",
                subject="nemo",
            )


class Pipeline:
    STAGES = tuple(_STAGES)

    def __init__(self, settings: PuzzleSettings, run_dir: Path, log: Callable[[str], None] = log):
        self.context = PuzzleContext(settings, Path(run_dir), log)

    def run(self, stages=STAGES) -> None:
        check_inputs(self.context, stages)
        for stage in stages:
            _STAGES[stage](self.context)

    def stage_parent(self) -> None:
        stage_parent(self.context)

    # ---------------------------------------------------------------- a run directory's children
    def menu_pairs(self) -> list[tuple[Any, Any]]:
        """Every (attention, FFN) variant pair of one layer (the names ``search.json`` lists)."""
        return self.context.menu.layer_variants()

    def assemble(self, choice: list[tuple[Any, Any]]):
        return common.assemble(self.context, choice)

    def data(self) -> dict[str, torch.Tensor]:
        return self.context.data

    def evaluate(self, model, reference_logits: torch.Tensor | None = None) -> dict[str, float]:
        return common.evaluate(self.context, model, reference_logits)
