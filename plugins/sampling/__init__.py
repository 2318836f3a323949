"""sampling: which prompts each RL step rolls out (MiMo §3.3.2, Kimi k1.5 §2.3.4, LongCat §3.2.2, Llama-Nemotron §5.1).

Dynamic sampling with replacement (DAPO + LongCat), MiMo's easy-data pool, Kimi's curriculum
and prioritized sampling, Llama-Nemotron's progressive Gaussian curriculum and the offline
difficulty filter, as one framework-free pipeline (``sampler.py``; ``reasonrl.api.build_sampler``)
and, for verl, the prompt source of trainer mode ``reasonrl_sync`` fed by verl's own DAPO
filter through ``reasonrl.bridges.verl_replay_buffer`` (``verl_adapter.py``). ``reasonrl
sampling pass-rates`` writes the pre-computed pass rates the curricula and the filter read.
"""

from __future__ import annotations

import functools

from reasonrl.config import ConfigError, config_value, require_trainer_mode
from reasonrl.contracts import CliCommand, ConfigGroup, DatasetColumn, PluginInfo, TrainerCallback
from reasonrl.hookspecs import hookimpl
from reasonrl.plugins.sampling.config import SAMPLING_GROUP

REPORTING_BUFFER = ("pkg://reasonrl.bridges.verl_replay_buffer", "ReportingReplayBuffer")


def _build_callback(config):
    from reasonrl.plugins.sampling.verl_adapter import build

    return build(config)


@hookimpl
def reasonrl_plugin_info() -> PluginInfo:
    return PluginInfo(
        name="sampling",
        summary="dynamic sampling with replacement, easy-data pool, curriculum, prioritized and Gaussian progressive sampling, offline difficulty filter",
        reports=("MiMo §3.3.2", "Kimi k1.5 §2.3.4", "Llama-Nemotron §5.1", "LongCat-Flash-Thinking §3.1"),
    )


@hookimpl
def reasonrl_trainer_callbacks() -> list[TrainerCallback]:
    return [TrainerCallback("sampling", _build_callback)]


@hookimpl
def reasonrl_config_groups() -> list[ConfigGroup]:
    return [SAMPLING_GROUP]


@hookimpl
def reasonrl_dataset_columns(config) -> list[DatasetColumn]:
    """The label columns the chosen samplers read from data.train_files (the driver checks them
    before Ray starts; ``SamplingCallback.on_init_end`` reads them)."""
    from reasonrl.plugins.sampling.config import KEY, settings_from

    s = settings_from(config)
    columns = []
    if s.difficulty_column:
        columns.append(DatasetColumn(s.difficulty_column, f"{KEY}.difficulty_column", True, True))
    if s.needs_pass_rates(has_difficulty=bool(s.difficulty_column)):
        needs = (
            f"{KEY}.samplers {list(s.samplers)} as {KEY}.pass_rate_column (`reasonrl sampling pass-rates` writes it)"
        )
        columns.append(DatasetColumn(s.pass_rate_column, needs, True, True))
    if s.needs_domains():
        columns.append(DatasetColumn(s.domain_column, f"{KEY}.domain_filters as {KEY}.domain_column", True, True))
    return columns


@hookimpl
def reasonrl_check_config(config) -> None:
    from reasonrl.plugins.sampling.config import settings_from

    settings = settings_from(config)
    if not settings.samplers:
        return
    select = functools.partial(config_value, config)
    require_trainer_mode(config, "the sampler (the trainer's prompt source; +reasonrl/sampling=<option>)")
    if (
        select("trainer.v1.sampler.custom_sampler.path"),
        select("trainer.v1.sampler.custom_sampler.name"),
    ) != REPORTING_BUFFER:
        raise ConfigError(
            "trainer.v1.sampler.custom_sampler",
            f"must be {REPORTING_BUFFER}: it reports each finished group to the sampler (use +reasonrl/sampling=<option>)",
        )
    filtering = bool(select("algorithm.filter_groups.enable"))
    if "dynamic" in settings.samplers and not filtering:
        raise ConfigError(
            "algorithm.filter_groups.enable",
            "must be true with the 'dynamic' sampler: verl's DAPO filter evicts the no-signal groups and over-samples",
        )
    if filtering and "dynamic" not in settings.samplers:
        raise ConfigError(
            "reasonrl.sampling.samplers",
            "needs 'dynamic' while algorithm.filter_groups.enable is true: without it the prompts verl's filter evicts would be lost for the epoch",
        )
    kwargs = {
        key: select(f"trainer.v1.sampler.sampler_kwargs.{key}")
        for key in ("filter_groups_enable", "filter_groups_metric")
    }
    if bool(kwargs["filter_groups_enable"]) != filtering or (
        filtering and kwargs["filter_groups_metric"] != select("algorithm.filter_groups.metric")
    ):
        raise ConfigError(
            "trainer.v1.sampler.sampler_kwargs",
            f"{kwargs} must mirror algorithm.filter_groups (verl passes a custom replay "
            "buffer no DAPO settings; /reasonrl/replay_buffer/verl interpolates them)",
        )


@hookimpl
def reasonrl_cli_commands() -> list[CliCommand]:
    from reasonrl.plugins.sampling.cli import SAMPLING_COMMAND

    return [SAMPLING_COMMAND]


@hookimpl
def reasonrl_benchmarks() -> list[CliCommand]:
    # benchmarks/sampling/ of a source checkout; the installed package holds no benchmarks
    from reasonrl.source_checkout import checkout_benchmarks

    return checkout_benchmarks("sampling")


@hookimpl
def reasonrl_api_functions():
    # the pipeline builder itself: the trainer callback builds its sampler with the same function
    from reasonrl.plugins.sampling.sampler import build_sampler

    return {"build_sampler": build_sampler}
