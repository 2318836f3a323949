"""``reasonrl eval run|compare``: a model on local benchmark files as a report evaluates it (the
recipe's validation sampling: ``--recipe mimo`` → temperature 0.6, top-p 0.95, n 8), and runs side
by side."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from reasonrl.contracts import CliCommand


def _configure(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True)
    run = sub.add_parser("run", help="generate, score and summarize: results.json/.md/.png and generations in --out")
    run.add_argument("--bench", action="append", required=True, metavar="FILE[:FORMAT]", help="math | choice | code")
    run.add_argument("--out", type=Path, required=True, help="results folder (rerun the command to resume)")
    served = run.add_mutually_exclusive_group(required=True)
    served.add_argument("--model", type=Path, help="a Hugging Face checkpoint: served here by `vllm serve`")
    served.add_argument("--url", help="an OpenAI-compatible server already serving the model")
    run.add_argument("--model-name", default="", help="the name the --url server serves (default: --model's path)")
    run.add_argument("--recipe", help="sample as this recipe validates (its val_kwargs and max response length)")
    run.add_argument("--n", type=int, help="generations per problem")
    run.add_argument("--temperature", type=float)
    run.add_argument("--top-p", type=float)
    run.add_argument("--max-tokens", type=int)
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--system", default="", help='a system message (Llama-Nemotron: "detailed thinking on"/"off")')
    run.add_argument("--template", action="append", default=[], metavar="FORMAT=TEXT", help="the user message")
    run.add_argument("--max-model-len", type=int, default=32768, help="--model: the server's context length")
    run.add_argument(
        "--vllm-arg",
        action="append",
        metavar="ARG",
        help="--model: passed to vllm serve (repeat; default without CUDA: float32, eager, a 256 MiB KV cache)",
    )
    compare = sub.add_parser("compare", help="several results folders side by side (a table; --plot PNG)")
    compare.add_argument("folders", type=Path, nargs="+")
    compare.add_argument("--plot", type=Path)


REPORTS = Path(__file__).with_name("reports.yaml")


def report_settings() -> dict:
    """``reports.yaml``: each report's evaluation beyond its RL recipe's validation sampling."""
    import yaml

    return yaml.safe_load(REPORTS.read_text())


def recipe_sampling(recipe: str) -> dict:
    """The recipe's validation sampling (its values and sources: docs/report_values.yaml), with the
    report's evaluation length where ``reports.yaml`` gives one (``mimo_0530``: MiMo's recipe at
    MiMo-7B-RL-0530's 48K); else the recipe's maximum response length."""
    from reasonrl.composition import compose_config

    report = report_settings().get(recipe, {})
    config = compose_config([f"recipe={report.get('recipe', recipe)}"])
    rollout = config.actor_rollout_ref.rollout.val_kwargs
    return {
        "n": int(rollout.n),
        "temperature": float(rollout.temperature) if rollout.do_sample else 0.0,
        "top_p": float(rollout.top_p),
        "max_tokens": int(report["max_tokens"]["value"] if "max_tokens" in report else config.data.max_response_length),
    }


def samples_per_benchmark(recipe: str | None) -> dict[str, int]:
    """``{name part: n}``: the report's samples for benchmarks whose file name holds the part."""
    return dict(report_settings().get(recipe, {}).get("n_by_benchmark", {}).get("value", {})) if recipe else {}


def _run(args: argparse.Namespace) -> int:
    from reasonrl.openai_chat import ModelServerError
    from reasonrl.plugins.evaluation.eval_sets import FORMATS, BenchmarkError
    from reasonrl.plugins.evaluation.generate import Sampling
    from reasonrl.plugins.evaluation.run import compare, evaluate

    if args.action == "compare":
        try:
            print(compare(args.folders, args.plot))
        except FileNotFoundError as error:
            print(f"reasonrl eval compare: {error}", file=sys.stderr)
            return 2
        return 0
    values = recipe_sampling(args.recipe) if args.recipe else {}
    for key in ("n", "temperature", "top_p", "max_tokens"):
        if getattr(args, key) is not None:
            values[key] = getattr(args, key)
    sampling = Sampling(**values, seed=args.seed)
    n_by_benchmark = {} if args.n is not None else samples_per_benchmark(args.recipe)  # --n wins
    templates = {}
    for item in args.template:
        kind, sep, text = item.partition("=")
        if not sep or kind not in FORMATS:
            print(f"reasonrl eval run: --template {item!r}: expected FORMAT=TEXT, FORMAT in {FORMATS}", file=sys.stderr)
            return 2
        templates[kind] = text
    servers = []

    def endpoint() -> tuple[str, str]:
        if args.url:
            return args.url, args.model_name
        if not servers:  # started on first use: a resumed run with nothing left starts none
            from reasonrl.vllm_server import free_port, serve

            port = free_port()
            args.out.mkdir(parents=True, exist_ok=True)
            extra = args.vllm_arg if args.vllm_arg is not None else _default_vllm_args()
            log = args.out / "serve.log"
            servers.append(
                (serve(args.model, port, log, max_model_len=args.max_model_len, extra_args=tuple(extra)), port)
            )
        return f"http://127.0.0.1:{servers[0][1]}", str(args.model)

    try:
        results = evaluate(
            args.bench,
            args.out,
            endpoint,
            str(args.model or args.model_name),
            sampling,
            templates,
            args.system,
            n_by_benchmark=n_by_benchmark,
        )
    except (BenchmarkError, ModelServerError) as error:
        print(f"reasonrl eval run: {error}", file=sys.stderr)
        return 2
    finally:
        for server, _port in servers:
            server.terminate()
            server.wait(timeout=60)
    print((args.out / "results.md").read_text())
    print(f"sampling {results['sampling']}; generations in {args.out}/<benchmark>/generations.jsonl")
    return 0


def _default_vllm_args() -> tuple[str, ...]:
    """vLLM's own defaults on a GPU; on a CPU, what a small model needs there."""
    import torch

    from reasonrl.vllm_server import SMALL_CPU_ARGS

    return () if torch.cuda.is_available() else SMALL_CPU_ARGS


EVAL_COMMAND = CliCommand(
    name="eval",
    help="evaluate a model as the reports do: reasonrl eval run --model M --bench F[:math|choice|code] --out DIR",
    configure=_configure,
    run=_run,
)
