"""transformers internals reasonrl uses (transformers 5.x), each behind its version guard."""

from __future__ import annotations

import contextlib
import traceback
from pkgutil import resolve_name

from reasonrl.bridges.import_hooks import still_importing
from reasonrl.compat import Reach, declare

TRANSFORMERS_5 = ">=5.9.0,<5.20"

AUTO_REGISTRY = declare(
    Reach(
        name="transformers.auto-registry",
        package="transformers",
        versions=TRANSFORMERS_5,
        touches="transformers.models.auto.configuration_auto.CONFIG_MAPPING (is a model type registered?)",
        used_by="mtp plugin (MiMoForCausalLM), puzzle plugin (DeciLMForCausalLM) registered with the Auto classes",
        public_hook="an idempotent AutoConfig.register (it raises for a known type)",
    )
)


def register_causal_lm(model_type: str, config_class: type, model_class: type) -> None:
    """``AutoConfig`` / ``AutoModelForCausalLM`` learn ``model_type`` (idempotent; also where a
    bridge has registered the config alone, as vLLM's does)."""
    AUTO_REGISTRY.require()
    _register_config(model_type, config_class)
    _register_model(config_class, model_class)


def _register_config(model_type: str, config_class: type) -> None:
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING, AutoConfig

    if model_type not in CONFIG_MAPPING:
        AutoConfig.register(model_type, config_class)


def _register_model(config_class: type, model_class: type) -> None:
    from transformers.models.auto.modeling_auto import AutoModelForCausalLM

    AutoModelForCausalLM.register(config_class, model_class, exist_ok=True)


#: transformers' Auto registries: ``AutoConfig``'s, then ``AutoModelForCausalLM``'s (which imports it)
CONFIG_AUTO_MODULE = "transformers.models.auto.configuration_auto"
MODEL_AUTO_MODULE = "transformers.models.auto.modeling_auto"


def register_causal_lm_when_loaded(
    plugin: str, model_type: str, config_class: str, model_class: str | None = None
) -> None:
    """``AutoConfig`` learns ``model_type`` once transformers' config registry is imported, and
    ``AutoModelForCausalLM`` its model class once a config of that type exists in the process
    (transformers looks a model class up by the type of a config instance): a process that never
    asks transformers for such a config or model imports neither class. ``"module:Class"`` each;
    the config class lives in a module without model code, calls :func:`model_class_needed` when
    an instance is built or unpickled, and its module ends with :func:`finish_registrations`. No
    ``model_class``: the config only, as vLLM needs. Failures are reported for ``plugin`` and
    leave transformers' import intact."""
    from reasonrl.bridges.import_hooks import run_after_import

    AUTO_REGISTRY.require()  # the version guard now, before any transformers import
    lazy = _LAZY.setdefault((plugin, model_type), _LazyCausalLM(plugin, model_type, config_class))
    lazy.model_class = model_class or lazy.model_class
    run_after_import(CONFIG_AUTO_MODULE, lazy.on_config_registry)
    run_after_import(MODEL_AUTO_MODULE, lazy.on_model_registry)


class _LazyCausalLM:
    """One model type's deferred registrations (one object per type: a second bridge run adds no
    callback). transformers' auto modules import each other, and its config classes import the
    model registry (their docstrings name model classes): the config's registration, if it fires
    while the model registry or the plugin's config module is still being imported, waits for
    the end of that import (the model registry's callback, the config module's last line)."""

    def __init__(self, plugin: str, model_type: str, config_class: str) -> None:
        self.plugin, self.model_type, self.config_class = plugin, model_type, config_class
        self.config_module = config_class.partition(":")[0]
        self.model_class: str | None = None
        self.config_waits = False
        self.model_registered = False

    def on_config_registry(self) -> None:
        self.config_waits = True
        if not (still_importing(MODEL_AUTO_MODULE) or still_importing(self.config_module)):
            self.register_config()

    def on_model_registry(self) -> None:
        if self.config_waits and not still_importing(self.config_module):
            self.register_config()

    def register_config(self) -> None:
        """(The config module's classes are defined by now, even from its last line.)"""
        self.config_waits = False
        with self._reported("AutoConfig"):
            _register_config(self.model_type, resolve_name(self.config_class))

    def register_model(self) -> None:
        if self.model_class is None or self.model_registered:
            return
        self.model_registered = True
        with self._reported("AutoModelForCausalLM"):
            _register_model(resolve_name(self.config_class), resolve_name(self.model_class))

    @contextlib.contextmanager
    def _reported(self, registry: str):
        """A failure is printed and recorded for the plugin; transformers' import goes on (a broken
        plugin must not break transformers for every other model)."""
        from reasonrl.manager import LoadError, report

        try:
            yield
        except Exception as exc:
            where = f"transformers {registry}[{self.model_type!r}]"
            report(LoadError(self.plugin, where, f"{type(exc).__name__}: {exc}", traceback.format_exc()))


def finish_registrations(config_module: str) -> None:
    """The last line of a config module registered lazily: completes what waited for it."""
    for lazy in _LAZY.values():
        if lazy.config_module == config_module and lazy.config_waits:
            lazy.register_config()


def model_class_needed(model_type: str) -> None:
    """A config of ``model_type`` now exists (built or unpickled): transformers may look its model
    class up, so a lazily registered one is registered now (once)."""
    for lazy in _LAZY.values():
        if lazy.model_type == model_type and not lazy.model_registered:
            lazy.register_model()


_LAZY: dict[tuple[str, str], _LazyCausalLM] = {}
