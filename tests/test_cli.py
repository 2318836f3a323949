"""The ``reasonrl`` command: built-in and plugin-contributed sub-commands, each with help."""

from __future__ import annotations

import pytest

from reasonrl.cli.main import build_parser, main
from reasonrl.contracts import CliCommand


def test_help_lists_builtin_commands(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert "train" in out and "plugins" in out


def test_plugin_command_is_added_and_runs(isolated_plugins, capsys):
    def configure(parser):
        parser.add_argument("--times", type=int, default=1)

    def run(args):
        print("hello " * args.times)
        return 3

    isolated_plugins("greeter", reasonrl_cli_commands=lambda: [CliCommand("hello", "say hello", configure, run)])
    assert main(["hello", "--times", "2"]) == 3
    assert "hello hello" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["hello", "--help"])
    assert "say hello" in capsys.readouterr().out


def test_duplicate_command_name_keeps_builtin(isolated_plugins, capsys):
    isolated_plugins(
        "clash", reasonrl_cli_commands=lambda: [CliCommand("plugins", "other", lambda p: None, lambda a: 9)]
    )
    _parser, commands = build_parser()
    assert commands["plugins"].help.startswith("list discovered plugins")
    assert "defined twice" in capsys.readouterr().err


def test_no_command_prints_help(capsys):
    assert main([]) == 0
    assert "usage: reasonrl" in capsys.readouterr().out


def test_plugin_benchmark_runs_under_bench(isolated_plugins, capsys):
    def configure(parser):
        parser.add_argument("--size", type=int, default=1)

    def run(args):
        print(f"size {args.size}: 1.0x")
        return 0

    isolated_plugins("timer", reasonrl_benchmarks=lambda: [CliCommand("speed", "time something", configure, run)])
    assert main(["bench", "speed", "--size", "4"]) == 0
    assert "size 4: 1.0x" in capsys.readouterr().out
    assert main(["bench"]) == 0
    assert "speed" in capsys.readouterr().out


def test_bench_without_plugin_benchmarks_lists_the_core_one(isolated_plugins, capsys):
    assert main(["bench"]) == 0
    assert capsys.readouterr().out.strip() == "reasonrl bench <benchmark>: one of cli, overhead"
