"""The rollout plugin's framework-free cores: FIFO early termination (MiMo §3.4.1),
demand-driven launching, repeat detection (Kimi §2.6.2), partial-rollout segments and the
staleness buffer (LongCat §3.1.1)."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reasonrl.plugins.rollout.partial import (
    HeldGroup,
    PartialRolloutStore,
    PartialTrajectory,
    is_unfinished,
    segment_loss_mask,
)
from reasonrl.plugins.rollout.repetition import first_repetition_stop, penalised, repeated_tail
from reasonrl.plugins.rollout.seamless import (
    fifo_early_termination,
    idle_ratio,
    sample_waste,
    tasks_to_launch,
    valid_rate_estimate,
)
from reasonrl.plugins.rollout.staleness import StalenessBuffer, TaggedSample, split_kept, within_bound
from reasonrl.state_io import digest

# A timeline of MiMo's Figure 6 kind, worked by hand: six tasks in launch order.
#   task:    0    1    2    3    4    5
#   finish:  3    1    4    2    6    5
#   valid:   y    n    y    y    y    n
FINISH = [3.0, 1.0, 4.0, 2.0, 6.0, 5.0]
VALID = [True, False, True, True, True, False]


@pytest.mark.parametrize(
    "batch_size, selected, stop_time",
    [
        (1, [0], 3.0),  # task 0 valid, done at 3 (task 3 was valid at 2, but was launched later)
        (2, [0, 2], 4.0),  # tasks 0..2 all done at 4
        (3, [0, 2, 3], 4.0),  # task 3 finished at 2: nothing more to wait for
        (4, [0, 2, 3, 4], 6.0),  # task 4 ends at 6; task 5 (launched after it) need not finish first
        (5, [], None),  # only four valid tasks
    ],
)
def test_fifo_rule_on_a_hand_worked_timeline(batch_size, selected, stop_time):
    assert fifo_early_termination(FINISH, VALID, batch_size) == (selected, stop_time)


def test_fifo_waits_for_every_earlier_task_and_never_picks_the_fastest():
    # task 0 is slow and invalid; the valid tasks 1 and 2 finish early, but the step must wait for 0
    assert fifo_early_termination([10.0, 1.0, 2.0], [False, True, True], 2) == ([1, 2], 10.0)
    # an unfinished task launched before the batch fills blocks it
    assert fifo_early_termination([None, 1.0, 2.0], [False, True, True], 2) == ([], None)
    assert fifo_early_termination([float("inf"), 1.0, 2.0], [False, True, True], 2) == ([], None)
    # an unfinished task launched after the batch filled does not
    assert fifo_early_termination([1.0, 2.0, None], [True, True, True], 2) == ([0, 1], 2.0)
    with pytest.raises(ValueError, match="batch_size"):
        fifo_early_termination([1.0], [True], 0)
    with pytest.raises(ValueError, match="length"):
        fifo_early_termination([1.0], [True, False], 1)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 100), st.booleans()), min_size=1, max_size=30), st.integers(1, 10))
def test_fifo_matches_the_rule_checked_at_every_time(tasks, batch_size):
    """Brute force: the earliest time t at which some launch prefix is all finished by t and
    holds batch_size valid tasks; the selection is that prefix's first batch_size valid tasks."""
    finish = [t for t, _ in tasks]
    valid = [v for _, v in tasks]
    best = None
    for j in range(len(tasks)):
        if sum(valid[: j + 1]) >= batch_size:
            t = max(finish[: j + 1])
            if best is None or t < best[1]:
                best = ([i for i in range(j + 1) if valid[i]][:batch_size], t)
    assert fifo_early_termination(finish, valid, batch_size) == (best if best else ([], None))


def test_demand_driven_launching():
    # 8 valid samples still needed, 10 tasks in flight at a live valid rate of 0.5: 5 expected,
    # launch ceil((8 - 5) / 0.5) = 6
    assert tasks_to_launch(8, 10, 0.5) == 6
    assert tasks_to_launch(8, 16, 0.5) == 0  # in-flight tasks are expected to cover the demand
    assert tasks_to_launch(8, 0, 0.5, free_slots=4) == 4  # never more than the engine's free slots
    assert tasks_to_launch(0, 0, 0.5) == 0
    assert tasks_to_launch(3, 0, 1.0) == 3
    # live statistics: Laplace-smoothed valid share
    assert valid_rate_estimate(0, 0) == 0.5
    assert valid_rate_estimate(3, 8) == pytest.approx(0.4)
    assert valid_rate_estimate(0, 1000) > 0
    with pytest.raises(ValueError):
        tasks_to_launch(1, 0, 0.0)


