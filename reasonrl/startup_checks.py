"""Checks of the verl values a run relies on, in the driver before Ray starts.

verl validates much of its config only in its TaskRunner, after Ray and the workers have
started, and some values not at all (a key added with Hydra's ``+`` is kept silently). These
checks compare the composed config with verl's own trainer config and read what the run will
read, so bad input fails in seconds naming the key or file:

- :func:`check_overrides` — a key the command line adds to verl's sections exists (open
  sections excepted) and every value has the type of the value it replaces;
- :func:`check_required_keys` — the keys a recipe declares required are set;
- :func:`check_group_size` — ``actor_rollout_ref.rollout.n`` fits the estimator and filters;
- :func:`check_model_path` / :func:`check_dataset_columns` — the files the run reads exist and
  hold the columns verl and the plugins' options read (``reasonrl_dataset_columns``).
"""

from __future__ import annotations

import difflib
import os
from typing import Any, Callable

from reasonrl.config import ConfigError, config_value
from reasonrl.contracts import DatasetColumn
from reasonrl.errors import UserError

#: top-level sections of the composed config that are not verl's (reasonrl's knobs are checked
#: by their schemas, reasonrl/config.py)
NOT_VERL = frozenset({"reasonrl", "hydra"})
#: verl's group-relative advantage estimators (``AdvantageEstimator``): a group needs n ≥ 2
GROUP_ESTIMATORS = frozenset(
    {"grpo", "grpo_vectorized", "rloo", "rloo_vectorized", "grpo_passk", "opo", "gpg", "reinforce_plus_plus_baseline"}
)


def _parse(overrides: list[str]) -> list[Any]:
    from hydra.core.override_parser.overrides_parser import OverridesParser

    return OverridesParser.create().parse_overrides(overrides)


def _is_value_override(override: Any) -> bool:
    """A ``key=value`` on a config key, not a config-group choice (``recipe=``, ``+preset=``,
    ``+reasonrl/rollout=``) and not reasonrl's or Hydra's own section."""
    key = override.key_or_group
    return "/" not in key and "." in key and key.split(".", 1)[0] != "hydra"


def _node(config: Any, key: str) -> tuple[bool, Any]:
    """Whether dotted ``key`` exists in ``config`` (a ``???`` value counts) and its value."""
    from omegaconf import DictConfig

    node = config
    for part in key.split("."):
        if not isinstance(node, DictConfig) or part not in node.keys():
            return False, None
        node = node._get_node(part)
    return True, node if isinstance(node, DictConfig) else node._value()


#: Sections whose keys are names of the user's choosing, however many the config already holds
#: (environment variables for Ray's workers: ``+ray_kwargs.ray_init.runtime_env.env_vars.X=1``).
FREE_FORM_SECTIONS = frozenset({"env_vars"})


def _open_parent(config: Any, key: str) -> bool:
    """Some ancestor of ``key`` is a section that takes any key (an empty mapping or null, or one of
    :data:`FREE_FORM_SECTIONS`)."""
    from omegaconf import DictConfig

    parts = key.split(".")
    if any(part in FREE_FORM_SECTIONS for part in parts[:-1]):
        return True
    for depth in range(1, len(parts)):
        exists, value = _node(config, ".".join(parts[:depth]))
        if not exists:
            return False
        if value is None or (isinstance(value, DictConfig) and len(value) == 0):
            return True
    return False


#: verl passes this section to ``ray.init(**...)`` as it is: its keys are ``ray.init``'s arguments
#: (``+ray_kwargs.ray_init.address=...`` joins a running cluster).
RAY_INIT = "ray_kwargs.ray_init"


def _check_ray_init_argument(key: str) -> None:
    import inspect

    import ray

    name = key[len(RAY_INIT) + 1 :].split(".")[0]
    arguments = sorted(p for p in inspect.signature(ray.init).parameters if p not in ("args", "kwargs"))
    if name not in arguments:
        hint = difflib.get_close_matches(name, arguments, n=1)
        raise ConfigError(
            key,
            "not an argument of ray.init (verl passes ray_kwargs.ray_init to it)"
            + (f"; did you mean {RAY_INIT}.{hint[0]}?" if hint else f" (arguments: {_few(arguments)})"),
        )


