"""``reasonrl long2short sample``: shortest rejection sampling and DPO pairs (Kimi k1.5 §2.4)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from reasonrl.contracts import CliCommand
from reasonrl.errors import UserError
from reasonrl.input_checks import check_checkpoint, check_numbers


def check_parquet(path: Path, option: str, columns: tuple[str, ...]) -> None:
    """``path`` is a parquet file with ``columns`` (its schema read, not its rows), else UserError."""
    if not path.is_file():
        raise UserError(path, f"no such file ({option})")
    import pyarrow.parquet as pq

    try:
        names = set(pq.read_schema(path).names)
    except Exception as error:  # pyarrow's errors: a file that is not parquet, or a damaged one
        raise UserError(path, f"not a readable parquet file ({option}): {error}") from None
    missing = [c for c in columns if c not in names]
    if missing:
        raise UserError(path, f"has no column {missing[0]!r} ({option} needs {', '.join(columns)})")


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
    dpo = sub.add_parser("dpo", help="DPO on the pairs (TRL's DPOTrainer; reference = the frozen starting model)")
    dpo.add_argument("--model", type=Path, required=True, help="the starting checkpoint (policy and reference)")
    dpo.add_argument("--pairs", type=Path, required=True, help="DPO parquet from `reasonrl long2short sample`")
    dpo.add_argument("--out", type=Path, required=True, help="folder for the trained checkpoint")
    dpo.add_argument("--beta", type=float, default=0.1, help="DPO's β (Kimi gives none; DPO's paper 0.1)")
    dpo.add_argument("--lr", type=float, default=1e-5)
    dpo.add_argument("--steps", type=int, default=100)
    dpo.add_argument("--batch-size", type=int, default=8)
    dpo.add_argument("--seed", type=int, default=0)


def _run(args: argparse.Namespace) -> int:
    if args.action == "dpo":
        from reasonrl.plugins.long2short.dpo import train

        check_checkpoint(args.model, "--model")
        check_parquet(args.pairs, "--pairs", ("prompt", "chosen", "rejected"))
        check_numbers(
            [
                ("--beta", args.beta, args.beta > 0, "> 0"),
                ("--lr", args.lr, args.lr > 0, "> 0"),
                ("--steps", args.steps, args.steps >= 1, ">= 1"),
                ("--batch-size", args.batch_size, args.batch_size >= 1, ">= 1"),
            ]
        )
        try:
            log = train(
                args.model,
                args.pairs,
                args.out,
                beta=args.beta,
                learning_rate=args.lr,
                steps=args.steps,
                batch_size=args.batch_size,
                seed=args.seed,
            )
        except ValueError as error:  # e.g. a pairs file without pairs: named by the trainer
            raise UserError("", str(error)) from None
        print(f"long2short dpo: {json.dumps({'steps': len(log), 'first': log[0], 'last': log[-1]})}", flush=True)
        return 0
    from reasonrl.plugins.long2short.rejection import run

    # every input checked before vLLM loads the model
    check_numbers(
        [
            ("--n", args.n, args.n >= 2, "at least 2 samples per question (rejection sampling compares them)"),
            ("--max-tokens", args.max_tokens, args.max_tokens >= 1, ">= 1"),
            ("--temperature", args.temperature, args.temperature >= 0, ">= 0"),
            ("--limit", args.limit, args.limit is None or args.limit >= 1, ">= 1 questions"),
        ]
    )
    check_checkpoint(args.model, "--model")
    check_parquet(args.data, "--data", ("prompt", "reward_model"))
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
    "long2short",
    "Kimi k1.5 long2short: shortest rejection sampling, DPO pairs, DPO, the methods compared",
    _configure,
    _run,
)
