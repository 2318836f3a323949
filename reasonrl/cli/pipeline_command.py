"""``reasonrl pipeline recipe=<mimo|longcat> --demo DIR``: data → SFT → RL → evaluation on the smoke
task, on CPU, resumable by stage (``reasonrl.pipeline``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from reasonrl.contracts import CliCommand


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("recipe", metavar="recipe=NAME", help="the RL recipe whose path to run (mimo, longcat)")
    parser.add_argument("--demo", type=Path, required=True, metavar="DIR", help="the smoke task's run, in DIR")
    parser.add_argument("--sft-steps", type=int, default=16, help="SFT steps (default 16: one pass over its rows)")
    parser.add_argument("--rl-steps", type=int, default=10, help="RL steps (default 10)")


def _run(args: argparse.Namespace) -> int:
    from reasonrl.cli.main import build_parser
    from reasonrl.errors import UserError
    from reasonrl.pipeline import Pipeline

    key, sep, recipe = args.recipe.partition("=")
    if key != "recipe" or not sep:
        raise UserError("recipe", f"expected recipe=NAME, got {args.recipe!r}")
    missing = {"data", "eval"} - build_parser()[1].keys()
    if missing:
        raise UserError(
            "plugins", f"the pipeline runs `reasonrl {' / '.join(sorted(missing))}`, which no loaded plugin offers"
        )
    try:
        table = Pipeline(recipe, args.demo, args.sft_steps, args.rl_steps).run()
    except KeyboardInterrupt:
        print(f"reasonrl pipeline: interrupted; run the same command to resume ({args.demo})", file=sys.stderr)
        return 130
    except RuntimeError as error:
        print(f"reasonrl pipeline: {error}", file=sys.stderr)
        return 1
    print(table)
    print(f"results: {args.demo / 'results.md'}, plot: {args.demo / 'eval' / 'compare.png'}")
    return 0


COMMAND = CliCommand(
    name="pipeline",
    help="a report's path on the smoke task: reasonrl pipeline recipe=mimo --demo DIR (data, SFT, RL, evaluation)",
    configure=_configure,
    run=_run,
)
