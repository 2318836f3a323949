"""``reasonrl bench model-rewards``: verdicts per second on CPU, with and without the cache.

The tiny judge (``tiny_judge.py``: built, or found in the cache, first; its agreement with
Math-Verify printed; ``--judge-only`` stops there) served by ``vllm serve`` (vLLM's CPU build,
one process), asked over HTTP by the product's verdict reward (``openai_chat``: the path verl's
reward-model router takes). The workload is the smoke task's GRPO-shaped scoring: groups of
responses to one prompt, each response the right sum or a near miss in digits, words or a
tens-plus-units expression, so a group repeats answers as real groups do. The judge is asked for
every response (``rule_first`` off: words need the judge anyway); with the cache (default size),
concurrent repeats share a request and later repeats are answered from memory.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import time
from pathlib import Path

from reasonrl.contracts import CliCommand
from reasonrl.vllm_server import free_port, serve


def workload(groups: int, group_size: int, seed: int) -> list[tuple[str, str, str, bool]]:
    """(question, reference, response, truly equal) for ``groups`` prompts × ``group_size`` responses."""
    from benchmarks.model_rewards.tiny_judge import FORMS, surface

    rng = random.Random(seed)
    items = []
    for _ in range(groups):
        a, b = rng.randint(0, 99), rng.randint(0, 99)
        n = a + b
        for _ in range(group_size):
            m = n if rng.random() < 0.5 else min(198, max(0, n + rng.choice([-10, -1, 1, 10])))
            items.append((f"{a}+{b}=", str(n), surface(m, rng.choice(FORMS), rng), m == n))
    return items


async def measure(url: str, model: str, template, items, cache_size: int, concurrency: int) -> dict:
    from reasonrl.plugins.model_rewards.judge_client import openai_chat
    from reasonrl.plugins.model_rewards.verdict_reward import VerdictReward, VerdictSettings

    asked = openai_chat(url, model, max_tokens=40)
    requests = 0

    async def counted(messages):
        nonlocal requests
        requests += 1
        return await asked(messages)

    reward = VerdictReward(
        template, counted, VerdictSettings(rule_first=False, cache_size=cache_size, max_concurrency=concurrency)
    )
    start = time.perf_counter()
    verdicts = await reward.score_many([item[:3] for item in items])
    seconds = time.perf_counter() - start
    right = sum(v.score == float(item[3]) for v, item in zip(verdicts, items))
    return {
        "verdicts": len(items),
        "requests": requests,
        "seconds": seconds,
        "verdicts_per_s": len(items) / seconds,
        "accuracy": right / len(items),
        "metrics": reward.metrics(),
    }


def judge_line(folder: Path, summary: dict) -> str:
    return (
        f"tiny judge {folder}: agreement with Math-Verify {summary['agreement_with_mathverify']:.3f} on "
        f"{summary['mathverify_readable_pairs']} held-apart pairs it reads (digits, expressions); accuracy "
        f"{summary['accuracy_on_word_pairs']:.3f} on {summary['word_pairs']} word pairs (Math-Verify reads none); "
        f"{summary['unparsed_replies']} unparsed replies"
    )


def run(args: argparse.Namespace, judge_dir: Path, summary: dict) -> dict:
    from reasonrl.plugins.model_rewards.templates import load_templates

    template = load_templates(judge_dir / "judge_templates.yaml")["smoke_judge"]
    items = workload(args.groups, args.group_size, args.seed)
    port = free_port()
    server = serve(judge_dir, port, Path(judge_dir) / "serve.log", max_num_seqs=args.concurrency)
    try:
        url = f"127.0.0.1:{port}"
        asyncio.run(measure(url, str(judge_dir), template, items[: args.group_size], 0, args.concurrency))  # warm-up
        results = {
            mode: asyncio.run(measure(url, str(judge_dir), template, items, size, args.concurrency))
            for mode, size in (("without cache", 0), ("with cache", 10_000))
        }
    finally:
        server.terminate()
        server.wait(timeout=60)
    return {
        "judge": str(judge_dir),
        "judge_summary": summary,
        "groups": args.groups,
        "group_size": args.group_size,
        **results,
    }


def print_table(result: dict) -> None:
    print(
        f"verdicts from the tiny judge served by vllm serve (CPU), {result['groups']} groups × {result['group_size']} responses"
    )
    print(f"{'':16} {'verdicts/s':>10} {'requests':>9} {'seconds':>8} {'accuracy':>9}")
    for mode in ("without cache", "with cache"):
        row = result[mode]
        print(
            f"{mode:16} {row['verdicts_per_s']:10.1f} {row['requests']:9d} {row['seconds']:8.1f} {row['accuracy']:9.3f}"
        )


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--groups", type=int, default=32, help="prompts (default 32)")
    parser.add_argument("--group-size", type=int, default=8, help="responses per prompt (default 8)")
    parser.add_argument("--concurrency", type=int, default=32, help="requests in flight (default 32)")
    parser.add_argument("--judge", type=Path, default=None, help="tiny judge folder (default: built / cached)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, default=None, help="also write the numbers here")
    parser.add_argument(
        "--judge-only", action="store_true", help="build (or find) the judge, print its agreement, stop"
    )
    parser.add_argument(
        "--science", action="store_true", help="the science-style rows' judge (references in digits or words)"
    )


def _run(args: argparse.Namespace) -> int:
    from benchmarks.model_rewards.tiny_judge import SCIENCE_JUDGE, JudgeSpec, ensure_tiny_judge

    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    judge_dir, summary = ensure_tiny_judge(args.judge, spec=SCIENCE_JUDGE if args.science else JudgeSpec())
    print(judge_line(judge_dir, summary), flush=True)
    if args.judge_only:
        return 0
    result = run(args, judge_dir, summary)
    print_table(result)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


BENCHMARK = CliCommand(
    "model-rewards", "verdicts per second from the CPU judge, with and without the cache", _configure, _run
)