def test_mimo_ratios():
    assert sample_waste(1000, 871) == pytest.approx(0.129)
    assert sample_waste(0, 0) == 0.0
    assert idle_ratio(busy_time=3.0, wall_time=4.0) == pytest.approx(0.25)


# --- repeat detection --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "tokens, expected",
    [
        ([5, 7] * 8, 2),  # a 2-token pattern, 8 times
        ([1, 2, 3] + [9] * 8, 1),
        ([4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4], 1),  # 1 is the smallest period
        ([1, 2, 3, 4] * 8, 4),
        ([5, 7] * 7, None),  # one repetition short
        ([5, 7] * 7 + [5], None),  # the tail must be whole repetitions ending at the last token
        ([1, 2, 3, 1, 2, 4] * 8, None),  # period 6 > max_pattern 4
        (list(range(40)), None),  # no repetition
        ([1, 2] * 8 + [3], None),  # a repetition that already ended (the model moved on)
    ],
)
def test_repeated_tail_on_crafted_sequences(tokens, expected):
    assert repeated_tail(tokens, 1, 4, 8) == expected


def test_repeated_tail_agrees_with_vllms_own_check():
    """The same rule as vLLM's stop condition (vllm.v1.core.sched.utils), on random sequences
    over a small alphabet (many repeats) and with min_pattern above 1."""
    from vllm.sampling_params import RepetitionDetectionParams
    from vllm.v1.core.sched.utils import check_sequence_repetition

    rng = random.Random(0)
    hits = 0
    for _ in range(3000):
        pattern = [rng.randrange(3) for _ in range(rng.randint(1, 5))]
        tokens = [rng.randrange(3) for _ in range(rng.randint(0, 10))] + pattern * rng.randint(1, 5)
        low, high, count = rng.randint(1, 3), rng.randint(3, 6), rng.randint(2, 4)
        ours = repeated_tail(tokens, low, high, count) is not None
        theirs = check_sequence_repetition(tokens, RepetitionDetectionParams(high, low, count))
        assert ours == theirs, (tokens, low, high, count)
        hits += ours
    assert 300 < hits < 2700  # both outcomes exercised


def test_where_a_looping_generation_stops_and_the_penalty():
    looping = [3, 1, 4] + [8, 9] * 20
    stop = first_repetition_stop(looping, 1, 4, 8)
    assert stop == 3 + 16  # the 8th repetition's last token
    assert first_repetition_stop(list(range(50)), 1, 4, 8) is None
    assert penalised([1.0, 0.0, 1.0], [False, True, True], 0.5) == [1.0, -0.5, 0.5]
    with pytest.raises(ValueError):
        penalised([1.0], [True], -1.0)


# --- partial rollout ---------------------------------------------------------------------------


def test_continuation_request_and_segment_records():
    trajectory = PartialTrajectory("uid-1/0", row=7, prompt_ids=[101, 102])
    trajectory.extend(version=3, token_ids=[1, 2, 3, 4])
    prompt, max_tokens = trajectory.continuation_request(token_budget=4, max_response_length=10)
    assert prompt == [101, 102, 1, 2, 3, 4] and max_tokens == 4
    trajectory.extend(version=4, token_ids=[5, 6, 7, 8])
    prompt, max_tokens = trajectory.continuation_request(token_budget=4, max_response_length=10)
    assert max_tokens == 2  # the response length caps the last segment
    assert [s.version for s in trajectory.segments] == [3, 4]
    assert trajectory.response_ids == [1, 2, 3, 4, 5, 6, 7, 8]
    trajectory.extend(version=6, token_ids=[9, 10])
    with pytest.raises(ValueError, match="already holds"):
        trajectory.continuation_request(4, 10)
    assert is_unfinished(4, 4, finished_by_engine=False)
    assert not is_unfinished(4, 4, finished_by_engine=True)  # EOS exactly at the budget
    assert not is_unfinished(3, 4, finished_by_engine=False)