def verl_defaults() -> Any:
    """verl's own ``ppo_trainer`` config, as verl's ``main_ppo`` composes it."""
    from hydra import compose, initialize_config_module

    with initialize_config_module("verl.trainer.config", version_base=None):
        return compose("ppo_trainer")


def _siblings(config: Any, key: str) -> list[str]:
    from omegaconf import DictConfig

    exists, value = _node(config, key.rpartition(".")[0])
    return sorted(str(k) for k in value.keys()) if exists and isinstance(value, DictConfig) else []


def _type_problem(value: Any, default: Any) -> str | None:
    """Why ``value`` cannot stand where the value it replaces is ``default`` (None: it can)."""
    if isinstance(value, str) and value.startswith("${"):
        return None  # an interpolation: checked once resolved
    expected = type(default)
    if default is None or expected is str or value is None:
        return None
    if expected is bool:
        return None if isinstance(value, bool) else f"expected a bool, got {value!r}"
    if expected is int:
        return None if isinstance(value, int) and not isinstance(value, bool) else f"expected an int, got {value!r}"
    if expected is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return None
        return f"expected a number, got {value!r}"
    return None


def _refuse_missing_knob(base: Any, key: str) -> None:
    """A ``reasonrl.<group>.<knob>=`` override (no ``+``) of a knob the config does not hold."""
    from reasonrl.config import config_groups

    parts = key.split(".")
    group = config_groups().get(parts[1]) if len(parts) > 2 else None
    if group is None:  # the group check's own message (it names a plugin switched off, if any)
        from reasonrl.config import validate_reasonrl_section

        validate_reasonrl_section({parts[1]: {}}, config_groups())
    exists, _ = _node(base, f"reasonrl.{parts[1]}")
    if not exists:
        raise ConfigError(
            key,
            f"reasonrl.{parts[1]} is not in this config: turn one of its options on with "
            f"+reasonrl/{parts[1]}=<option>, or add the knob with +{key}=<value>",
        )
    import dataclasses

    knobs = sorted(f.name for f in dataclasses.fields(group.schema))
    if parts[2] in knobs:
        raise ConfigError(
            key, f"is a knob of reasonrl.{parts[1]} that this recipe's options leave unset: add it with +{key}=<value>"
        )
    hint = difflib.get_close_matches(parts[2], knobs, n=1)
    raise ConfigError(
        key, "unknown knob" + (f"; did you mean reasonrl.{parts[1]}.{hint[0]}?" if hint else f" (knobs: {_few(knobs)})")
    )


def _few(names: list[str], limit: int = 12) -> str:
    return ", ".join(names[:limit]) + (f", … ({len(names)} in all)" if len(names) > limit else "")


def check_overrides(overrides: list[str], compose: Callable[[list[str]], Any]) -> None:
    """The command line's ``key=value`` overrides of verl's sections: a key added with ``+`` must
    exist in the config the recipe and options compose to (Hydra's own hint after a misspelt key,
    "use +data.train_batch_sise=8", would otherwise make the typo be accepted silently), and every
    value must have the type of the value it replaces (``data.train_batch_size=abc``).

    ``compose(overrides)`` composes a config (``reasonrl.cli.train.compose_config``).
    """
    parsed = _parse(overrides)
    if not any(_is_value_override(o) for o in parsed):
        return
    base = compose([text for text, o in zip(overrides, parsed) if not _is_value_override(o)])
    for override in (o for o in parsed if _is_value_override(o) and not o.is_delete()):
        key = override.key_or_group
        exists, current = _node(base, key)
        if key.startswith("reasonrl."):  # knobs: their schemas check names, types and ranges
            if not exists and not override.is_add():
                _refuse_missing_knob(base, key)
            continue
        if not exists:
            if _open_parent(base, key) or _open_parent(verl_defaults(), key):
                continue
            if key.startswith(RAY_INIT + "."):
                _check_ray_init_argument(key)
                continue
            siblings = _siblings(base, key)
            hint = difflib.get_close_matches(key.rsplit(".", 1)[-1], siblings, n=1)
            parent = key.rpartition(".")[0]
            raise ConfigError(
                key,
                "not a key of verl's config or of the recipe"
                + (f"; did you mean {parent}.{hint[0]}?" if hint else f" (keys of {parent}: {_few(siblings)})"),
            )
        problem = _type_problem(override.value(), current)
        if problem:
            raise ConfigError(key, problem)


