"""The rollout plugin's verl adapters against verl 0.9.1: the agent loop's registration, its
vLLM sampling parameter, the penalty on verl's TransferQueue field layout, start-up checks."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from reasonrl.config import ConfigError
from reasonrl.plugins.rollout.config import CARRIED_FIELD, STOP_REASON_FIELD, RolloutConfig


def test_the_composed_agent_loop_registers_when_its_adapter_is_imported_first():
    """The core's loop imported before verl's agent-loop package (a user, a test) ends up in
    verl's registry, importable by the path verl stores, and no plugin registers a loop of its own.
    (verl's package first is the agent-loop workers' order: every CPU main-job run with a request
    transform exercises it.)"""
    code = (
        "import reasonrl.bridges.verl_agent_loop\n"
        "from verl.experimental.agent_loop.agent_loop import _agent_loop_registry as r\n"
        "import hydra.utils\n"
        "print(sorted(k for k in r if k.startswith('reasonrl')), hydra.utils.get_class(r['reasonrl']['_target_']).__name__)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "['reasonrl'] ComposedAgentLoop"


def test_repeat_detection_reaches_vllms_sampling_params():
    from vllm import SamplingParams

    from reasonrl.plugins.rollout.verl_request import repetition_sampling_params

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
    from reasonrl.compat.verl import non_tensor_items
    from reasonrl.plugins.rollout.verl_callback import penalised_scores, repetition_metrics, stop_reasons

    fields = _fields(["completed", "repetition", "repetition"], [1.0, 0.0, 1.0], [3, 5, 2])
    reasons = stop_reasons(non_tensor_items(fields["extra_fields"]))
    masks = list(fields["response_mask"].unbind())
    stopped = [r == "repetition" for r in reasons]
    rows = penalised_scores(list(fields["rm_scores"].unbind()), masks, stopped, 0.5)
    assert [float(r.sum()) for r in rows] == [1.0, -0.5, 0.5]
    assert float(rows[1][4]) == -0.5 and float(rows[2][1]) == 0.5, "at the last response token"
    metrics = repetition_metrics(reasons, masks)
    assert metrics["reasonrl/rollout/repetition_stops"] == 2 and metrics["reasonrl/rollout/repetition_tokens"] == 7
    assert metrics["reasonrl/rollout/stop_reason_known"] == 3


#: DORA on this machine: two standalone vLLM replicas on logical GPUs 2 and 3, weights over gloo
DORA_CPU = (
    "actor_rollout_ref.rollout.checkpoint_engine.backend=gloo actor_rollout_ref.rollout.nnodes=1 "
    "actor_rollout_ref.rollout.n_gpus_per_node=2 ray_kwargs.ray_init.num_gpus=3"
)


def test_start_up_refuses_bad_values_naming_the_key():
    from reasonrl.composition import compose_config
    from reasonrl.plugins.rollout import check_rollout

    base = ["recipe=kimi_k15", "+preset=cpu_tiny"]
    for override, key in (
        ("+reasonrl.rollout.token_budget=0", "reasonrl.rollout.token_budget"),
        ("+reasonrl.rollout.staleness=-1", "reasonrl.rollout.staleness"),
        # staleness-bounded reuse: the seamless schedule's buffer and trainer mode ...
        (
            "+reasonrl/rollout=staleness trainer.v1.sampler.custom_sampler.name=null",
            "trainer.v1.sampler.custom_sampler.name",
        ),
        ("+reasonrl/rollout=staleness trainer.v1.trainer_mode=sync", "trainer.v1.trainer_mode"),
        # ... one policy version per response, which partial rollout's continued segments are not
        ("+reasonrl/rollout=[repeat_detection,partial,staleness]", "reasonrl.rollout.staleness"),
        ("+reasonrl/rollout=staleness reasonrl.rollout.reuse_ratio=1.5", "reasonrl.rollout.reuse_ratio"),
        # verl's disaggregated mode with the only checkpoint engine a CPU machine loads
        ("trainer.v1.trainer_mode=separate_async", "actor_rollout_ref.rollout.checkpoint_engine.backend"),
        # partial rollout without the agent loop that budgets and continues requests
        ("+reasonrl.rollout.token_budget=512", "actor_rollout_ref.rollout.agent.default_agent_loop"),
        # ... or without the replay buffer that holds unfinished groups
        (
            "+reasonrl/rollout=partial trainer.v1.sampler.custom_sampler.name=null",
            "trainer.v1.sampler.custom_sampler.name",
        ),
        # seamless rollout: the schedule runs in reasonrl's replay buffer under reasonrl_sync ...
        (
            "+reasonrl/rollout=seamless trainer.v1.sampler.custom_sampler.name=null",
            "trainer.v1.sampler.custom_sampler.name",
        ),
        ("+reasonrl/rollout=seamless trainer.v1.trainer_mode=sync", "trainer.v1.trainer_mode"),
        # ... not reasonrl's asynchronous mode either (verl's colocate_async is its own partial rollout)
        ("+reasonrl/rollout=seamless trainer.v1.trainer_mode=reasonrl_colocate_async", "trainer.v1.trainer_mode"),
        ("+reasonrl/rollout=partial trainer.v1.trainer_mode=reasonrl_colocate_async", "trainer.v1.trainer_mode"),
        ("+reasonrl/rollout=staleness trainer.v1.trainer_mode=reasonrl_colocate_async", "trainer.v1.trainer_mode"),
        # ... and cannot share the step with partial rollout (both decide when a group leaves it)
        ("+reasonrl/rollout=[repeat_detection,partial,seamless]", "reasonrl.rollout.seamless"),
        # DORA: standalone replicas (two at least: one replica holds one version) ...
        ("+reasonrl/rollout=dora", "actor_rollout_ref.rollout.n_gpus_per_node"),
        (
            f"+reasonrl/rollout=dora {DORA_CPU} actor_rollout_ref.rollout.n_gpus_per_node=1",
            "actor_rollout_ref.rollout.n_gpus_per_node",
        ),
        # ... in reasonrl's separate_async mode, with its buffer's rule instead of verl's prompt-age rule ...
        (f"+reasonrl/rollout=dora {DORA_CPU} trainer.v1.trainer_mode=separate_async", "trainer.v1.trainer_mode"),
        (
            f"+reasonrl/rollout=dora {DORA_CPU} trainer.v1.sampler.max_off_policy_threshold=2",
            "trainer.v1.sampler.max_off_policy_threshold",
        ),
        (
            f"+reasonrl/rollout=dora {DORA_CPU} trainer.v1.sampler.custom_sampler.name=null",
            "trainer.v1.sampler.custom_sampler.name",
        ),
        (f"+reasonrl/rollout=dora {DORA_CPU} reasonrl.rollout.staleness=null", "reasonrl.rollout.staleness"),
        # samples written during a step train after it: a bound of 0 could train none
        (f"+reasonrl/rollout=dora {DORA_CPU} reasonrl.rollout.staleness=0", "reasonrl.rollout.staleness"),
        # ... a weight-sending checkpoint engine ...
        (
            "+reasonrl/rollout=dora " + DORA_CPU.replace("backend=gloo", "backend=naive"),
            "actor_rollout_ref.rollout.checkpoint_engine.backend",
        ),
        # ... and not with the synchronous schedules
        (f"+reasonrl/rollout=[dora,partial] {DORA_CPU}", "reasonrl.rollout.dora"),
    ):
        with pytest.raises(ConfigError) as error:
            check_rollout(compose_config([*base, *override.split()]))
        assert error.value.key == key
    with pytest.raises(ConfigError) as error:  # repeat detection without the agent loop that asks vLLM for it
        check_rollout(compose_config([*base, "+reasonrl.rollout.repetition_max_pattern=8"]))
    assert error.value.key == "actor_rollout_ref.rollout.agent.default_agent_loop"
    with pytest.raises(ConfigError) as error:
        check_rollout(
            compose_config([*base, "+reasonrl/rollout=repeat_detection", "reasonrl.rollout.repetition_min_pattern=65"])
        )
    assert error.value.key == "reasonrl.rollout.repetition_min_pattern"
    check_rollout(compose_config([*base, "+reasonrl/rollout=repeat_detection"]))  # the options themselves are valid
    check_rollout(compose_config([*base, "+reasonrl/rollout=[repeat_detection,partial]"]))
    check_rollout(compose_config(["recipe=mimo", "+preset=cpu_tiny", "+reasonrl/rollout=seamless"]))
    check_rollout(compose_config(["recipe=longcat", "+preset=cpu_tiny", "+reasonrl/rollout=staleness"]))
    dora = compose_config(["recipe=longcat", "+preset=cpu_tiny", "+reasonrl/rollout=dora", *DORA_CPU.split()])
    check_rollout(dora)
    assert dora.trainer.v1.separate_async.parameter_sync_step == 2  # cpu_tiny: 16 prompts, mini-batches of 8
    longcat = compose_config(["recipe=longcat", "+reasonrl/rollout=dora"])
    assert longcat.trainer.v1.separate_async.parameter_sync_step == 1024 // 256


class _FakeEngine:
    """Stands in for verl's LLM client in the wrapper test only: returns scripted token ids and
    records each request (the real engine is exercised by the kimi CPU run and
    integration_tests/rollout/test_rollout_vllm.py)."""

    def __init__(self, replies):
        self.replies, self.requests = list(replies), []

    async def generate(self, *, request_id, prompt_ids, sampling_params, **kwargs):
        from verl.workers.rollout.replica import TokenOutput

        self.requests.append((list(prompt_ids), dict(sampling_params)))
        return TokenOutput(token_ids=self.replies.pop(0), stop_reason="completed")


def test_budgeted_requests_continue_from_the_tokens_so_far_and_flag_unfinished_ones():
    import asyncio

    from reasonrl.plugins.rollout.config import BUDGET_FIELD
    from reasonrl.plugins.rollout.verl_request import PartialRollout, StopReasons
    from reasonrl.request_transforms import chain_generate

    eos = 2
    engine = _FakeEngine([[5, 6, 7], [8, eos], [9, 9, 9], [4, 4, 4], [4]])

    def ask(prior, version, length=32, cap=None):
        partial = PartialRollout(length, {eos}, earlier_segments_in_loss=False)
        params = {"temperature": 1} if cap is None else {"temperature": 1, "max_tokens": cap}
        carried = json.dumps([prior]) if prior else ""
        params = partial.sampling_params(params, {BUDGET_FIELD: 3, CARRIED_FIELD: carried}, {"global_steps": version})
        call = chain_generate([StopReasons({}), partial], engine.generate)
        out = asyncio.run(call(request_id="r", prompt_ids=[100, 101], sampling_params=params))
        assert out.extra_fields[STOP_REASON_FIELD] == out.stop_reason, "the recorder wraps the budgeted call"
        return out, partial.request.record

    out, record = ask(None, version=1)  # a new prompt: budget 3, all used, no EOS -> unfinished
    assert engine.requests[-1] == ([100, 101], {"temperature": 1, "max_tokens": 3})
    assert out.token_ids == [5, 6, 7] and record.unfinished and [s.version for s in record.segments] == [1]
    out, record = ask(record.to_record(), version=2)  # continued under the newer policy
    assert engine.requests[-1][0] == [100, 101, 5, 6, 7], "prompt + tokens so far"
    assert out.token_ids == [5, 6, 7, 8, eos] and not record.unfinished
    assert [(s.version, len(s.token_ids)) for s in record.segments] == [(1, 3), (2, 2)]
    calls = len(engine.requests)
    out, again = ask(record.to_record(), version=3)  # finished earlier: returned as it was
    assert len(engine.requests) == calls and out.token_ids == [5, 6, 7, 8, eos] and again.segments == record.segments
    out, record = ask(None, version=1, length=3)  # the response length ends it, not the budget
    assert out.token_ids == [9, 9, 9] and not record.unfinished
    # an earlier transform's cap (the length curriculum's max_tokens = 4) is the response's limit:
    # the second segment asks for 1 token, and the response ends there instead of being held forever
    out, record = ask(None, version=1, cap=4)
    assert record.unfinished and engine.requests[-1][1]["max_tokens"] == 3
    out, record = ask(record.to_record(), version=2, cap=4)
    assert engine.requests[-1][1]["max_tokens"] == 1 and out.token_ids == [4, 4, 4, 4] and not record.unfinished


def test_held_groups_wait_for_the_next_iteration_and_refills_take_them_only_beyond_a_batch():
    from types import SimpleNamespace

    from reasonrl.bridges.verl_replay_buffer import FinishedGroup
    from reasonrl.plugins.rollout.config import PARTIAL_FIELD
    from reasonrl.plugins.rollout.partial import PartialTrajectory
    from reasonrl.plugins.rollout.verl_callback import PartialRolloutCallback

    callback = PartialRolloutCallback(RolloutConfig(token_budget=4))
    trainer = SimpleNamespace(config=SimpleNamespace(data=SimpleNamespace(train_batch_size=2)))

    def group(uid, row, unfinished_sessions, sessions=12):
        fields = []
        for session in range(sessions):
            t = PartialTrajectory(f"{uid}/{session}", -1, [1], unfinished=session in unfinished_sessions)
            t.extend(1, [session, session])
            fields.append({PARTIAL_FIELD: t.to_record()})
        fields.reverse()  # verl's key order is not session order ("_10" sorts before "_2")
        held = callback.holds_group(trainer, fields)
        return FinishedGroup(uid, [0.0] * sessions, [{}] * sessions, trained=not held, held=held, extra_fields=fields)

    finished = [group(f"u{i}", 10 + i, {1} if i < 3 else set()) for i in range(4)]
    for g in finished:
        g.row = 10 + int(g.uid[1:])
    assert [g.held for g in finished] == [True, True, True, False]
    callback.on_groups_finished(trainer, finished)
    assert len(callback.store) == 3
    # a refill within the iteration takes held groups only beyond train_batch_size (2) waiting ones
    (refilled,) = callback.carried_prompts(trainer, 5, refill=True)
    assert refilled[0] == 10 and len(callback.store) == 2
    assert callback.carried_prompts(trainer, 5, refill=True) == []
    state = callback.state_dict()  # what the checkpoint holds
    # the next iteration sends them out first, every response in session order
    carried = callback.carried_prompts(trainer, 5, refill=False)
    assert [row for row, _ in carried] == [11, 12] and len(callback.store) == 0
    records = json.loads(carried[0][1][CARRIED_FIELD])
    assert [r["key"] for r in records] == [f"u1/{i}" for i in range(12)]
    assert [r["unfinished"] for r in records] == [i == 1 for i in range(12)]
    restored = PartialRolloutCallback(RolloutConfig(token_budget=4))
    restored.load_state_dict(state)
    assert [row for row, _ in restored.carried_prompts(trainer, 5, refill=False)] == [11, 12]
    metrics = {}
    callback.before_advantage(trainer, None, metrics)
    assert metrics["reasonrl/rollout/partial_held_groups"] == 3
    assert metrics["reasonrl/rollout/partial_carried_groups"] == 3
    assert metrics["reasonrl/rollout/partial_waiting_groups"] == 0


def test_the_staleness_schedule_owns_the_kept_group_rule_the_replay_buffer_applies():
    """One rule: the replay buffer asks the schedule (``split_kept``), which is the plugin's
    ``staleness.split_kept`` with the option's bound and ``reuse_ratio · batch`` quota."""
    from reasonrl.callbacks import RolloutSchedule
    from reasonrl.plugins.rollout.verl_callback import StalenessRolloutCallback

    callback = StalenessRolloutCallback(RolloutConfig(seamless=True, staleness=1, reuse_ratio=0.5))
    assert isinstance(callback, RolloutSchedule) and callback.keeps_groups and callback.staleness == 1
    # the schedule orders the batch: shuffled, the same way for the same step (a resumed run alike)
    uids = [f"u{i}" for i in range(16)]
    assert sorted(callback.order_batch(uids, 5)) == sorted(uids) and callback.order_batch(uids, 5) != uids
    assert callback.order_batch(uids, 5) == callback.order_batch(list(uids), 5)
    versions = {"a": 5, "b": 4, "c": 3, "d": 5, "e": 4}  # trainer at version 5: c is 2 behind
    launches = {"a": 0, "b": 3, "c": 1, "d": 2, "e": 1}
    reused, waiting, stale = callback.split_kept(sorted(versions), 5, 4, versions.get, launches.get)
    assert stale == ["c"]
    assert reused == ["e", "b"] and waiting == ["a", "d"]  # quota 0.5 · 4 = 2, oldest version, then launch


