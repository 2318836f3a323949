"""Hydra internals reasonrl uses (hydra-core 1.3), behind a version guard."""

from __future__ import annotations

import argparse

from reasonrl.compat import Reach, declare

ARGS_PARSER = declare(
    Reach(
        name="hydra.args-parser",
        package="hydra-core",
        versions=">=1.3,<1.4",
        touches="hydra._internal.utils.get_args_parser (Hydra's own command-line grammar)",
        used_by="reasonrl train (validates the composed config before Hydra runs)",
        public_hook="a public parser for Hydra's command line",
    )
)


def hydra_args_parser() -> argparse.ArgumentParser:
    ARGS_PARSER.require()
    from hydra._internal.utils import get_args_parser

    return get_args_parser()
