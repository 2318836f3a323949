"""Validation of the ``reasonrl`` section of a composed config.

Every plugin's knobs live at ``reasonrl.<group>``; the group's schema is a dataclass whose
fields are declared with :func:`knob` (default, help text, allowed range or choices). The
whole section is checked before any work starts: unknown groups, unknown keys, wrong types
and out-of-range values all raise :class:`ConfigError` naming the full key.
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from typing import Any, Iterable, Mapping

from reasonrl.contracts import ConfigGroup
from reasonrl.errors import UserError

#: Keys under ``reasonrl`` that belong to reasonrl itself rather than to a plugin.
RESERVED_KEYS = frozenset({"recipe", "preset"})


class ConfigError(UserError, ValueError):
    """A reasonrl config value that cannot run; ``key`` is the full dotted key (the error's subject)."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(key, message)
        self.key = key


def register_resolvers() -> None:
    """Register every plugin's OmegaConf resolvers (``reasonrl_config_resolvers``; idempotent).
    ``reasonrl train`` resolves the whole config in the driver before verl's TaskRunner sees it,
    so no Ray process needs them."""
    from omegaconf import OmegaConf

    from reasonrl.manager import call_each

    for plugin, resolvers in call_each("reasonrl_config_resolvers"):
        for name, function in (resolvers or {}).items():
            if not name.startswith("reasonrl."):
                raise ValueError(f"plugin {plugin!r}: resolver {name!r} must be named reasonrl.<name>")
            if not OmegaConf.has_resolver(name):
                OmegaConf.register_new_resolver(name, function)


def config_value(config: Any, key: str, default: Any = None) -> Any:
    """``config``'s value at dotted ``key`` (an OmegaConf config or a plain mapping), else
    ``default``: the one config lookup the plugins' checks and adapters share."""
    from omegaconf import DictConfig, OmegaConf

    if not isinstance(config, DictConfig):
        config = OmegaConf.create(config or {})
    return OmegaConf.select(config, key, default=default)


#: reasonrl's verl trainer modes: verl's synchronous trainer / its colocated asynchronous trainer
#: (partial rollout across weight updates) / its disaggregated asynchronous trainer (standalone
#: generation replicas fed by a checkpoint engine), each plus the plugin callbacks (bridges/verl_trainer.py).
REASONRL_TRAINER_MODE = "reasonrl_sync"
REASONRL_ASYNC_TRAINER_MODE = "reasonrl_colocate_async"
REASONRL_SEPARATE_ASYNC_TRAINER_MODE = "reasonrl_separate_async"
REASONRL_TRAINER_MODES = (REASONRL_TRAINER_MODE, REASONRL_ASYNC_TRAINER_MODE, REASONRL_SEPARATE_ASYNC_TRAINER_MODE)


def require_trainer_mode(config: Any, needs: str, modes: tuple[str, ...] = REASONRL_TRAINER_MODES) -> None:
    """Refuse a run whose ``trainer.v1.trainer_mode`` is not one of ``modes`` (by default any of
    reasonrl's): ``needs`` says what of the plugin runs there (e.g. "the length curriculum (a trainer
    callback)")."""
    mode = config_value(config, "trainer.v1.trainer_mode")
    if mode not in modes:
        names = " or ".join(repr(m) for m in modes)
        raise ConfigError(
            "trainer.v1.trainer_mode",
            f"is {mode!r}, but {needs} runs in trainer mode {names} (the plugin's option sets {REASONRL_TRAINER_MODE!r})",
        )


def require_agent_loop(config: Any, loop: str, needs: str) -> None:
    """Refuse a run whose default agent loop is not ``loop`` (verl's agent-loop registry; the
    plugins' request transforms run in reasonrl's one loop, ``reasonrl``): ``needs`` says what
    runs in it."""
    chosen = config_value(config, "actor_rollout_ref.rollout.agent.default_agent_loop")
    if chosen != loop:
        raise ConfigError(
            "actor_rollout_ref.rollout.agent.default_agent_loop",
            f"is {chosen!r}: {needs} runs in agent loop {loop!r} (the plugin's option sets it; every plugin's "
            "request transforms compose there)",
        )


def knob(
    default: Any = dataclasses.MISSING,
    *,
    help: str,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
    choices: Iterable[Any] | None = None,
) -> Any:
    """A schema field with its help text and allowed values.

    ``low``/``high`` bound numbers (closed unless ``low_open``/``high_open``), ``choices``
    lists the allowed values. Mutable defaults (lists, dicts) are copied per instance.
    """
    metadata = {
        "help": help,
        "low": low,
        "high": high,
        "low_open": low_open,
        "high_open": high_open,
        "choices": tuple(choices) if choices is not None else None,
    }
    if isinstance(default, (list, dict, set)):
        return dataclasses.field(default_factory=lambda: type(default)(default), metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def allowed_range(metadata: Mapping[str, Any]) -> str:
    """Human text for a knob's allowed values, e.g. ``(0, 1]`` or ``one of ['a', 'b']``."""
    if metadata.get("choices") is not None:
        return f"one of {list(metadata['choices'])}"
    low, high = metadata.get("low"), metadata.get("high")
    if low is None and high is None:
        return "any value"
    left = "(" if metadata.get("low_open") or low is None else "["
    right = ")" if metadata.get("high_open") or high is None else "]"
    return f"{left}{'-inf' if low is None else low}, {'inf' if high is None else high}{right}"


def _in_range(value: float, metadata: Mapping[str, Any]) -> bool:
    low, high = metadata.get("low"), metadata.get("high")
    if low is not None and (value < low or (metadata.get("low_open") and value == low)):
        return False
    if high is not None and (value > high or (metadata.get("high_open") and value == high)):
        return False
    return True


def _coerce(key: str, value: Any, annotation: Any) -> Any:
    """Check ``value`` against a field annotation; ints are accepted where floats are."""
    origin = typing.get_origin(annotation)
    options = typing.get_args(annotation) if origin in (typing.Union, types.UnionType) else (annotation,)
    if value is None:
        if type(None) in options:
            return None
        raise ConfigError(key, "must not be null")
    if Any in options:
        return value
    for option in options:
        base = typing.get_origin(option) or option
        if base is float and isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if base is int and isinstance(value, int) and not isinstance(value, bool):
            return value
        if base in (bool, str) and isinstance(value, base):
            return value
        if base in (list, tuple) and isinstance(value, (list, tuple)):
            return list(value)
        if base is dict and isinstance(value, Mapping):
            return dict(value)
    names = [getattr(o, "__name__", str(o)) for o in options]
    raise ConfigError(key, f"expected {' or '.join(names)}, got {type(value).__name__} {value!r}")


def validate_group(group: ConfigGroup, values: Mapping[str, Any] | None, prefix: str = "reasonrl") -> Any:
    """Build ``group.schema`` from ``values``, checking keys, types, ranges and ``check()``."""
    base = f"{prefix}.{group.name}"
    values = dict(values or {})
    fields = {f.name: f for f in dataclasses.fields(group.schema)}
    hints = typing.get_type_hints(group.schema)
    for key in values:
        if key not in fields:
            hint = difflib.get_close_matches(key, fields, n=1)
            suggestion = f" Did you mean '{hint[0]}'?" if hint else ""
            raise ConfigError(f"{base}.{key}", f"unknown key.{suggestion} Known keys: {sorted(fields)}")
    kwargs = {}
    for name, spec in fields.items():
        key = f"{base}.{name}"
        if name not in values:
            if spec.default is dataclasses.MISSING and spec.default_factory is dataclasses.MISSING:
                raise ConfigError(key, f"is required ({spec.metadata.get('help', '')})")
            continue
        value = _coerce(key, values[name], hints[name])
        meta = spec.metadata
        if meta.get("choices") is not None and value not in meta["choices"]:
            raise ConfigError(key, f"= {value!r} is not allowed: allowed {allowed_range(meta)}")
        if isinstance(value, (int, float)) and not isinstance(value, bool) and not _in_range(value, meta):
            raise ConfigError(key, f"= {value!r} is out of range: allowed {allowed_range(meta)}")
        kwargs[name] = value
    instance = group.schema(**kwargs)
    check = getattr(instance, "check", None)
    if callable(check):
        try:
            check()
        except ConfigError:
            raise
        except ValueError as exc:
            raise ConfigError(base, str(exc)) from exc
    return instance


def validate_reasonrl_section(section: Mapping[str, Any] | None, groups: Mapping[str, ConfigGroup]) -> dict[str, Any]:
    """Validate the whole ``reasonrl`` mapping; return ``{group name: schema instance}``."""
    validated: dict[str, Any] = {}
    for name, values in dict(section or {}).items():
        if name in RESERVED_KEYS:
            continue
        if name not in groups:
            from reasonrl.manager import describe_disabled, disabled_plugins

            # A plugin switched off is never imported, so the groups it would declare are unknown;
            # built-in plugins name their main group after themselves (sampling, rewards, mtp, ...).
            disabled = disabled_plugins()
            if name in disabled:
                switch = disabled[name]
                raise ConfigError(
                    f"reasonrl.{name}",
                    f"plugin {name!r} is disabled ({switch.reason}): {switch.remedy} to use this config group",
                )
            hint = difflib.get_close_matches(name, list(groups), n=1)
            suggestion = f" Did you mean 'reasonrl.{hint[0]}'?" if hint else ""
            known = sorted(groups) or "none installed"
            declared = "no installed plugin declares this config group"
            if disabled:
                declared = f"no loaded plugin declares this config group; it may belong to a plugin switched off: {describe_disabled(disabled)}"
            raise ConfigError(f"reasonrl.{name}", f"{declared}.{suggestion} Known groups: {known}")
        if values is not None and not isinstance(values, Mapping):
            raise ConfigError(f"reasonrl.{name}", f"must be a mapping of knobs, got {values!r}")
        validated[name] = validate_group(groups[name], values)
    return validated


def group_settings(config: Any, group: ConfigGroup) -> Any:
    """The validated ``reasonrl.<group>`` section of a composed run config (defaults when absent)."""
    from omegaconf import DictConfig, OmegaConf

    section = config.get("reasonrl", {}) if config is not None else {}
    section = section.get(group.name, {}) if section else {}
    if isinstance(section, DictConfig):
        section = OmegaConf.to_container(section, resolve=True)
    return validate_group(group, section or {})


def config_groups() -> dict[str, ConfigGroup]:
    """Every ``reasonrl.<group>`` any installed plugin declares, by group name."""
    from reasonrl.manager import call_each

    groups: dict[str, ConfigGroup] = {}
    for plugin, declared in call_each("reasonrl_config_groups"):
        for group in declared:
            if group.name in groups:
                raise ConfigError(f"reasonrl.{group.name}", f"declared twice (again by plugin {plugin!r})")
            groups[group.name] = group
    return groups


def validate_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """Validate a composed run config: the ``reasonrl`` section against every plugin's schema,
    then each plugin's cross-field checks. Returns ``{group: validated schema instance}``."""
    from omegaconf import DictConfig, OmegaConf

    from reasonrl.manager import call_each

    section = config.get("reasonrl")
    if isinstance(section, DictConfig):
        section = OmegaConf.to_container(section, resolve=True)
    validated = validate_reasonrl_section(section, config_groups())
    for _plugin, _result in call_each("reasonrl_check_config", reraise=(ConfigError,), config=config):
        pass  # a check answers by raising ConfigError; return values are ignored
    return validated