def test_a_request_crossing_its_replicas_update_keeps_each_tokens_own_log_probability():
    """DORA's continued requests (``verl_dora``): when a replica is updated, its in-flight requests are
    aborted and verl's ``FullyAsyncLLMServerClient`` continues them with their tokens on another replica
    (another version). Each token keeps the log-probability of the engine that sampled it — the
    truncated IS's ``rollout_logp`` is per token, against the token's own version — and the response is
    tagged with the versions it spans. Two scripted servers stand in for the replicas (vLLM's own abort
    path: integration_tests/rollout/test_rollout_vllm.py)."""
    import asyncio

    from omegaconf import OmegaConf
    from verl.workers.rollout.llm_server import FullyAsyncLLMServerClient
    from verl.workers.rollout.replica import TokenOutput

    class Replica:
        def __init__(self, version, reply):
            self.version, self.reply, self.prompts = version, reply, []

            async def generate(**kwargs):
                self.prompts.append(list(kwargs["prompt_ids"]))
                return TokenOutput(extra_fields={"global_steps": self.version}, **self.reply)

            self.generate = type("Method", (), {"remote": staticmethod(generate)})()

    old = Replica(3, dict(token_ids=[11, 12], log_probs=[-0.1, -0.2], stop_reason="aborted"))  # updated mid-way
    new = Replica(4, dict(token_ids=[13, 14, 15], log_probs=[-0.3, -0.4, -0.5], stop_reason="completed"))
    balancer = [old, new]  # the updated replica has left the balancer when the request comes back

    class Client(FullyAsyncLLMServerClient):
        async def _acquire_server(self, request_id, **extra):
            return "replica", balancer.pop(0)

        def _release_server(self, server_id, request_id=None):
            pass

    config = OmegaConf.create({"actor_rollout_ref": {"rollout": {"response_length": 8, "name": "vllm"}}})
    output = asyncio.run(
        Client(config=config).generate("r0", prompt_ids=[1, 2], sampling_params={"max_tokens": 8, "logprobs": 0})
    )
    assert output.token_ids == [11, 12, 13, 14, 15]
    assert output.log_probs == [-0.1, -0.2, -0.3, -0.4, -0.5]  # each token: its own engine's log-probability
    assert new.prompts == [[1, 2, 11, 12]]  # continued from the tokens so far, not restarted
    assert (output.extra_fields["min_global_steps"], output.extra_fields["max_global_steps"]) == (3, 4)


