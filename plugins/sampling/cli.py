"""``reasonrl sampling pass-rates``: pre-computed pass rates from rollout/verdict logs into a
dataset column (read by the curricula and the offline difficulty filter)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from reasonrl.contracts import CliCommand
from reasonrl.plugins.sampling.pass_rates import lookup, pass_rate_column, tally


def _configure(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True)
    rates = sub.add_parser("pass-rates", help="per-prompt pass rates from JSONL logs into a parquet column")
    rates.add_argument(
        "--logs",
        type=Path,
        nargs="+",
        required=True,
        help="JSONL records: verl rollout dumps (trainer.rollout_data_dir), `reasonrl judge` verdicts, ...",
    )
    rates.add_argument(
        "--dataset", type=Path, required=True, help="the verl parquet to annotate (e.g. data.train_files)"
    )
    rates.add_argument("--out", type=Path, required=True, help="parquet written with the column added")
    rates.add_argument(
        "--key",
        default="extra_info.index",
        help="record field naming the prompt (dotted path; default extra_info.index)",
    )
    rates.add_argument(
        "--dataset-key",
        default="extra_info.index",
        help="dataset column (dotted path) with the same key (default extra_info.index)",
    )
    rates.add_argument(
        "--score",
        default="acc",
        help="record field with the score: number, boolean, or per-test verdict list (default acc)",
    )
    rates.add_argument(
        "--success-at", type=float, default=1.0, help="a numeric score at or above this passes (default 1.0)"
    )
    rates.add_argument(
        "--column", default="pass_rate", help="column to write (default pass_rate: reasonrl.sampling.pass_rate_column)"
    )
    rates.add_argument(
        "--min-samples", type=int, default=1, help="responses a prompt needs for a pass rate (Nemotron 8, MiMo 16)"
    )
    rates.add_argument(
        "--missing", type=float, default=None, help="pass rate for prompts with fewer logged responses (default: error)"
    )


def _read_records(paths: list[Path]):
    for path in paths:
        with open(path) as handle:
            for line in handle:
                if line.strip():
                    yield json.loads(line)


def _run(args: argparse.Namespace) -> int:
    import pandas as pd

    try:
        counts = tally(_read_records(args.logs), args.key, args.score, args.success_at)
        frame = pd.read_parquet(args.dataset)
        keys = [lookup(row, args.dataset_key) for row in frame.to_dict("records")]
        frame[args.column] = pass_rate_column(keys, counts, args.min_samples, args.missing)
    except (KeyError, ValueError) as error:
        print(f"reasonrl sampling pass-rates: {error.args[0] if error.args else error}", file=sys.stderr)
        return 2
    args.out.parent.mkdir(parents=True, exist_ok=True)
    frame.to_parquet(args.out)
    rates = frame[args.column].dropna()
    logged = sum(total for _, total in counts.values())
    print(
        f"{len(frame)} prompts, {logged} logged responses, mean {args.column} {rates.mean():.3f}; "
        f"share >= 0.75: {(rates >= 0.75).mean():.1%}, == 1: {(rates == 1).mean():.1%}, == 0: {(rates == 0).mean():.1%} -> {args.out}"
    )
    return 0


SAMPLING_COMMAND = CliCommand(
    "sampling",
    "offline tools of the sampling plugin (pass rates for curricula and the difficulty filter)",
    _configure,
    _run,
)