def refuse_missing_options(overrides: list[str]) -> None:
    """Every plugin option the recipe names is installed: a recipe composes without the options of
    a plugin that is not there (its defaults are ``optional``), a run must not."""
    from reasonrl.composition import missing_options

    missing = missing_options(overrides)
    if missing:
        named = ", ".join(f"+{g}={o}" for g, o in sorted(missing.items()))
        raise ConfigError(
            min(missing),
            f"the recipe uses {named}, which no installed plugin provides: install the plugin that "
            "declares the group (reasonrl plugins lists those installed)",
        )


def check_required_keys(config: Any) -> None:
    """The keys the recipe lists in ``reasonrl.recipe.required`` (key → why) must be set."""
    required = config_value(config, "reasonrl.recipe.required") or {}
    for key, why in dict(required).items():
        if config_value(config, str(key)) in (None, ""):
            recipe = config_value(config, "reasonrl.recipe.name", "the recipe")
            raise ConfigError(str(key), f"is required by recipe {recipe}: {why} (set {key}=<value>)")


def check_group_size(config: Any) -> None:
    """``rollout.n`` ≥ 1; ≥ 2 where the run compares responses within a group (verl's
    group-relative estimators, DAPO's group filter)."""
    n = config_value(config, "actor_rollout_ref.rollout.n")
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ConfigError("actor_rollout_ref.rollout.n", f"is {n!r}: responses per prompt must be an int >= 1")
    estimator = config_value(config, "algorithm.adv_estimator")
    if n < 2 and estimator in GROUP_ESTIMATORS:
        raise ConfigError(
            "actor_rollout_ref.rollout.n",
            f"is {n}: algorithm.adv_estimator={estimator} compares responses within a group of the same prompt: need >= 2",
        )
    if n < 2 and config_value(config, "algorithm.filter_groups.enable"):
        raise ConfigError(
            "actor_rollout_ref.rollout.n",
            f"is {n}: algorithm.filter_groups (DAPO's dynamic sampling) keeps groups by their reward spread: need >= 2",
        )


def data_parallel_size(config: Any) -> int | None:
    """The actor's data-parallel ranks: devices over its model-parallel group (FSDP: Ulysses
    sequence parallelism; Megatron: tensor · pipeline · context parallelism)."""
    devices = config_value(config, "trainer.n_gpus_per_node", 1) * config_value(config, "trainer.nnodes", 1)
    actor = "actor_rollout_ref.actor"
    if config_value(config, f"{actor}.strategy") == "megatron":
        group = 1
        for size in ("tensor", "pipeline", "context"):
            group *= config_value(config, f"{actor}.megatron.{size}_model_parallel_size", 1) or 1
    else:
        group = config_value(config, f"{actor}.ulysses_sequence_parallel_size", 1) or 1
    return devices // group if devices % group == 0 else None


def check_micro_batches(config: Any) -> None:
    """Without dynamic batch sizes, each data-parallel rank's share of a mini-batch is cut into
    micro-batches of ``ppo_micro_batch_size_per_gpu``: it must divide the share (verl asserts it
    only at the first update, minutes into a run)."""
    actor = "actor_rollout_ref.actor"
    micro = config_value(config, f"{actor}.ppo_micro_batch_size_per_gpu")
    if config_value(config, f"{actor}.use_dynamic_bsz") or not isinstance(micro, int) or micro < 1:
        return
    ranks = data_parallel_size(config)
    mini, n = config_value(config, f"{actor}.ppo_mini_batch_size"), config_value(config, "actor_rollout_ref.rollout.n")
    if not ranks or not isinstance(mini, int) or not isinstance(n, int):
        return
    share = mini * n // ranks
    if (mini * n) % ranks == 0 and share % micro:
        raise ConfigError(
            f"{actor}.ppo_micro_batch_size_per_gpu",
            f"is {micro}, but each of the {ranks} data-parallel ranks gets {share} responses per update "
            f"(ppo_mini_batch_size {mini} × rollout.n {n} / {ranks}): use a divisor of {share}",
        )