def test_dora_rule_evicts_by_the_trajectories_versions_in_verls_async_buffer():
    """The rule the DORA callback installs, run by verl's own ReplayBufferAsync eviction pass
    (``_terminal_eviction_reasons``) under reasonrl's buffer: a finished group goes when its oldest
    trajectory began more than ``staleness`` versions before the trainer's policy, whatever its
    prompt's age; groups still in flight are not judged."""
    from omegaconf import OmegaConf

    from reasonrl.bridges.verl_replay_buffer import ReportingReplayBufferAsync
    from reasonrl.plugins.rollout.verl_callback import DoraRolloutCallback

    buffer = ReportingReplayBufferAsync(
        trainer_mode="reasonrl_separate_async",
        trainer_config=OmegaConf.create({}),
        max_off_policy_threshold=None,
        max_off_policy_strategy="drop",
        sampler_kwargs={},
    )
    buffer.stale_rule = DoraRolloutCallback(RolloutConfig(dora=True, staleness=2)).stale_rule
    # step 5 trains from policy 4: a group whose oldest response began on version 1 lags 3
    groups = {"a": (2, 4), "b": (1, 4), "c": (3, 3), "d": (0, 0)}  # uid: oldest versions of its two responses
    for uid, versions in groups.items():
        for index, version in enumerate(versions):
            buffer.partitions["train"][f"{uid}_{index}"] = {"min_global_steps": version, "max_global_steps": 4}
    buffer.prompt_global_steps["train"].update({uid: 5 for uid in groups})  # submitted now: verl's rule keeps all
    buffer.finished_keys["train"].update({"a", "b", "c"})  # "d" still generating
    stale, _dapo, _failed, _counts = buffer._terminal_eviction_reasons(5, "train")
    assert stale == {"b"}  # a: oldest 2, lag 2 (kept); b: oldest 1, lag 3 (evicted)
    assert buffer._terminal_eviction_reasons(6, "train")[0] == {"a", "b"}  # one step on, a lags 3 too
    assert buffer._terminal_eviction_reasons(5, "val")[0] == set()
