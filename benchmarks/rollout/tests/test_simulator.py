"""The rollout simulator and its trace: trace statistics, a hand-computed naive step, seamless
selecting through ``fifo_early_termination``, seamless vs naive, partial rollout's bounded
iterations, the staleness bound, token accounting and slot capacity."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

import benchmarks.rollout.simulator as simulator
from benchmarks.rollout.simulator import POLICIES, EngineModel, simulate, validation_time
from benchmarks.rollout.trace import Trace, long_tail_trace
from reasonrl.plugins.rollout.seamless import fifo_early_termination

MODEL = EngineModel(slots=256, step_a=0.02, step_b=6e-5, reward_latency=2.0, train_c=20.0, train_d=2e-5, sync_time=5.0)
MULTI = replace(MODEL, engines=16, step_a=0.04, reward_workers=64)  # 16 data-parallel engines of 16 slots
ADMIT = replace(MULTI, admit_a=0.5, admit_b=0.01)  # ... each held while it admits requests
KNOBS = {
    "partial": {"token_budget": 4096},
    "staleness": {"staleness": 1},
    "staleness_colocated": {"staleness": 1, "reuse_ratio": 0.5},
    "dora": {"staleness": 2},
}


MODEL_GROUP_SIZE = 16


@pytest.fixture(scope="module")
def trace() -> Trace:
    return long_tail_trace(3000, group_size=16, seed=0, median_tokens=2000, max_tokens=16384)


@pytest.fixture(scope="module")
def runs(trace) -> dict:
    return {p: simulate(p, trace, MODEL, steps=10, batch_groups=32, **KNOBS.get(p, {})) for p in POLICIES}


@pytest.fixture(scope="module")
def multi_runs(trace) -> dict:
    return {p: simulate(p, trace, MULTI, steps=6, batch_groups=32, **KNOBS.get(p, {})) for p in POLICIES}


@pytest.fixture(scope="module")
def admit_runs(trace) -> dict:
    return {p: simulate(p, trace, ADMIT, steps=6, batch_groups=32, **KNOBS.get(p, {})) for p in POLICIES}


# ----------------------------------------------------------------------------------------- trace


def test_trace_statistics():
    t = long_tail_trace(4000, group_size=16, seed=3, median_tokens=3000, p99_ratio=9.0, max_tokens=10**7)
    plain = t.lengths[~t.looping]
    assert np.percentile(plain, 99) / np.median(plain) == pytest.approx(9.0, rel=0.08)
    assert np.median(plain) == pytest.approx(3000, rel=0.05)
    assert t.correct.mean() == pytest.approx(0.41, abs=0.02)
    assert t.looping.mean() == pytest.approx(0.03, abs=0.006)
    assert (t.lengths[t.looping] == t.max_tokens).all() and not t.correct[t.looping].any()
    passes = t.correct.sum(axis=1)
    # Beta(0.41, 0.59), G = 16: 8.9 % all-correct, 21.1 % all-wrong in expectation
    assert (t.params["beta_a"], t.params["beta_b"]) == pytest.approx((0.41, 0.59))
    assert (passes == 16).mean() == pytest.approx(0.089, abs=0.025)
    assert (passes == 0).mean() == pytest.approx(0.211, abs=0.04)
    right, wrong = np.median(t.lengths[t.correct]), np.median(t.lengths[~t.correct & ~t.looping])
    assert wrong / right == pytest.approx(1.3, rel=0.06)


def test_trace_is_reproducible_and_capped():
    a, b = long_tail_trace(200, seed=7), long_tail_trace(200, seed=7)
    assert (a.lengths == b.lengths).all() and (a.correct == b.correct).all()
    assert not (long_tail_trace(200, seed=8).lengths == a.lengths).all()
    assert a.lengths.max() <= 32768 and not a.correct[a.lengths >= 32768].any()


# ----------------------------------------------------------------------------------------- naive


def test_naive_one_round_by_hand():
    t = Trace(np.array([[10, 20], [30, 40]]), np.array([[1, 0], [1, 0]]))
    m = EngineModel(slots=8, step_a=1.0, step_b=0.1, reward_latency=5.0, train_c=2.0, train_d=0.1, sync_time=3.0)
    step = simulate("naive", t, m, steps=1, batch_groups=2).steps[0]
    # 4 active for 10 tokens, then 3, 2, 1: 10·(1.4 + 1.3 + 1.2 + 1.1) = 50; rewards 5;
    # train 2 + 0.1·100 = 12; sync 3
    assert step.wall_s == pytest.approx(50 + 5 + 12 + 3)
    assert step.gen_busy_s == pytest.approx(50) and step.trained_tokens == 100
    assert step.idle_s == pytest.approx(5 + 50 - (10 * 1.4 * 4 + 10 * 1.3 * 3 + 10 * 1.2 * 2 + 10 * 1.1) / 8)


def test_naive_refill_round_by_hand():
    # p0 valid, p1 all-correct (invalid), p2 valid; rounds of 2 groups; 1 s per decode step
    t = Trace(np.array([[10, 30], [20, 20], [5, 40]]), np.array([[1, 0], [1, 1], [0, 1]]))
    m = EngineModel(slots=4, step_a=1.0, step_b=0.0, reward_latency=5.0, train_c=2.0, train_d=0.1, sync_time=3.0)
    step = simulate("naive", t, m, steps=1, batch_groups=2).steps[0]
    # round 1 (p0, p1): 30 + 5; round 2 (p2, p0 again): 40 + 5; train p0 + p2 (85 tokens): 10.5; sync 3
    assert step.wall_s == pytest.approx(35 + 45 + 10.5 + 3)
    assert step.trained_groups == [0, 2] and step.launched_groups == [0, 1, 2, 3]
    assert (step.invalid_tokens, step.discarded_tokens, step.aborted_tokens) == (40, 40, 0)
    assert step.generated_tokens == pytest.approx(165)


# ------------------------------------------------------------------------------ several engines


def test_naive_splits_each_round_statically_by_hand():
    t = Trace(np.array([[10, 20], [30, 40]]), np.array([[1, 0], [1, 0]]))
    m = EngineModel(
        slots=4, engines=2, step_a=1.0, step_b=0.1, reward_latency=5.0, train_c=2.0, train_d=0.1, sync_time=3.0
    )
    result = simulate("naive", t, m, steps=1, batch_groups=2)
    step = result.steps[0]
    # engine 0 holds group 0: 2 active for 10 steps (1.2 s each), then 1 for 10 (1.1 s): done at 23 s;
    # engine 1 holds group 1: 30 · 1.2 + 10 · 1.1 = 47 s; then rewards 5, train 2 + 0.1·100, sync 3
    assert step.wall_s == pytest.approx(47 + 5 + 12 + 3)
    assert step.gen_busy_s == pytest.approx((23 + 47) / 2)  # engine-weighted: MiMo's GPU idle
    assert step.slot_busy_s == pytest.approx((12 * 2 + 11 + 36 * 2 + 11) / 4)
    assert {(e.group, e.engine) for e in result.timeline} == {(0, 0), (1, 1)}
    assert result.summary()["idle_ratio"] == pytest.approx(1 - 35 / 52)


def test_requests_go_to_the_engine_with_most_free_slots():
    t = Trace(np.array([[10, 20]]), np.array([[1, 0]]))
    m = EngineModel(slots=4, engines=2, step_a=1.0, step_b=0.1, reward_latency=5.0)
    # seamless: one request per engine, each decoding alone (1.1 s a step): 20 · 1.1, then its reward
    assert validation_time("seamless", t, m, 1) == pytest.approx(22 + 5)
    # naive: the group on engine 0 (10 · 1.2 + 10 · 1.1), then the round's rewards at once ...
    assert validation_time("naive", t, m, 1) == pytest.approx(23 + 5)
    # ... or one sample at a time
    assert validation_time("naive", t, replace(m, reward_workers=1), 1) == pytest.approx(23 + 2 * 5)
    with pytest.raises(ValueError, match="split evenly"):
        EngineModel(slots=5, engines=2)
    with pytest.raises(ValueError, match="admit_a"):
        EngineModel(admit_b=-1.0)
    with pytest.raises(ValueError, match="reward_workers"):
        EngineModel(reward_workers=0)


def test_admitting_requests_holds_their_engine_by_hand():
    t = Trace(np.array([[10, 20]]), np.array([[1, 0]]))
    m = EngineModel(slots=4, engines=2, step_a=1.0, step_b=0.0, reward_latency=5.0, admit_a=2.0, admit_b=0.5)
    # naive: both requests join engine 0 at once (held 2 + 0.5·2 s), then 20 decode steps, rewards
    assert validation_time("naive", t, m, 1) == pytest.approx(3 + 20 + 5)
    # seamless: one request per engine (each held 2.5 s), the longer one 20 steps, its reward
    assert validation_time("seamless", t, m, 1) == pytest.approx(2.5 + 20 + 5)
    # a held engine is busy (MiMo's idle ratio counts it as working)
    step = simulate("naive", t, replace(m, engines=1, slots=2), steps=1, batch_groups=1).steps[0]
    assert step.gen_busy_s == pytest.approx(3 + 20)
    # joining an engine that is decoding costs only the per-request part: on 2 slots, requests
    # 10 and 20 start together (3 s); at 13 s a 5 joins (0.5 s), ends at 18.5 s; the last 5 joins
    # (0.5 s) beside the 20's last 5 steps: both end at 24 s; then the rewards
    two = Trace(np.array([[10, 20], [5, 5]]), np.array([[1, 0], [1, 0]]))
    assert validation_time("naive", two, replace(m, engines=1, slots=2), 2) == pytest.approx(24 + 5)


def test_partial_budget_holds_on_every_engine(multi_runs):
    result = multi_runs["partial"]
    assert all(e.end - e.start <= 4096 * MULTI.step_time(MULTI.slots // MULTI.engines) + 1e-6 for e in result.timeline)
    assert max(result.summary()["segments_hist"]) >= 2


# -------------------------------------------------------------------------------------- seamless


def _group_ready_times(result, latency: float, group_size: int) -> dict[int, float]:
    ends: dict[int, list[float]] = {}
    for e in result.timeline:
        if e.outcome == "finished":
            ends.setdefault(e.group, []).append(e.end)
    return {g: max(v) + latency for g, v in ends.items() if len(v) == group_size}


def test_seamless_selects_through_fifo_early_termination(trace, monkeypatch):
    calls = []

    def spy(finish, valid, batch):
        calls.append(len(finish))
        return fifo_early_termination(finish, valid, batch)

    monkeypatch.setattr(simulator, "fifo_early_termination", spy)
    result = simulate("seamless", trace, MODEL, steps=4, batch_groups=32)
    assert len(calls) >= 4
    ready = _group_ready_times(result, MODEL.reward_latency, trace.group_size)
    valid = trace.group_valid()
    for step in result.steps:
        gids = step.launched_groups
        finish = [ready.get(g) for g in gids]
        selected, stop = fifo_early_termination(finish, [bool(valid[g % trace.n_prompts]) for g in gids], 32)
        assert [gids[i] for i in selected] == step.trained_groups
        assert stop == pytest.approx(step.stop_time)


def test_seamless_faster_and_less_wasteful_than_naive(runs):
    naive, seamless = runs["naive"].summary(skip=1), runs["seamless"].summary(skip=1)
    print(
        f"\nseamless/naive: time per trained token {seamless['time_per_trained_token_s'] / naive['time_per_trained_token_s']:.2f}, "
        f"waste {naive['sample_waste']:.3f} -> {seamless['sample_waste']:.3f}"
    )
    assert seamless["time_per_trained_token_s"] < 0.85 * naive["time_per_trained_token_s"]
    assert seamless["step_wall_median_s"] < naive["step_wall_median_s"]
    assert seamless["sample_waste"] < naive["sample_waste"]


def test_seamless_fifo_has_no_length_bias(runs):
    s = runs["seamless"].summary(skip=1)
    print(f"\nseamless length bias {s['length_bias']:.3f} (vs valid launched {s['length_bias_vs_launched_valid']:.3f})")
    # FIFO trains the first valid groups in launch order: an unbiased draw of the valid groups
    assert s["length_bias_vs_launched_valid"] == pytest.approx(1.0, abs=0.05)
    assert s["length_bias"] == pytest.approx(1.0, abs=0.1)


# ---------------------------------------------------------------------------- partial, staleness


def test_partial_iterations_are_bounded_by_the_budget(runs):
    result = runs["partial"]
    walls = np.array([s.wall_s for s in result.steps[2:]])
    assert np.percentile(walls, 99) <= 2 * np.median(walls)
    bound = 4096 * MODEL.step_time(MODEL.slots) + MODEL.reward_latency
    assert all(s.gen_window_s <= bound for s in result.steps[2:])
    segments = result.summary()["segments_hist"]
    assert max(segments) >= 2  # long tails carried over into later iterations
    assert any(e.outcome == "budget" for e in result.timeline)


@pytest.mark.parametrize("bound", [0, 1, 2])
def test_staleness_bound_holds(trace, bound):
    result = simulate("staleness", trace, MODEL, steps=8, batch_groups=32, staleness=bound, reuse_ratio=0.25)
    oldest: dict[int, int] = {}
    for e in result.timeline:
        oldest[e.group] = min(oldest.get(e.group, e.version), e.version)
    for step in result.steps:
        assert (step.staleness <= bound).all()
        assert all(step.step - oldest[g] <= bound for g in step.trained_groups)
    hist = result.summary()["staleness_hist"]
    assert (max(hist) >= 1) == (bound >= 1)  # overlap trains samples of the previous version


@pytest.mark.parametrize("bound", [0, 1])
def test_colocated_staleness_reuses_the_surplus_within_the_bound(trace, runs, bound):
    """+reasonrl/rollout=staleness on one engine: the seamless schedule, its finished valid surplus
    kept and reused (at most reuse_ratio of a batch, at most `bound` versions old), so less waste."""
    result = simulate("staleness_colocated", trace, MODEL, steps=10, batch_groups=32, staleness=bound, reuse_ratio=0.5)
    lags = np.concatenate([step.staleness for step in result.steps])
    assert lags.max() == bound  # bound 0: nothing survives its step; bound 1: the surplus is trained next step
    for step in result.steps:  # a batch holds at most reuse_ratio·32 groups from earlier steps
        assert (step.staleness > 0).sum() <= 16 * MODEL_GROUP_SIZE
    seamless = runs["seamless"].summary()["sample_waste_valid"]
    waste = result.summary()["sample_waste_valid"]
    print(f"\nvalid-groups waste: seamless {seamless:.3f}, colocated staleness (bound {bound}) {waste:.3f}")
    if bound == 0:  # every kept group is dropped at the next step: seamless's schedule exactly
        assert [s.trained_groups for s in result.steps] == [s.trained_groups for s in runs["seamless"].steps]
    else:
        assert waste < seamless


@pytest.mark.parametrize("bound", [1, 2, 3])
def test_dora_updates_the_oldest_engine_and_trains_within_the_bound(trace, bound):
    """DORA on two engines: after each step the oldest engine takes the new version while the other
    generates on (bound 2: two versions at once; bound 1: both take every version); a request on an
    updated engine continues with its tokens on the other one; nothing trains beyond the bound."""
    two = replace(MULTI, slots=32, engines=2)
    result = simulate("dora", trace, two, steps=8, batch_groups=4, staleness=bound)
    versions = [{e.version for e in result.timeline if e.engine == engine} for engine in (0, 1)]
    if bound == 1:
        assert versions[0] == versions[1]  # every version on both engines
    else:
        assert versions[0] & versions[1] == {0}  # they alternate: each version on one engine only
        assert max(versions[0] | versions[1]) >= 6
    lags = np.concatenate([step.staleness for step in result.steps])
    assert lags.max() <= bound and (lags.max() == bound or bound == 3)
    last_update = sum(step.wall_s for step in result.steps)  # its paused requests are still queued
    paused = [e for e in result.timeline if e.outcome == "paused" and e.end < last_update]
    assert paused
    moved = 0
    for event in paused:  # continued with its tokens, on the first free slot (the other engine's, if it has one)
        later = [e for e in result.timeline if e.request == event.request and e.start >= event.end]
        assert later and later[0].version >= event.version
        moved += later[0].engine != event.engine
    assert moved > 0 or bound == 1  # bound 1: both engines take every version at once


# ---------------------------------------------------------------------------------- invariants


OUTCOMES = {  # how each policy's requests may leave the engine
    "naive": {"finished"},
    "verl_sync": {"finished"},  # drained, never aborted
    "seamless": {"finished", "aborted"},
    "partial": {"finished", "budget", "paused"},
    "colocate_async": {"finished", "paused"},
    "staleness": {"finished", "aborted"},
    "staleness_colocated": {"finished", "aborted"},
    "dora": {"finished", "paused"},  # an engine taking weights: its requests continue elsewhere
}


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("model", ["one engine", "16 engines", "16 engines, admission held"])
def test_tokens_add_up_and_slots_are_respected(runs, multi_runs, admit_runs, policy, model):
    result, m = {
        "one engine": (runs[policy], MODEL),
        "16 engines": (multi_runs[policy], MULTI),
        "16 engines, admission held": (admit_runs[policy], ADMIT),
    }[model]
    spent = sum(s.trained_tokens + s.aborted_tokens + s.discarded_tokens + s.invalid_tokens for s in result.steps)
    assert spent + result.pending_tokens == pytest.approx(result.generated_tokens, rel=1e-9)
    assert sum(s.generated_tokens for s in result.steps) <= result.generated_tokens * (1 + 1e-12)
    assert all(len(s.trained_groups) == 32 for s in result.steps) or policy == "partial"
    slots = m.slots * (m.gen_share if policy == "staleness" else 1)
    events = sorted([(e.start, 1) for e in result.timeline] + [(e.end, -1) for e in result.timeline])
    assert max(np.cumsum([d for _, d in events])) <= slots
    engines = {e.engine for e in result.timeline}
    assert engines == set(range(max(1, round(m.engines * (m.gen_share if policy == "staleness" else 1)))))
    for engine in engines:  # each engine holds at most its own slots
        mine = [e for e in result.timeline if e.engine == engine]
        events = sorted([(e.start, 1) for e in mine] + [(e.end, -1) for e in mine])
        assert max(np.cumsum([d for _, d in events])) <= m.slots // m.engines
    if policy == "naive":  # a static split: every request of a group on its chunk's engine
        assert all(
            len({e.engine for e in result.timeline if e.group == g}) == 1 for g in {e.group for e in result.timeline}
        )
    outcomes = {e.outcome for e in result.timeline}
    assert outcomes <= OUTCOMES[policy] and "finished" in outcomes
    s = result.summary()
    assert 0.0 <= s["idle_ratio"] <= 1.0 and 0.0 <= s["sample_waste"] < 1.0 and not math.isnan(s["length_bias"])