def test_segment_loss_mask_excludes_earlier_segments():
    assert segment_loss_mask([3, 2, 4], earlier_segments_in_loss=False) == [0, 0, 0, 0, 0, 1, 1, 1, 1]
    assert segment_loss_mask([3, 2, 4], earlier_segments_in_loss=True) == [1] * 9
    assert segment_loss_mask([5], earlier_segments_in_loss=False) == [1] * 5  # one segment: all on-policy


def test_partial_store_is_fifo_and_survives_a_state_round_trip():
    store = PartialRolloutStore()
    for i in range(4):
        responses = []
        for session in range(2):
            t = PartialTrajectory(f"g{i}/{session}", i, [100 + i], unfinished=session == 0)
            t.extend(i, [i, i + 1])
            t.logprobs = None if i % 2 else [-0.5, -1.0]
            responses.append(t)
        store.put(HeldGroup(f"g{i}", i, responses))
    assert store.unfinished_responses() == 4
    state = store.state_dict()
    restored = PartialRolloutStore()
    restored.load_state_dict(state)
    assert digest(restored.state_dict()) == digest(state)
    first = restored.take(2)
    assert [g.key for g in first] == ["g0", "g1"]
    assert [r.to_record() for r in first[0].responses] == [r.to_record() for r in store.take(1)[0].responses]
    assert first[0].responses[0].unfinished and not first[0].responses[1].unfinished
    assert len(restored) == 2 and len(store) == 3
    assert [g.row for g in store.take(10)] == [1, 2, 3]


# --- staleness ---------------------------------------------------------------------------------


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 3), st.floats(0, 1), st.integers(1, 8), st.integers(0, 2**16))
def test_staleness_bound_is_never_exceeded(staleness, reuse_ratio, size, seed):
    rng = random.Random(seed)
    buffer = StalenessBuffer(staleness, reuse_ratio, seed=seed)
    count = 0
    for trainer_version in range(12):
        fresh = []
        for _ in range(rng.randint(0, 2 * size)):  # finished this step, generated by some recent version
            fresh.append(TaggedSample(f"s{count}", trainer_version - rng.randint(0, staleness + 2)))
            count += 1
        chosen, discarded = buffer.batch(fresh, trainer_version, size)
        assert len(chosen) <= size
        assert all(within_bound(s.version, trainer_version, staleness) for s in chosen)
        assert not any(within_bound(s.version, trainer_version, staleness) for s in discarded)
        reused = [s for s in chosen if s not in fresh]
        assert len(reused) <= int(reuse_ratio * size)


def test_split_kept_drops_past_the_bound_and_reuses_the_oldest_first():
    # (version, launch index): kept in no particular order; the trainer is at version 5, bound 2
    kept = [(4, 9), (2, 1), (3, 5), (5, 12), (3, 4), (4, 8)]
    reused, waiting, stale = split_kept(kept, 5, 2, 3, lambda g: g[0], lambda g: g[1])
    assert stale == [(2, 1)]  # 3 versions behind
    assert reused == [(3, 4), (3, 5), (4, 8)]  # oldest version first, then launch order
    assert waiting == [(4, 9), (5, 12)]
    assert split_kept(kept, 5, 2, 0, lambda g: g[0], lambda g: g[1])[0] == []


def test_staleness_buffer_keeps_surplus_and_restores_it():
    buffer = StalenessBuffer(staleness=1, reuse_ratio=0.5, seed=1)
    fresh = [TaggedSample(f"a{i}", 0) for i in range(6)]
    chosen, discarded = buffer.batch(fresh, trainer_version=0, size=4)
    assert len(chosen) == 4 and not discarded and len(buffer) == 2
    state = buffer.state_dict()
    chosen, _ = buffer.batch([TaggedSample(f"b{i}", 1) for i in range(4)], trainer_version=1, size=4)
    assert sum(s.key.startswith("a") for s in chosen) == 2  # reuse_ratio·size kept samples reused
    _, discarded = buffer.batch([], trainer_version=3, size=4)
    assert {s.key for s in discarded} == {"b2", "b3"}  # version 1 is 2 behind version 3: past the bound
    again = StalenessBuffer(staleness=1, reuse_ratio=0.5, seed=1)
    again.load_state_dict(state)
    assert digest(again.state_dict()) == digest(state)
    with pytest.raises(ValueError):
        StalenessBuffer(-1)


# ---------------------------------------------------------------------------------------------- DORA
from reasonrl.plugins.rollout.dora import replicas_to_update, too_stale, versions_generating  # noqa: E402


