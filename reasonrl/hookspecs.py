"""The plugin contract: every hook a reasonrl plugin may implement.

This module is the one place a plugin author reads. A plugin is any importable object
(usually a module) listed in the ``reasonrl.plugins`` entry-point group whose functions
are marked with :data:`hookimpl`. Built-in plugins (``reasonrl.plugins.*``) are found the
same way as third-party ones. Every hook is optional; each returns plain data so that
``reasonrl plugins`` can list what a plugin contributes without importing any upstream.

Upstream imports (verl, vLLM, Megatron-core) belong inside the callables a plugin
returns (``Registration.apply``, layer-spec builders, ``Patch.apply``), never at the top
of the plugin module: the hooks are called in processes that have none of them loaded.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import pluggy

from reasonrl.contracts import CliCommand, ConfigGroup, DatasetColumn, PluginInfo, Registration, TrainerCallback

if TYPE_CHECKING:  # pragma: no cover - typing only
    from omegaconf import DictConfig

    from reasonrl.compat import Reach
    from reasonrl.patching import Patch

PROJECT = "reasonrl"
ENTRY_POINT_GROUP = "reasonrl.plugins"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def reasonrl_plugin_info() -> PluginInfo:
    """Describe the plugin: its name, a one-line summary and the report sections it implements.

    Required in practice: ``reasonrl plugins`` and the contract tests use it.
    """


@hookspec
def reasonrl_verl_registrations() -> list[Registration]:
    """What the plugin registers with verl (``upstream="verl"``).

    ``kind`` names the verl registry: ``policy_loss`` (``core_algos.register_policy_loss``),
    ``adv_estimator`` (``register_adv_est``), ``reward_manager``, ``agent_loop``,
    ``platform`` (``PlatformRegistry.register``), ``trainer`` (``register_trainer``), or
    another verl registry. ``apply()`` performs the registration; the verl bridge calls it
    while ``import verl`` runs, in the driver and in every Ray worker, so it must be cheap
    and safe to call more than once.
    """


@hookspec
def reasonrl_vllm_registrations() -> list[Registration]:
    """What the plugin registers with vLLM (``upstream="vllm"``): models, drafters, ….

    The vLLM bridge (a ``vllm.general_plugins`` entry point) calls each ``apply()`` once per
    process; vLLM may load general plugins in several processes (engine core, workers).
    """


@hookspec
def reasonrl_megatron_layer_specs() -> dict[str, Callable[..., Any]]:
    """Megatron-core layer specs by name: ``name -> builder(**kwargs) -> ModuleSpec``.

    Names are global; fetch one with :func:`reasonrl.api.megatron_layer_spec`.
    NeMo 2.x builds its LLMs on Megatron-core, so these specs are also the NeMo route.
    """


@hookspec
def reasonrl_config_groups() -> list[ConfigGroup]:
    """The plugin's knobs: one :class:`ConfigGroup` per ``reasonrl.<name>`` config section.

    Each group's schema is a dataclass built with :func:`reasonrl.config.knob`; the composed
    config is validated against it before any work starts.
    """


@hookspec
def reasonrl_hydra_searchpath() -> list[str]:
    """Extra Hydra search-path entries (e.g. ``pkg://my_plugin.conf``) holding the plugin's
    config groups (``reasonrl/<name>/<option>.yaml``). Built-in plugins keep theirs in
    ``hydra_configs/`` and return nothing here."""


@hookspec
def reasonrl_check_config(config: DictConfig) -> None:
    """Cross-field and cross-plugin checks on the whole composed config.

    Raise :class:`reasonrl.config.ConfigError` naming the offending key(s) to stop the run
    before any work starts (e.g. two samplers that cannot be stacked).
    """


@hookspec
def reasonrl_dataset_columns(config: DictConfig) -> list[DatasetColumn]:
    """Dataset columns the plugin's options read for this run (checked in the driver before Ray
    starts: a missing column is named with its file and the key that needs it).

    :param config: the composed run config.
    """


@hookspec
def reasonrl_prepare_rows(rows: list[dict]) -> None:
    """Complete verl RL rows (``RLHFDataset`` format) with what the plugin's own rewards read,
    computed from what the rows carry — e.g. a code problem's solutions × tests verdicts
    (``extra_info.solution_test_verdicts``) into its test-difficulty calibration (MiMo §3.3.1).

    Called by reasonrl's data writers (the CPU smoke data) before the rows are written; changes
    ``rows`` in place and leaves alone a row it does not recognise.

    :param rows: the rows about to be written.
    """


@hookspec
def reasonrl_check_inputs(config: DictConfig) -> None:
    """Checks that read what the run will use (files, a sandbox), in ``reasonrl train``'s driver
    once the preset's assets exist and before Ray starts; raise :class:`reasonrl.errors.UserError`
    naming the file or key to stop the run.

    :param config: the composed, resolved run config.
    """


@hookspec
def reasonrl_patches() -> list[Patch]:
    """Version-guarded changes to upstream code for what no extension point allows.

    See :mod:`reasonrl.patching`. Each patch names its upstream package, the version range it
    applies to and the upstream issue it works around.
    """


@hookspec
def reasonrl_cli_commands() -> list[CliCommand]:
    """Sub-commands added to the ``reasonrl`` CLI (``reasonrl <name> …``)."""


@hookspec
def reasonrl_benchmarks() -> list[CliCommand]:
    """Benchmarks run as ``reasonrl bench <name> …``; each prints its numbers (no thresholds)."""


@hookspec
def reasonrl_trainer_callbacks() -> list[TrainerCallback]:
    """Per-step callbacks inside verl's trainer (trainer mode ``reasonrl_sync``); see
    :class:`~reasonrl.contracts.TrainerCallback`."""


@hookspec
def reasonrl_request_transforms(config: DictConfig) -> list[Callable[..., Any]]:
    """What the plugin does to each generation request of this run, in reasonrl's one agent loop
    ``reasonrl`` (selected by ``actor_rollout_ref.rollout.agent.default_agent_loop=reasonrl``).

    Called once per agent-loop worker process with the run's config (verl's trainer config).

    :param config: the composed run config.
    :return: factories ``factory(context) -> RequestTransform | None``, each building one
        :class:`~reasonrl.request_transforms.RequestTransform` per request from a
        :class:`~reasonrl.request_transforms.RequestContext`; an empty list when the run does not
        use the plugin. Transforms of several plugins compose, ordered by ``RequestTransform.order``.
    """


@hookspec
def reasonrl_reaches() -> list[Reach]:
    """The upstream internals the plugin reaches into, each a :class:`~reasonrl.compat.Reach`
    (package, version range, what it touches, the public hook that would replace it) declared in
    the plugin's own ``compat.py`` beside the accessors that call ``reach.require()``.

    ``reasonrl train`` names each reach a run needs on an upstream version outside its range at
    start-up; ``reasonrl plugins`` lists them all. Must not import the upstream package.
    """


@hookspec
def reasonrl_api_functions() -> dict[str, Callable[..., Any]]:
    """Public functions the plugin offers as ``reasonrl.api.<name>`` (a technique's facade, e.g.
    ``math_reward``): ``name -> function``, listed by ``reasonrl.api.functions()``. A built-in
    plugin's are re-exported explicitly by :mod:`reasonrl.api` (a test keeps the two equal). Names
    are global and must be stable: code outside reasonrl calls them. The function itself must be
    the one the plugin's own adapters use.
    """


@hookspec
def reasonrl_side_environments() -> dict[str, Callable[[], dict[str, Any]]]:
    """Environments beside ``.venv`` that a plugin runs an upstream in (one whose pins cannot
    share it, e.g. the puzzle plugin's NeMo): ``name -> status()``. ``status`` must be fast and
    start nothing (read files); it returns at least ``state`` (e.g. ``ready`` / ``absent``) and
    where the environment is; ``reasonrl plugins`` shows it."""


@hookspec
def reasonrl_config_resolvers() -> dict[str, Callable[..., Any]]:
    """OmegaConf resolvers the plugin's config files use: ``name -> function`` (names start with
    ``reasonrl.``; e.g. ``${reasonrl.updates_per_iteration:...}``). Registered before any
    reasonrl config is composed; ``reasonrl train`` resolves the config before verl sees it.
    """


@hookspec(firstresult=True)
def reasonrl_sft_trainer(config: DictConfig) -> Callable[[DictConfig], None] | None:
    """The SFT trainer ``reasonrl sft`` runs for this config when the plugin's knobs need one of its
    own (e.g. the MTP loss beside verl's SFT loss), or None to leave it to verl's ``run_sft``.
    Called in each torchrun worker; the first plugin that answers wins.

    :param config: the resolved SFT config (verl's ``sft_trainer_engine`` keys + ``reasonrl``).
    :returns: ``run(config)``, which initialises the process group, trains and tears it down as
        verl's ``run_sft`` does.
    """


#: The hooks that take no argument and only declare what a plugin contributes.
DECLARATION_HOOKS = (
    "reasonrl_plugin_info",
    "reasonrl_verl_registrations",
    "reasonrl_vllm_registrations",
    "reasonrl_megatron_layer_specs",
    "reasonrl_config_groups",
    "reasonrl_hydra_searchpath",
    "reasonrl_patches",
    "reasonrl_cli_commands",
    "reasonrl_benchmarks",
    "reasonrl_trainer_callbacks",
    "reasonrl_api_functions",
    "reasonrl_reaches",
    "reasonrl_config_resolvers",
    "reasonrl_side_environments",
)
