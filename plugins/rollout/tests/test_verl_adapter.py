"""The rollout plugin's verl adapters against verl 0.9.1: the agent loop's registration, its
vLLM sampling parameter, the penalty on verl's TransferQueue field layout, start-up checks."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from reasonrl.config import ConfigError
from reasonrl.plugins.rollout.config import STOP_REASON_FIELD, RolloutConfig


def test_agent_loops_register_when_an_adapter_is_imported_first():
    """An adapter imported before verl's agent-loop package (a user, a test): both plugins' loops
    end up in verl's registry, importable by the path verl stores. (verl's package first is the
    agent-loop workers' order: every CPU main-job run with a plugin loop exercises it.)"""
    for first in ("reasonrl.plugins.rollout.verl_agent_loop",):
        code = (
            f"import importlib; importlib.import_module({first!r})\n"
            "from verl.experimental.agent_loop.agent_loop import _agent_loop_registry as r\n"
            "import hydra.utils\n"
            "print(sorted(k for k in r if k.startswith('reasonrl_')),"
            " hydra.utils.get_class(r['reasonrl_rollout']['_target_']).__name__)"
        )
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        assert done.stdout.strip().splitlines()[-1] == "['reasonrl_length_capped', 'reasonrl_rollout'] RolloutAgentLoop"


def test_repeat_detection_reaches_vllms_sampling_params():
    from vllm import SamplingParams

    from reasonrl.plugins.rollout.verl_agent_loop import repetition_sampling_params

    settings = RolloutConfig(repetition_max_pattern=64, repetition_min_pattern=2, repetition_min_count=8)
    params = SamplingParams(max_tokens=8, **repetition_sampling_params(settings))
    detection = params.repetition_detection
    assert (detection.max_pattern_size, detection.min_pattern_size, detection.min_count) == (64, 2, 8)
    assert repetition_sampling_params(RolloutConfig()) == {}, "off: the request is verl's own"


def _fields(reasons, scores, lengths):
    from tensordict import NonTensorStack, TensorDict

    nested = lambda ts: torch.nested.as_nested_tensor(ts, layout=torch.jagged)  # noqa: E731
    width = max(lengths)
    rm = [torch.zeros(width) for _ in lengths]
    masks = [torch.tensor([1.0] * n + [0.0] * (width - n)) for n in lengths]
    for row, n, score in zip(rm, lengths, scores):
        row[n - 1] = score
    extra = NonTensorStack(*[{STOP_REASON_FIELD: r, "turn_scores": []} for r in reasons])
    return TensorDict({"rm_scores": nested(rm), "response_mask": nested(masks), "extra_fields": extra}, batch_size=3)


def test_penalty_lands_on_the_scored_token_of_stopped_responses_only():
    from reasonrl.plugins.rollout.verl_callback import apply_repetition_penalty

    fields = _fields(["completed", "repetition", "repetition"], [1.0, 0.0, 1.0], [3, 5, 2])
    scores, metrics = apply_repetition_penalty(fields, 0.5)
    rows = list(scores.unbind())
    assert [float(r.sum()) for r in rows] == [1.0, -0.5, 0.5]
    assert float(rows[1][4]) == -0.5 and float(rows[2][1]) == 0.5, "at the last response token"
    assert metrics["reasonrl/rollout/repetition_stops"] == 2 and metrics["reasonrl/rollout/repetition_tokens"] == 7
    assert metrics["reasonrl/rollout/stop_reason_known"] == 3
    unchanged, _ = apply_repetition_penalty(fields, 0.0)
    assert unchanged is None, "no penalty: nothing written back"


def test_start_up_refuses_bad_values_naming_the_key():
    from reasonrl.cli.train import compose_config
    from reasonrl.plugins.rollout import check_rollout

    base = ["recipe=kimi_k15", "+preset=cpu_tiny"]
    for override, key in (
        ("+reasonrl.rollout.token_budget=0", "reasonrl.rollout.token_budget"),
        ("+reasonrl.rollout.staleness=-1", "reasonrl.rollout.staleness"),
        ("+reasonrl.rollout.token_budget=512", "reasonrl.rollout.token_budget"),  # no trainer path yet
    ):
        with pytest.raises(ConfigError) as error:
            check_rollout(compose_config([*base, override]))
        assert error.value.key == key
    with pytest.raises(ConfigError) as error:  # repeat detection without the agent loop that asks vLLM for it
        check_rollout(compose_config([*base, "+reasonrl.rollout.repetition_max_pattern=8"]))
    assert error.value.key == "actor_rollout_ref.rollout.agent.default_agent_loop"
    with pytest.raises(ConfigError) as error:
        check_rollout(
            compose_config([*base, "+reasonrl/rollout=repeat_detection", "reasonrl.rollout.repetition_min_pattern=65"])
        )
    assert error.value.key == "reasonrl.rollout.repetition_min_pattern"
    check_rollout(compose_config([*base, "+reasonrl/rollout=repeat_detection"]))  # the option itself is valid