def test_dora_updates_the_oldest_replicas_and_keeps_staleness_versions_generating():
    assert replicas_to_update([None, None], 0, group_size=1, staleness=2) == [0, 1]  # first weights: all
    versions = [0, 0]
    seen = []
    for version in range(1, 9):  # bound 2, one replica a step: they alternate, two versions generate
        chosen = replicas_to_update(versions, version, group_size=1, staleness=2)
        assert len(chosen) == 1 and versions[chosen[0]] == min(versions)
        versions[chosen[0]] = version
        seen.append(versions_generating(versions))
        assert version - min(versions) <= 1  # what the older one writes now trains one version later: lag 2
    assert seen == [2] * 8
    # staleness 1: a replica's samples train a version after it generated them, so every replica
    # takes each version (verl's own all-at-once update)
    assert replicas_to_update([3, 3, 3], 4, group_size=1, staleness=1) == [0, 1, 2]
    assert replicas_to_update([5, 4, 3, 4], 6, group_size=2, staleness=4) == [1, 2]  # oldest two, ties by index
    assert replicas_to_update([5, 4, 3, 4], 6, group_size=1, staleness=3) == [2]
    assert replicas_to_update([5, 4, 3, 4], 7, group_size=1, staleness=3) == [1, 2, 3]  # the bound forces two more
    with pytest.raises(ValueError):
        replicas_to_update([1], 2, group_size=0, staleness=1)
    with pytest.raises(ValueError):
        replicas_to_update([1], 2, group_size=1, staleness=0)


@settings(max_examples=200)
@given(
    replicas=st.integers(1, 6),
    group_size=st.integers(1, 6),
    staleness=st.integers(1, 4),
    steps=st.integers(1, 12),
)
def test_dora_never_lets_a_replica_fall_beyond_the_bound(replicas, group_size, staleness, steps):
    versions: list = [None] * replicas
    for version in range(steps):
        for i in replicas_to_update(versions, version, group_size, staleness):
            versions[i] = version
        # what any replica writes before the next update trains at version + 1 or later: within the bound
        assert (version + 1) - min(versions) <= staleness
        assert versions_generating(versions) <= staleness
        assert max(versions) == version


def test_dora_drops_a_group_by_its_oldest_generating_version():
    # step 5 trains with policy version 4: a response begun on version 3 is one version behind
    assert not too_stale(5, [4, 3], staleness=1)
    assert too_stale(5, [4, 2], staleness=1)  # one response begun two versions back: the group goes
    assert too_stale(5, [3], staleness=0) and not too_stale(5, [4], staleness=0)
    assert not too_stale(5, [None, None], staleness=0)  # untagged: as current


def test_the_timeline_gives_each_replica_its_versions_and_stops_them_at_a_restart(tmp_path):
    import json

    from reasonrl.plugins.rollout.dora import TIMELINE
    from reasonrl.plugins.rollout.dora_timeline import read_timeline, version_intervals

    records = [
        {"t": 0.0, "replica": 0, "version": 0, "launch": True},
        {"t": 0.0, "replica": 1, "version": 0, "launch": True},
        {"t": 5.0, "step": 1, "trained_versions": {"0": 8}},
        {"t": 6.0, "replica": 0, "version": 1},
        {"t": 9.0, "step": 2, "trained_versions": {"0": 3, "1": 5}},
        {"t": 50.0, "replica": 0, "version": 2, "launch": True},  # resumed from step 2's checkpoint
        {"t": 50.0, "replica": 1, "version": 2, "launch": True},
        {"t": 55.0, "step": 3, "trained_versions": {"1": 4, "2": 4}},
    ]
    (tmp_path / TIMELINE).parent.mkdir()
    (tmp_path / TIMELINE).write_text("".join(json.dumps(r) + "\n" for r in records))
    updates, batches = read_timeline(tmp_path)
    assert len(updates) == 5 and [b["step"] for b in batches] == [1, 2, 3]
    assert version_intervals(updates, batches, end=55.0) == [
        (0, 0.0, 6.0, 0),
        (0, 6.0, 9.0, 1),  # the first launch ended at its last batch, not at the resume
        (0, 50.0, 55.0, 2),
        (1, 0.0, 9.0, 0),
        (1, 50.0, 55.0, 2),
    ]
