"""``reasonrl puzzle build-library | distill | score | search | export | run``.

Each stage first runs the earlier stages whose artefacts are missing (each skips itself when
they exist), so a stage command on a fresh run directory does the work up to it, and a killed
run resumes where it stopped (distillation: subblock by subblock).
"""

from __future__ import annotations

import argparse
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


def _yaml_value(text: str, where: str):
    """A YAML document's value; PuzzleError naming ``where`` (``file:line`` for a syntax error)."""
    import yaml

    from reasonrl.plugins.puzzle.settings import PuzzleError

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        problem = getattr(error, "problem", None) or str(error)
        if mark is None:
            raise PuzzleError(f"invalid YAML: {problem}", subject=where) from None
        raise PuzzleError(
            f"invalid YAML: {problem} (column {mark.column + 1})", subject=f"{where}:{mark.line + 1}"
        ) from None


def load_settings(path: Path | None, overrides: list[str]):
    """Settings from the YAML at ``path`` and ``--set KEY=VALUE`` overrides, every key checked
    (PuzzleError naming the file, ``file:line`` or the key) before anything runs."""
    from reasonrl.plugins.puzzle.pipeline import PuzzleError, PuzzleSettings

    values = {}
    if path:
        try:
            text = Path(path).read_text()
        except FileNotFoundError:
            raise PuzzleError("no such file", subject=str(path)) from None
        except (OSError, UnicodeDecodeError) as error:
            raise PuzzleError(f"cannot read: {getattr(error, 'strerror', None) or error}", subject=str(path)) from None
        values = _yaml_value(text, str(path))
    if values is None:
        values = {}
    if not isinstance(values, dict):
        raise PuzzleError(f"expected a mapping of settings, got a YAML {type(values).__name__}", subject=str(path))
    for item in overrides:
        key, _, raw = item.partition("=")
        if not _:
            raise PuzzleError(f"{item!r}: expected KEY=VALUE", subject="--set")
        values[key] = _yaml_value(raw, f"--set {key}")
    return PuzzleSettings.from_dict(values)


def _run(args: argparse.Namespace) -> int:
    from reasonrl.errors import UserError
    from reasonrl.plugins.puzzle.block_config import BlockConfigError
    from reasonrl.plugins.puzzle.nemo_side import NemoAdapterError
    from reasonrl.plugins.puzzle.pipeline import Pipeline
    from reasonrl.plugins.puzzle.search import InfeasibleBudget

    # settings, parent, menu and files are checked before any stage (PuzzleError: a UserError)
    overrides = [*args.set, *(["nemo=true"] if args.target == "nemo" else [])]
    pipeline = Pipeline(load_settings(args.config, overrides), args.run_dir)
    stages = Pipeline.STAGES if args.stage == "run" else Pipeline.STAGES[: Pipeline.STAGES.index(args.stage) + 1]
    try:
        pipeline.run(stages)
    except (BlockConfigError, InfeasibleBudget, NemoAdapterError) as error:  # found by a stage: named
        raise UserError("", str(error)) from None
    return 0


PUZZLE_COMMAND = CliCommand(
    "puzzle",
    "Puzzle NAS: block library, local distillation, scoring, MIP search, export (Llama-Nemotron §2)",
    _configure,
    _run,
)
