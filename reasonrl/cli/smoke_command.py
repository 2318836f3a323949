"""``reasonrl smoke prepare``: build and cache the CPU smoke run's model, tokenizer and data."""

from __future__ import annotations

import argparse
from pathlib import Path

from reasonrl.contracts import CliCommand


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "action", choices=["prepare"], help="prepare: build the tiny model and the arithmetic parquet files"
    )
    parser.add_argument(
        "--out", type=Path, default=None, help="folder (default $REASONRL_CACHE or ~/.cache/reasonrl, then smoke/)"
    )
    parser.add_argument("--force", action="store_true", help="rebuild even if the cached assets match")


def _run(args: argparse.Namespace) -> int:
    from reasonrl.smoke.prepare import prepare

    root = prepare(args.out, force=args.force)
    print(root)
    return 0


COMMAND = CliCommand(
    name="smoke",
    help="CPU smoke-run assets: reasonrl smoke prepare [--out DIR] [--force]",
    configure=_configure,
    run=_run,
)
