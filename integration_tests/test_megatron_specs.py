"""Megatron-core layer specs contributed by a plugin, fetched by name, against megatron-core 0.16.1."""

from __future__ import annotations

import pytest

from reasonrl.testing.fresh_process import python_fresh

pytestmark = pytest.mark.integration

CODE = """
from reasonrl.api import megatron_layer_spec
from megatron.core.transformer.spec_utils import ModuleSpec
from megatron.core.transformer.transformer_layer import TransformerLayer

spec = megatron_layer_spec("fixture_local_gpt_layer")
print(isinstance(spec, ModuleSpec), spec.module is TransformerLayer)
try:
    megatron_layer_spec("nope")
except KeyError as exc:
    print("KeyError", "fixture_local_gpt_layer" in str(exc))
"""


def test_layer_spec_from_plugin_is_a_real_megatron_module_spec(megatron_spec_plugin_path):
    result = python_fresh(CODE, megatron_spec_plugin_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "True", "KeyError", "True"]
