"""``reasonrl data curate``: a report's RL-data curation over a local file or a Hub data set, into
verl's parquet with a data card (resumable: run the same command again after Ctrl-C)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from reasonrl.contracts import CliCommand


def _configure(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True)
    curate = sub.add_parser("curate", help="run a curation config's stages; verl parquet + data card in --out")
    curate.add_argument("--config", required=True, help="a report (mimo, kimi_k15, nemotron, longcat) or a YAML file")
    curate.add_argument(
        "--source", required=True, help="a .jsonl/.json/.parquet/.csv file or folder, or a Hub data set"
    )
    curate.add_argument("--out", type=Path, required=True, help="folder for the stages' files, card and train.parquet")
    curate.add_argument(
        "--field", action="append", default=[], metavar="KEY=COLUMN", help="map a source column (overrides the config)"
    )
    curate.add_argument(
        "--eval", action="append", default=[], metavar="FILE[:COLUMN]", help="evaluation set to decontaminate against"
    )
    curate.add_argument(
        "--skip", action="append", default=[], metavar="STAGE", help="leave a stage of the config out (repeatable)"
    )
    curate.add_argument("--answer-url", help="OpenAI-compatible server (vllm serve) for easy_to_hack")
    curate.add_argument("--answer-model", default="", help="the model name that server serves")
    curate.add_argument("--answer-temperature", type=float, default=1.0, help="easy_to_hack sampling (default 1.0)")
    curate.add_argument("--answer-max-tokens", type=int, default=32, help="easy_to_hack answer length (default 32)")
    curate.add_argument("--no-progress", action="store_true", help="no progress bars")
    sub.add_parser("stages", help="list the stages a config can name")


def _run(args: argparse.Namespace) -> int:
    from reasonrl.plugins.curation.config import STAGES, Context, build_stages, load_config, skip_stages
    from reasonrl.plugins.curation.pipeline import Curation, read_questions
    from reasonrl.plugins.curation.stage import CurationError

    if args.action == "stages":
        print("\n".join(STAGES))
        return 0
    try:
        config = load_config(args.config)
        config["stages"] = skip_stages(config["stages"], args.skip)
        fields = dict(config["fields"])
        for item in args.field:
            key, sep, column = item.partition("=")
            if not sep:
                raise CurationError(f"--field {item!r}: expected KEY=COLUMN")
            fields[key] = column
        context = Context()
        for spec in args.eval:
            context.eval_questions += read_questions(spec)
            context.eval_sources += (spec,)
        if args.answer_url:
            from reasonrl.plugins.curation.easy_to_hack import openai_answerer

            context.answerer = openai_answerer(
                args.answer_url, args.answer_model, args.answer_max_tokens, args.answer_temperature
            )
            context.answerer_name = (
                f"{args.answer_model or args.answer_url} temperature={args.answer_temperature} "
                f"max_tokens={args.answer_max_tokens}"
            )
        stages = build_stages(config, context)
        curation = Curation(args.source, fields, stages, args.out, progress=None if args.no_progress else _bar)
        card = curation.run(config.get("output", {}))
    except (CurationError, OSError) as error:
        print(f"reasonrl data curate: {error}", file=sys.stderr)
        return 2
    except RuntimeError as error:  # the sandbox cannot start (SandboxUnavailable), a model server failed
        print(f"reasonrl data curate: {type(error).__name__}: {error}", file=sys.stderr)
        return 2
    print((args.out / "card.md").read_text())
    print(f"wrote {card['output']['path']} ({card['output']['rows']} rows)")
    return 0


def _bar(rows, name: str, total: int | None):
    from tqdm import tqdm

    return tqdm(rows, desc=name, total=total, unit=" rows", file=sys.stderr, mininterval=1.0)


DATA_COMMAND = CliCommand(
    name="data",
    help="RL data curation as the reports do it: reasonrl data curate --config <report> --source S --out DIR",
    configure=_configure,
    run=_run,
)
