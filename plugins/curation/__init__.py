"""curation: RL data curation as the reports do it (MiMo §3.2, Kimi k1.5 §2.1 and §2.3,
Llama-Nemotron §5.1, LongCat-Flash-Thinking §3).

Composable stages over a data set streamed by Hugging Face ``datasets`` — n-gram
decontamination, exact and MinHash near-duplicate removal, question-type filters, verifiable
references, Kimi's easy-to-hack filter, code tests checked by reference solutions, pass-rate
difficulty filters — resumable by stage, each stage's drops counted in a data card, the result in
verl's parquet columns. ``reasonrl data curate --config <report>``; one config per report in
``reports/``. Framework-free stages (``stage.py``); the math reward and the code judge come from
the rewards plugin through ``reasonrl.api``.
"""

from __future__ import annotations

from reasonrl.contracts import CliCommand, PluginInfo
from reasonrl.hookspecs import hookimpl


@hookimpl
def reasonrl_plugin_info() -> PluginInfo:
    return PluginInfo(
        name="curation",
        summary="RL data curation: decontamination, dedup, question-type / verifiability / easy-to-hack / "
        "difficulty filters, code tests checked by reference solutions; data card; verl parquet",
        reports=("MiMo §3.2", "Kimi k1.5 §2.1, §2.3", "Llama-Nemotron §5.1", "LongCat-Flash-Thinking §3"),
        requires=("rewards",),  # reasonrl.api.math_reward (verifiable / easy-to-hack), run_code_tests (code tests)
    )


@hookimpl
def reasonrl_cli_commands() -> list[CliCommand]:
    from reasonrl.plugins.curation.cli import DATA_COMMAND

    return [DATA_COMMAND]