def check_config(config: Any) -> None:
    """The checks that read only the config (cheap: run for ``--cfg job`` too)."""
    check_required_keys(config)
    check_group_size(config)
    check_micro_batches(config)


def _looks_local(path: str) -> bool:
    return path.startswith(("/", "~", ".")) or os.path.exists(os.path.expanduser(path))


def check_model_path(config: Any) -> None:
    """A local ``actor_rollout_ref.model.path`` exists and holds a ``config.json`` (a Hub id is
    left to the loader)."""
    key = "actor_rollout_ref.model.path"
    path = config_value(config, key)
    if not isinstance(path, str) or not path:
        raise ConfigError(key, "is not set: give the model to train (a local checkpoint folder or a Hub id)")
    if not _looks_local(path):
        return
    folder = os.path.expanduser(path)
    if not os.path.isdir(folder):
        raise UserError(key, f"{path}: no such folder (a Hugging Face checkpoint folder with config.json is needed)")
    if not os.path.isfile(os.path.join(folder, "config.json")):
        raise UserError(key, f"{path}: no config.json in this folder (not a Hugging Face checkpoint)")


def verl_columns(config: Any) -> list[DatasetColumn]:
    """What verl itself reads from every row: the prompt, and for rule rewards the data source and
    the ``reward_model`` record with the ground truth."""
    columns = [DatasetColumn(str(config_value(config, "data.prompt_key", "prompt")), "data.prompt_key")]
    if not config_value(config, "reward.reward_model.enable", False):
        columns += [
            DatasetColumn("data_source", "verl's rule-based reward (reward.reward_model.enable=false)"),
            DatasetColumn("reward_model", "verl's rule-based reward (its reward_model.ground_truth)"),
        ]
    return columns


def _files(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value]


def _schema_names(path: str) -> tuple[set[str], set[str]]:
    """Top-level column names and ``extra_info``'s field names of a parquet file."""
    import pyarrow
    import pyarrow.parquet as pq

    try:
        schema = pq.read_schema(path)
    except (OSError, pyarrow.ArrowException) as error:
        raise UserError(path, f"not a readable parquet file: {error}") from error
    names = set(schema.names)
    extra: set[str] = set()
    if "extra_info" in names:
        field_type = schema.field("extra_info").type
        if pyarrow.types.is_struct(field_type):
            extra = {field_type.field(i).name for i in range(field_type.num_fields)}
    return names, extra


def check_dataset_columns(config: Any, plugin_columns: list[DatasetColumn]) -> None:
    """Every parquet of ``data.train_files`` / ``data.val_files`` exists and has every column
    verl and the plugins' options read; the first one missing is named with its file and the key
    that needs it."""
    columns = verl_columns(config) + list(plugin_columns)
    for files_key in ("data.train_files", "data.val_files"):
        for path in _files(config_value(config, files_key)):
            local = os.path.expanduser(path)
            if not local.endswith(".parquet"):
                continue  # other formats (a Hub dataset) are verl's to read
            if not os.path.isfile(local):
                raise UserError(files_key, f"{path}: no such file")
            names, extra = _schema_names(local)
            for column in columns:
                if column.train_only and files_key != "data.train_files":
                    continue
                if column.name in names or (column.or_extra_info and column.name in extra):
                    continue
                where = " (nor a key of extra_info)" if column.or_extra_info else ""
                raise UserError(
                    path,
                    f"no column {column.name!r}{where}, needed by {column.needed_by} (the file has {sorted(names)})",
                )


def plugin_dataset_columns(config: Any) -> list[DatasetColumn]:
    """The columns every plugin's options read for this run (``reasonrl_dataset_columns``)."""
    from reasonrl.manager import call_each

    return [column for _plugin, columns in call_each("reasonrl_dataset_columns", config=config) for column in columns]


def check_inputs(config: Any) -> None:
    """The checks that read files (after the preset's prepare step has made its assets), then the
    plugins' own (``reasonrl_check_inputs``)."""
    from reasonrl.manager import call_each

    check_model_path(config)
    check_dataset_columns(config, plugin_dataset_columns(config))
    for _plugin, _none in call_each("reasonrl_check_inputs", reraise=(UserError, ConfigError), config=config):
        pass
