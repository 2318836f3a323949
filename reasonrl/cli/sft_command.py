"""``reasonrl sft recipe=<mimo_sft|nemotron_sft|longcat_sft> [+preset=cpu_tiny] [key=value ...]``:
the recipe's SFT stage on verl's SFT trainer (``reasonrl.sft``); ``--cfg`` prints the composed
config without running."""

from __future__ import annotations

import argparse

from reasonrl.contracts import CliCommand


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("overrides", nargs="*", help="recipe=<name> [+preset=cpu_tiny] and verl SFT keys (key=value)")
    parser.add_argument("--cfg", action="store_true", help="print the composed config and exit")


def _run(args: argparse.Namespace) -> int:
    from omegaconf import OmegaConf

    from reasonrl.sft import compose_sft_config, run_sft

    config = compose_sft_config(args.overrides)
    if args.cfg:
        print(OmegaConf.to_yaml(config))
        return 0
    run_sft(config)
    return 0


COMMAND = CliCommand(
    name="sft",
    help="an SFT recipe on verl's SFT trainer: reasonrl sft recipe=<mimo_sft|nemotron_sft|longcat_sft> [+preset=cpu_tiny]",
    configure=_configure,
    run=_run,
)
