"""``reasonrl``: one entry point, sub-commands from the core and from plugins."""

from __future__ import annotations

import argparse
import os
import sys

from reasonrl import __version__, plotting
from reasonrl.cli import (
    bench_command,
    pipeline_command,
    plan_command,
    plugins_command,
    sft_command,
    smoke_command,
    train,
)
from reasonrl.contracts import CliCommand
from reasonrl.errors import DEBUG_ENV, USER_ERROR_EXIT, UserError, debug_enabled, user_error_line
from reasonrl.manager import call_each


def builtin_commands() -> list[CliCommand]:
    return [
        train.COMMAND,
        sft_command.COMMAND,
        pipeline_command.COMMAND,
        plugins_command.COMMAND,
        smoke_command.COMMAND,
        plotting.COMMAND,
        bench_command.COMMAND,
        plan_command.COMMAND,
    ]


def build_parser() -> tuple[argparse.ArgumentParser, dict[str, CliCommand]]:
    parser = argparse.ArgumentParser(
        prog="reasonrl",
        description="Techniques of MiMo, Kimi k1.5, LongCat-Flash-Thinking and Llama-Nemotron as plugins for verl, vLLM and Megatron-core.",
    )
    parser.add_argument("--version", action="version", version=f"reasonrl {__version__}")
    parser.add_argument("--debug", action="store_true", help=f"show tracebacks (also {DEBUG_ENV}=1)")
    subparsers = parser.add_subparsers(dest="command", metavar="<command>")
    commands: dict[str, CliCommand] = {}
    plugin_commands = [command for _plugin, declared in call_each("reasonrl_cli_commands") for command in declared]
    for command in builtin_commands() + plugin_commands:
        if command.name in commands:
            print(f"reasonrl: command {command.name!r} is defined twice; keeping the first", file=sys.stderr)
            continue
        sub = subparsers.add_parser(
            command.name, help=command.help, description=command.help, aliases=list(command.aliases)
        )
        command.configure(sub)
        for name in (command.name, *command.aliases):
            commands[name] = command
    return parser, commands


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = next((a for a in argv if not a.startswith("-")), "")
    leading = argv[: argv.index(command)] if command else argv
    if "--debug" in leading:  # only before the sub-command: train's arguments are Hydra's
        os.environ[DEBUG_ENV] = "1"
        argv.remove("--debug")
    try:
        return _dispatch(argv)
    except KeyboardInterrupt:
        print("reasonrl: interrupted", file=sys.stderr)
        return 130  # 128 + SIGINT, as a shell reports it
    except UserError as error:
        if debug_enabled():
            raise
        print(user_error_line(command, error), file=sys.stderr)
        return USER_ERROR_EXIT
    except Exception as error:  # a fault of reasonrl or an upstream, not of the input
        if debug_enabled():
            raise
        name = f"reasonrl {command}" if command else "reasonrl"
        print(
            f"{name}: {type(error).__name__}: {error}\n(rerun with reasonrl --debug {command} ... for the traceback)",
            file=sys.stderr,
        )
        return 1


def _dispatch(argv: list[str]) -> int:
    if argv and argv[0] == "train":
        # Hydra parses train's arguments itself (overrides, --cfg job, --help, -m).
        return train.main(argv[1:])
    parser, commands = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    return int(commands[args.command].run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
