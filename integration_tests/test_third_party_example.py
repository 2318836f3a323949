"""The worked third-party example of docs/architecture.md, end to end against real verl."""

from __future__ import annotations

import importlib
import os

import pytest
import torch

from reasonrl.testing.contract import check_plugin
from reasonrl.testing.fresh_process import python_fresh, reasonrl_fresh

pytestmark = pytest.mark.integration


def test_example_keeps_the_contract(example_plugin_path, monkeypatch):
    # check_plugin's no-upstream-import probe runs in a subprocess: it needs the path too.
    monkeypatch.syspath_prepend(str(example_plugin_path[1]))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(example_plugin_path[1]), os.environ.get("PYTHONPATH", "")]))
    plugin = importlib.import_module("reasonrl_example_plugin")
    assert check_plugin(plugin, "example_reinforce") == []


def test_registered_loss_matches_the_equation(example_plugin_path):
    code = """
import torch, verl
from verl.trainer.ppo.core_algos import get_policy_loss_fn
torch.manual_seed(0)
logp, adv = -torch.rand(3, 5), torch.randn(3, 5)
w = torch.rand(3, 5) + 0.5
mask = torch.tensor([[1,1,1,0,0],[1,1,1,1,1],[1,0,0,0,0]], dtype=torch.float32)
loss, metrics = get_policy_loss_fn("example_reinforce")(logp, logp, adv, mask, "token-mean", None, w)
# Reference written from the equation: mean over valid tokens of -w·A·logp.
ref = sum(-(w[i, t] * adv[i, t] * logp[i, t]) for i in range(3) for t in range(5) if mask[i, t]) / mask.sum()
print(float(loss), float(ref))
"""
    result = python_fresh(code, example_plugin_path)
    assert result.returncode == 0, result.stderr
    loss, ref = map(float, result.stdout.split())
    assert abs(loss - ref) < 1e-6


def test_switch_sets_verl_keys_through_the_plugins_searchpath(example_plugin_path):
    result = reasonrl_fresh(
        [
            "train",
            "recipe=mimo",
            "+reasonrl/example_reinforce=on",
            "reasonrl.example_reinforce.entropy_bonus=0.01",
            "--cfg",
            "job",
            "--resolve",
        ],
        example_plugin_path,
    )
    assert result.returncode == 0, result.stderr
    assert "loss_mode: example_reinforce" in result.stdout
    assert "entropy_coeff: 0.01" in result.stdout


def test_out_of_range_knob_fails_naming_key_and_range(example_plugin_path):
    result = reasonrl_fresh(
        [
            "train",
            "recipe=mimo",
            "+reasonrl/example_reinforce=on",
            "reasonrl.example_reinforce.entropy_bonus=5",
            "--cfg",
            "job",
        ],
        example_plugin_path,
    )
    assert result.returncode == 2
    assert "reasonrl.example_reinforce.entropy_bonus" in result.stderr and "[0.0, 0.1]" in result.stderr


def test_misspelt_knob_fails_with_suggestion(example_plugin_path):
    result = reasonrl_fresh(
        [
            "train",
            "recipe=mimo",
            "+reasonrl/example_reinforce=on",
            "+reasonrl.example_reinforce.entropy_bonsu=0.01",
            "--cfg",
            "job",
        ],
        example_plugin_path,
    )
    assert result.returncode == 2
    assert "reasonrl.example_reinforce.entropy_bonsu" in result.stderr and "entropy_bonus" in result.stderr


def test_cross_field_check_names_the_verl_key(example_plugin_path):
    args = [
        "train",
        "recipe=mimo",
        "+reasonrl/example_reinforce=on",
        "actor_rollout_ref.actor.policy_loss.loss_mode=vanilla",
        "--cfg",
        "job",
    ]
    result = reasonrl_fresh(args, example_plugin_path)
    assert result.returncode == 2 and "actor_rollout_ref.actor.policy_loss.loss_mode" in result.stderr


def test_core_is_framework_free(example_plugin_path, monkeypatch):
    code = "import sys, reasonrl_example_plugin.core as c; print(sorted(m for m in ('verl','vllm','megatron','ray') if m in sys.modules))"
    result = python_fresh(code, example_plugin_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
    monkeypatch.syspath_prepend(str(example_plugin_path[1]))
    core = importlib.import_module("reasonrl_example_plugin.core")
    torch.testing.assert_close(
        core.reinforce_token_loss(torch.tensor([-1.0]), torch.tensor([2.0])), torch.tensor([2.0])
    )
