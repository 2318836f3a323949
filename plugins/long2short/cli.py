"""``reasonrl long2short sample``: shortest rejection sampling and DPO pairs (Kimi k1.5 §2.4)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from reasonrl.contracts import CliCommand


def _configure(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True)
    sample = sub.add_parser(
        "sample", help="n samples per question (vLLM), scored; shortest correct -> SFT, pairs -> DPO"
    )
    sample.add_argument("--model", type=Path, required=True, help="Hugging Face checkpoint (the long-CoT model)")
    sample.add_argument("--data", type=Path, required=True, help="verl RL parquet (prompt, reward_model.ground_truth)")
    sample.add_argument("--n", type=int, default=8, help="samples per question (Kimi §2.4: 8; at least 2)")
    sample.add_argument("--max-tokens", type=int, default=1024, help="response budget per sample")
    sample.add_argument("--temperature", type=float, default=1.0)
    sample.add_argument("--seed", type=int, default=0)
    sample.add_argument("--limit", type=int, default=None, help="only the first LIMIT questions")
    sample.add_argument("--sft-out", type=Path, required=True, help="verl SFT parquet (messages)")
    sample.add_argument("--dpo-out", type=Path, required=True, help="DPO parquet (prompt, chosen, rejected)")
    sample.add_argument("--samples-out", type=Path, default=None, help="every sample with length and verdict (JSONL)")


def _run(args: argparse.Namespace) -> int:
    from reasonrl.plugins.long2short.rejection import run

    if args.n < 2:
        print(
            f"reasonrl long2short sample: --n: {args.n} samples per question cannot be rejection-sampled (at least 2)",
            file=sys.stderr,
        )
        return 2
    stats = run(
        args.model,
        args.data,
        args.n,
        args.max_tokens,
        args.temperature,
        args.seed,
        args.limit,
        args.sft_out,
        args.dpo_out,
        args.samples_out,
    )
    print(f"long2short stats: {json.dumps(stats)}", flush=True)
    return 0


LONG2SHORT_COMMAND = CliCommand(
    "long2short", "Kimi k1.5 long2short data: shortest rejection sampling, DPO pairs", _configure, _run
)
