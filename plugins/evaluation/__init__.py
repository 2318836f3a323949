"""evaluation: a model evaluated as the reports evaluate (MiMo §3.5.1, Kimi k1.5 §3.4, LongCat §4,
Llama-Nemotron §7.1): local benchmark files (math, multiple choice, code with tests), n sampled
generations per problem with the recipe's validation sampling, scored by the project's rewards
(Math-Verify, the sandboxed judge), avg@n, unbiased pass@k and cons@n, a table and a plot per
run, runs compared side by side. ``reasonrl eval run|compare``.
"""

from __future__ import annotations

from reasonrl.contracts import CliCommand, PluginInfo
from reasonrl.hookspecs import hookimpl


@hookimpl
def reasonrl_plugin_info() -> PluginInfo:
    return PluginInfo(
        name="evaluation",
        summary="reasonrl eval: local benchmarks (math, multiple choice, code), the recipe's sampling, "
        "avg@n / pass@k / cons@n from saved generations, tables, plots, comparisons",
        reports=("MiMo §3.5.1", "Kimi k1.5 §3.4", "LongCat-Flash-Thinking §4", "Llama-Nemotron §7.1"),
        requires=("rewards",),  # reasonrl.api.math_reward (math), run_code_tests (code)
    )


@hookimpl
def reasonrl_cli_commands() -> list[CliCommand]:
    from reasonrl.plugins.evaluation.cli import EVAL_COMMAND

    return [EVAL_COMMAND]
