"""``reasonrl smoke prepare``: build and cache the CPU smoke run's model, tokenizer and data.
``reasonrl smoke sequences --out DIR``: the task as token sequences (``train.jsonl``,
``held_out.jsonl``) for commands that train on sequences, e.g. ``reasonrl mtp attach``."""

from __future__ import annotations

import argparse
from pathlib import Path

from reasonrl.contracts import CliCommand


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "action",
        choices=["prepare", "sequences"],
        help="prepare: build the tiny model and the arithmetic parquet files; sequences: write the task as token "
        "sequences (train.jsonl, held_out.jsonl: prompt + answer + EOS ids) to --out",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="prepare: folder (default $REASONRL_CACHE or ~/.cache/reasonrl, then smoke/); sequences: required",
    )
    parser.add_argument("--recipe", default="mimo", help="sequences: the recipe whose task mix to write (default mimo)")
    parser.add_argument("--force", action="store_true", help="rebuild even if the cached assets match")


def _run(args: argparse.Namespace) -> int:
    from reasonrl.errors import UserError
    from reasonrl.smoke.prepare import prepare

    if args.action == "sequences":
        if args.out is None:
            raise UserError("--out", "sequences needs the folder to write train.jsonl and held_out.jsonl to")
        from transformers import AutoTokenizer

        from reasonrl.smoke.data import write_sequences

        tokenizer = AutoTokenizer.from_pretrained(prepare(force=args.force) / "model")
        for path in write_sequences(args.out, tokenizer, args.recipe):
            print(path)
        return 0
    root = prepare(args.out, force=args.force)
    print(root)
    return 0


COMMAND = CliCommand(
    name="smoke",
    help="CPU smoke-run assets: reasonrl smoke prepare [--out DIR] [--force] | sequences --out DIR",
    configure=_configure,
    run=_run,
)
