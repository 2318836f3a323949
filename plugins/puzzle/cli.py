"""``reasonrl puzzle build-library | distill | score | search | export | run``.

Each stage first runs the earlier stages whose artefacts are missing (each skips itself when
they exist), so a stage command on a fresh run directory does the work up to it, and a killed
run resumes where it stopped (distillation: subblock by subblock).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from reasonrl.contracts import CliCommand

STAGE_COMMANDS = ("build-library", "distill", "score", "search", "export", "run")


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "stage", choices=STAGE_COMMANDS, help="stage to run (with the missing stages before it); run = all"
    )
    parser.add_argument(
        "--run-dir",
        type=Path,
        required=True,
        help="artefacts: parent/, library/, scores.parquet, search.json, pareto.png, child/ ...",
    )
    parser.add_argument(
        "--config",
        type=Path,
        default=None,
        help="YAML of puzzle settings (plugins/puzzle/README.md); default: the toy parent",
    )
    parser.add_argument(
        "--target",
        choices=("hf", "nemo"),
        default="hf",
        help="export / run: nemo also imports the child into NeMo in .venv-nemo (docs/nemo.md); same as --set nemo=true",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override one setting (YAML value), e.g. --set params_fraction=0.5",
    )


def load_settings(path: Path | None, overrides: list[str]):
    import yaml

    from reasonrl.plugins.puzzle.pipeline import PuzzleError, PuzzleSettings

    values = yaml.safe_load(path.read_text()) if path else {}
    if values is None:
        values = {}
    if not isinstance(values, dict):
        raise PuzzleError(f"{path}: expected a mapping of settings")
    for item in overrides:
        key, _, raw = item.partition("=")
        if not _:
            raise PuzzleError(f"--set {item!r}: expected KEY=VALUE")
        values[key] = yaml.safe_load(raw)
    return PuzzleSettings.from_dict(values)


def _run(args: argparse.Namespace) -> int:
    from reasonrl.plugins.puzzle.block_config import BlockConfigError
    from reasonrl.plugins.puzzle.nemo_side import NemoAdapterError
    from reasonrl.plugins.puzzle.pipeline import Pipeline, PuzzleError
    from reasonrl.plugins.puzzle.search import InfeasibleBudget

    try:
        overrides = [*args.set, *(["nemo=true"] if args.target == "nemo" else [])]
        pipeline = Pipeline(load_settings(args.config, overrides), args.run_dir)
        stages = Pipeline.STAGES if args.stage == "run" else Pipeline.STAGES[: Pipeline.STAGES.index(args.stage) + 1]
        pipeline.run(stages)
    except (PuzzleError, BlockConfigError, InfeasibleBudget, NemoAdapterError) as error:
        print(f"reasonrl puzzle: {error}", file=sys.stderr)
        return 2
    return 0


PUZZLE_COMMAND = CliCommand(
    "puzzle",
    "Puzzle NAS: block library, local distillation, scoring, MIP search, export (Llama-Nemotron §2)",
    _configure,
    _run,
)
