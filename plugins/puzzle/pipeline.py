"""The Puzzle pipeline (Llama-Nemotron §2, SPEC §6) in stages, each writing its artefacts into
the run directory and skipped when they are already there (resumable stage by stage):

parent → build-library → distill → score → search (+ Pareto front) → export (+ FFN Fusion).

The stages live in ``stages/`` and share one ``PuzzleContext`` (``context.py``); ``Pipeline``
runs them in order.
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


class Pipeline:
    STAGES = tuple(_STAGES)

    def __init__(self, settings: PuzzleSettings, run_dir: Path, log: Callable[[str], None] = log):
        self.context = PuzzleContext(settings, Path(run_dir), log)

    def run(self, stages=STAGES) -> None:
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
