"""Discrete-event simulator of rollout schedulers for RL training steps (``reasonrl bench rollout``).

Framework-free (numpy + stdlib). It replays a trace (``trace.py``: per prompt, the length and the
reward of each of its ``G`` responses) through a model of one generation engine and a trainer,
under one of six policies, and records per step the wall time, the engine's busy and idle time,
the tokens generated / trained / thrown away and who got trained.

Model (assumptions):

- ``engines`` data-parallel engines (one per GPU at MiMo's scale) serve ``slots // engines``
  requests each (continuous batching: a freed slot takes the next queued request at once, FIFO).
  Every active request gains one token per decode step; a decode step of an engine with ``n`` of
  its requests active takes ``step_a + step_b·n`` s (prefill folded into ``step_a``), so each
  engine runs at its own pace. The active sets only change at events, so the engines jump from
  event to event; an event that falls inside a decode step sees fractional progress (fluid model).
- Dispatch: ``naive`` splits each round statically, its groups in equal contiguous chunks, one per
  engine (verl's SPMD rollout, MiMo's baseline: each data-parallel rank generates its share of the
  batch); every other policy sends each request to the engine with the most free slots (verl's
  server manager balances the load).
- A group is the ``G`` requests of one prompt, launched together; it is valid (kept by dynamic
  sampling) iff it holds a pass and a fail; a batch is ``batch_groups`` valid groups. A sample's
  reward takes ``reward_latency`` s: the group's reward is known that long after its last sample
  finishes, off the engine (every policy but naive overlaps it with generation). Naive scores a
  round after its last token, ``reward_workers`` samples at a time (``serial_reward_time``).
- Training takes ``train_c + train_d·(trained tokens)`` s, then ``sync_time`` s of weight sync;
  colocated policies (all but staleness) generate nothing meanwhile. In staleness mode a share
  ``gen_share`` of the devices generates and the rest trains (train time ÷ (1 − gen_share)), so
  the two overlap: with several engines, ``gen_share`` of the engines; with one, one engine of
  ``slots·gen_share`` slots whose decode step with ``n`` active takes ``step_a + step_b·n/gen_share``
  (the same load per device).
- A request's policy version is the trainer version when it took a slot; a trained sample's
  staleness is the trainer version minus the oldest version that wrote any of its group.
- Idle, over the generation window (a colocated step's wall time minus training and sync; the
  whole step for the generation devices in staleness mode): ``idle_ratio`` is the engine-weighted
  time an engine has no request in flight (MiMo's idle GPU); ``slot_idle_ratio`` the slot-weighted
  time (``Σ dt·active/slots``: an empty slot in a long tail is idle capacity too).
- Waste (``sample_waste``): tokens thrown away (invalid groups, surplus, stale samples, requests
  aborted unfinished) over those plus the trained tokens; tokens still in flight or saved at the
  end count in neither. ``sample_waste_valid`` leaves out the invalid groups (dynamic sampling's
  own filtering, the same for every policy).

Policies (our readings):

- ``naive`` (MiMo-7B §3.4.1's baseline): generate a round of ``gen_groups`` groups (split
  statically over the engines) to the last token, then reward the round in series, keep the valid groups, repeat until
  ``batch_groups`` are kept; train on the first ``batch_groups`` in launch order, drop the surplus.
- ``verl_sync`` (verl 0.9.1 synchronous DAPO, ``trainer/ppo/v1/replay_buffer.py``): launch
  ``batch_groups`` groups; score each group when it finishes; each filtered (invalid) group adds 2
  refill credits, dispatched while fewer than ``gen_groups`` groups (``max_inflight_gen_batches ×
  batch_groups``) are in flight; once ``batch_groups`` valid groups are in, stop dispatching but
  drain every in-flight request; train on ``batch_groups`` of them (verl orders by submission step,
  ties in set order: we take launch order), drop the surplus. verl's 2 s polling is left out.
- ``seamless`` (MiMo-7B §3.4.1): continuous rollout: at every event launch
  ``tasks_to_launch(missing valid groups, active groups, valid_rate_estimate, free slots // G)``
  groups (pass-rate statistics carried across steps); the step ends by FIFO early termination:
  ``fifo_early_termination`` over the step's groups in launch order picks the batch; every
  request still in flight is aborted and every other group dropped.
- ``partial`` (Kimi k1.5 §2.6.2): an iteration lasts at most ``token_budget`` decode steps (of
  each engine), so a
  request writes at most ``token_budget`` tokens in it; one that reaches it unfinished frees its
  slot and is saved; at the iteration's end every request in flight is paused and saved too. Saved
  requests continue first next iteration, under the new policy (nothing aborted). Free slots take
  new prompts while the batch is short (``tasks_to_launch`` with no active credit: "when some are
  engaged with long trajectories, others can independently process new, shorter rollout tasks").
  The iteration ends early once ``batch_groups`` valid groups are complete; it trains on the
  complete valid groups it has (completion order, at most ``batch_groups``; an iteration with none
  goes on without an update); surplus complete groups carry over. Per-step batches vary: compare
  time per trained token.
- ``colocate_async`` (verl's colocated async mode, our reading): partial without a token budget:
  the step ends when ``batch_groups`` valid groups are complete; requests in flight are aborted and
  resumed with their tokens after the weight update.
- ``staleness_colocated`` (``+reasonrl/rollout=staleness`` as it runs on one colocated engine):
  seamless, but the finished valid groups a step does not train are kept, tagged with the version
  that generated them; a later step puts the oldest ``reuse_ratio·batch_groups`` of those at most
  ``staleness`` versions old first in its FIFO order (finished, valid) and drops older ones.
- ``staleness`` (LongCat-Flash-Thinking §3.1.1, DORA): separate generation and training devices;
  the engine streams across policy versions, each response written by one version; the trainer
  draws a batch through ``staleness.StalenessBuffer`` (samples at most ``staleness`` versions
  behind; surplus may fill ``reuse_ratio`` of a later batch) as soon as it is free and enough
  samples are usable; at each update, open groups that can no longer be trained are aborted (new
  prompts replace them). The engine streams: groups are launched with ``tasks_to_launch`` toward
  ``batch_groups·(1 + staleness) + reuse_ratio·batch_groups`` usable groups (the batches the bound
  lets it work ahead for), only while a version could still be trained at the next draw.
- ``dora`` (LongCat-Flash-Thinking §3.1.1, as ``+reasonrl/rollout=dora`` runs it): every engine
  generates and the trainer is a device of its own (``train_time`` as given, no ``gen_share``). Each
  engine holds its own weight version; after a training step the trainer sends the new version to
  the engines ``dora.replicas_to_update`` picks (the oldest ``update_group``, and any that would
  lag beyond the bound): such an engine's requests are paused and continued with their tokens on
  the others (front of the queue), it takes no requests for ``sync_time`` s, and the trainer waits
  as long. A group's version is the oldest that wrote any of its tokens. The trainer takes the
  ``batch_groups`` finished valid groups that became ready first, once that many are not
  ``dora.too_stale``; stale ones are dropped, the rest wait for later steps (kept and reused).
  Launching as ``staleness`` (toward ``batch_groups·(1 + staleness)`` usable groups).
"""

from __future__ import annotations

import math
from collections import deque

import numpy as np

from benchmarks.rollout.sim_model import EngineModel, SimResult, StepRecord, _Group, _Sim
from benchmarks.rollout.trace import Trace
from reasonrl.plugins.rollout.dora import replicas_to_update, too_stale
from reasonrl.plugins.rollout.seamless import fifo_early_termination, tasks_to_launch
from reasonrl.plugins.rollout.staleness import StalenessBuffer, TaggedSample, split_kept, within_bound

__all__ = ["POLICIES", "EngineModel", "SimResult", "StepRecord", "simulate", "validation_time"]

POLICIES = (
    "naive",
    "verl_sync",
    "seamless",
    "partial",
    "colocate_async",
    "staleness",
    "staleness_colocated",
    "dora",
)


# -------------------------------------------------------------------------------------- policies


def _naive_step(sim: _Sim, gen_groups: int) -> None:
    sim.async_rewards = False
    kept: list[_Group] = []
    while len(kept) < sim.batch:
        round_groups = sim.launch_many(gen_groups)
        sim.pin_in_chunks(round_groups)
        sim.drain()  # the whole round to its last token
        sim.engine.wait(sim.model.serial_reward_time(len(round_groups) * sim.G))  # then its rewards
        for g in round_groups:
            sim.mark_ready(g, sim.engine.time)
        kept += [g for g in round_groups if g.valid]
        for g in round_groups:
            if not g.valid:
                sim.drop(g)
    for g in kept[sim.batch :]:
        sim.drop(g)
    sim.train_colocated(kept[: sim.batch])


def _verl_sync_step(sim: _Sim, gen_groups: int) -> None:
    accepted: list[_Group] = []
    state = {"credit": 0}

    def tick() -> None:  # dispatch refill credit into the bounded in-flight window
        if len(accepted) < sim.batch and state["credit"] > 0:
            count = min(state["credit"], max(0, gen_groups - sim.open_groups))
            state["credit"] -= count
            sim.launch_many(count)

    def on_ready(g: _Group) -> None:
        if g.valid:
            accepted.append(g)
        else:
            sim.drop(g)
            state["credit"] += 2  # evict k, refill 2k

    sim.launch_many(sim.batch)
    drained = lambda: not (sim.engine.n_active or sim.engine.queue or sim.rewards)  # noqa: E731
    sim.run(on_ready, lambda: len(accepted) >= sim.batch and drained(), tick)
    accepted.sort(key=lambda g: g.gid)
    for g in accepted[sim.batch :]:
        sim.drop(g)
    sim.train_colocated(accepted[: sim.batch])


def _seamless_step(sim: _Sim, kept: list[_Group] | None = None, staleness: int = 0, reuse_ratio: float = 0.0) -> None:
    """``kept`` (``staleness_colocated``): the finished valid groups earlier steps left over. Those
    more than ``staleness`` versions old are dropped; the oldest ``reuse_ratio·batch`` lead this
    step's FIFO order as finished valid groups, the others wait; the step's finished valid surplus
    joins them (aborted groups never)."""
    reused: list[_Group] = []
    if kept is not None:
        quota = int(reuse_ratio * sim.batch)
        reused, kept[:], stale = split_kept(kept, sim.version, staleness, quota, lambda g: g.version, lambda g: g.gid)
        for g in stale:
            sim.drop(g)
    launched: list[_Group] = list(reused)
    state = {"valid": len(reused), "selected": None, "stop": None}

    def tick() -> None:
        demand = sim.batch - state["valid"]
        count = tasks_to_launch(max(0, demand), sim.open_groups, sim.valid_rate(), sim.free_groups())
        launched.extend(sim.launch_many(count))

    def check() -> None:
        if state["valid"] >= sim.batch:
            finish = [x.ready_time if x.ready else None for x in launched]
            selected, stop = fifo_early_termination(finish, [x.valid for x in launched], sim.batch)
            if selected:
                state["selected"], state["stop"] = selected, stop

    def on_ready(g: _Group) -> None:
        state["valid"] += g.valid
        check()

    check()  # the reused groups alone may fill the batch
    if state["selected"] is None:
        sim.run(on_ready, lambda: state["selected"] is not None, tick)
    sim.abort_in_flight()
    chosen = set(state["selected"])
    for i, g in enumerate(launched):
        if i in chosen:
            continue
        if kept is not None and g.ready and g.valid:
            kept.append(g)
        else:
            sim.drop(g)
    sim.train_colocated([launched[i] for i in state["selected"]], stop_time=state["stop"])


def _partial_step(sim: _Sim, ready: list[_Group], budget: int | None) -> None:
    """One training step; ``ready``: complete valid groups not trained yet (kept across steps)."""
    sim.engine.budget = budget

    def tick() -> None:  # fill the free slots while the batch is short
        sim.launch_many(tasks_to_launch(max(0, sim.batch - len(ready)), 0, sim.valid_rate(), sim.free_groups()))

    def on_ready(g: _Group) -> None:
        if g.valid:
            ready.append(g)
        else:
            sim.drop(g)

    e = sim.engine

    def iteration_over() -> bool:
        idle = not (e.n_active or e.queue or sim.rewards)
        return len(ready) >= sim.batch or e.limit_reached() or idle

    while True:  # iterations of at most `budget` decode steps; one with nothing complete goes on
        waiting, sim.carry = sim.carry, []
        e.submit(waiting, front=True)  # saved trajectories continue first, oldest first
        e.start_iteration(budget)
        tick()
        sim.run(on_ready, iteration_over, tick)
        sim.carry += e.stop_all("paused")  # continued after the update, tokens kept
        if ready:
            break
    e.start_iteration(None)
    trained = ready[: sim.batch]
    del ready[: sim.batch]
    sim.train_colocated(trained)


def _staleness_run(sim: _Sim, steps: int, staleness: int, reuse_ratio: float) -> None:
    model, B = sim.model, sim.batch
    buffer = StalenessBuffer(staleness, reuse_ratio)
    reuse_cap = int(reuse_ratio * B)
    st = {"version": 0, "end": math.inf, "batch": None, "fresh": [], "kept": [], "n_fresh": 0, "n_kept": 0}
    by_gid: dict[int, _Group] = {}  # every launched group
    open_map: dict[int, _Group] = {}  # launched, not ready yet

    def next_draw() -> int:  # the trainer version of the next batch
        return st["version"] + (st["batch"] is not None)

    def usable() -> int:
        return st["n_fresh"] + min(st["n_kept"], reuse_cap)

    def recount() -> None:
        t = next_draw()
        st["n_fresh"] = sum(within_bound(g.version, t, staleness) for g in st["fresh"])
        st["n_kept"] = sum(within_bound(g.version, t, staleness) for g in st["kept"])

    def draw() -> None:
        tagged = [TaggedSample(str(g.gid), g.version) for g in st["fresh"]]
        chosen, discarded = buffer.batch(tagged, st["version"], B)
        taken, gone = {int(s.key) for s in chosen}, {int(s.key) for s in discarded}
        for gid in gone:
            sim.drop(by_gid[gid])
        st["kept"] = [g for g in st["kept"] + st["fresh"] if g.gid not in taken and g.gid not in gone]
        st["fresh"], st["batch"] = [], [by_gid[int(s.key)] for s in chosen]
        train_s = model.train_time(sum(g.tokens for g in st["batch"])) / (1.0 - model.gen_share)
        st["end"] = sim.engine.time + train_s + model.sync_time
        recount()

    def tick() -> None:
        if st["batch"] is None and usable() >= B:
            draw()
        if next_draw() - sim.engine.version > staleness:
            return  # what starts now could not be trained
        demand = max(0, B * (1 + staleness) + reuse_cap - usable())
        for g in sim.launch_many(tasks_to_launch(demand, sim.open_groups, sim.valid_rate(), sim.free_groups())):
            by_gid[g.gid] = open_map[g.gid] = g

    def on_ready(g: _Group) -> None:
        open_map.pop(g.gid, None)
        if not g.valid:
            sim.drop(g)
            return
        st["fresh"].append(g)
        st["n_fresh"] += within_bound(g.version, next_draw(), staleness)

    def publish() -> None:
        sim.close_step(st["batch"], st["version"], 0.0)
        st["version"] += 1
        st["batch"], st["end"] = None, math.inf
        sim.engine.version = st["version"]
        started = [g for g in open_map.values() if any(r.version >= 0 for r in g.requests)]
        stale = [g for g in started if st["version"] - g.version > staleness]
        for g in stale:
            del open_map[g.gid]
        _abort_groups(sim, stale)  # can never be trained: regenerate
        recount()

    while len(sim.steps) < steps:
        sim.run(on_ready, lambda: sim.engine.time >= st["end"], tick, deadline=lambda: st["end"])
        publish()


def _dora_run(sim: _Sim, steps: int, staleness: int, update_group: int) -> None:
    model, e, B = sim.model, sim.engine, sim.batch
    e.engine_versions = np.zeros(e.engines, dtype=np.int64)
    ready: list[_Group] = []  # finished valid groups not trained yet, in the order they became ready
    st = {"version": 0, "batch": None, "end": math.inf, "free_at": 0.0}

    def trainable(g: _Group) -> bool:  # at the next draw: step version + 1
        return not too_stale(st["version"] + 1, [g.version], staleness)

    def tick() -> None:
        if st["batch"] is None and e.time >= st["free_at"]:
            for g in [g for g in ready if not trainable(g)]:
                ready.remove(g)
                sim.drop(g)
            if len(ready) >= B:
                st["batch"], ready[:] = ready[:B], ready[B:]
                st["end"] = e.time + model.train_time(sum(g.tokens for g in st["batch"]))
        usable = sum(trainable(g) for g in ready)
        demand = max(0, B * (1 + staleness) - usable)
        sim.launch_many(tasks_to_launch(demand, sim.open_groups, sim.valid_rate(), sim.free_groups()))

    def on_ready(g: _Group) -> None:
        if g.valid:
            ready.append(g)
        else:
            sim.drop(g)

    def publish() -> None:  # training done: the new version goes to the engines DORA picks
        sim.close_step(st["batch"], st["version"], 0.0)
        st["version"] += 1
        st["batch"], st["end"], st["free_at"] = None, math.inf, e.time + model.sync_time
        for engine in replicas_to_update(e.engine_versions.tolist(), st["version"], update_group, staleness):
            e.submit(e.stop_engine(engine, "paused"), front=True)  # continued elsewhere, tokens kept
            e.engine_versions[engine] = st["version"]
            e.offline_until[engine] = st["free_at"]

    def deadline() -> float:  # the training step's end, the trainer's next draw, an engine back online
        waits = [t for t in (*e.offline_until, st["free_at"]) if t > e.time]
        return min([st["end"], *waits])

    while len(sim.steps) < steps:
        sim.run(on_ready, lambda: e.time >= st["end"], tick, deadline=deadline)
        publish()


def validation_time(policy: str, trace: Trace, engine: EngineModel, groups: int) -> float:
    """Seconds to generate and score ``groups`` groups once (a validation pass: no filtering, no
    training). ``naive``: the groups split statically over the engines, every request to its last
    token, then the rewards (``serial_reward_time``); ``seamless``: each request on the engine with
    the most free slots, each group scored as it finishes, done when the last reward is in."""
    if policy not in ("naive", "seamless"):
        raise ValueError(f"validation_time compares naive and seamless, not {policy!r}")
    sim = _Sim(trace, engine, groups, False, 1.0, groups)
    launched = sim.launch_many(groups)
    if policy == "naive":
        sim.async_rewards = False
        sim.pin_in_chunks(launched)
        sim.drain()
        sim.engine.wait(engine.serial_reward_time(groups * sim.G))
        return sim.engine.time
    left = {"groups": groups}

    def on_ready(_group: _Group) -> None:
        left["groups"] -= 1

    sim.run(on_ready, lambda: left["groups"] == 0)
    return sim.engine.time


def _abort_groups(sim: _Sim, groups: list[_Group]) -> None:
    """Abort the requests of ``groups`` (in flight or queued) and drop the groups."""
    if not groups:
        return
    ids = {g.gid for g in groups}
    e = sim.engine
    for s in range(e.slots):
        if e.occupant[s] is not None and e.occupant[s].group.gid in ids:
            e._release(s, "aborted")
    e.queue = deque(r for r in e.queue if r.group.gid not in ids)
    for g in groups:
        sim.drop(g)


# ------------------------------------------------------------------------------------------ entry


def simulate(
    policy: str,
    trace: Trace,
    engine: EngineModel = EngineModel(),
    steps: int = 10,
    *,
    batch_groups: int = 32,
    gen_groups: int | None = None,
    token_budget: int | None = None,
    staleness: int = 1,
    reuse_ratio: float = 0.0,
    update_group: int = 1,
    record_timeline: bool = True,
    max_groups_per_step: int | None = None,
) -> SimResult:
    """Run ``steps`` training steps of ``policy`` (one of :data:`POLICIES`) over ``trace``.

    ``gen_groups``: naive's groups per round; verl_sync's in-flight cap (default ``batch_groups``);
    ``token_budget``: tokens per request per iteration (partial, required);
    ``staleness`` / ``reuse_ratio``: the staleness mode's bound and reuse share (dora: the bound);
    ``update_group``: dora's engines updated per weight sync."""
    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r}; one of {POLICIES}")
    gen_groups = int(gen_groups or batch_groups)
    if gen_groups < batch_groups:
        raise ValueError(f"gen_groups ({gen_groups}) must be >= batch_groups ({batch_groups})")
    if policy == "partial" and (token_budget is None or token_budget < 1):
        raise ValueError("partial needs token_budget >= 1")
    share = engine.gen_share if policy == "staleness" else 1.0
    if not 0.0 < share <= 1.0 or (policy == "staleness" and share >= 1.0):
        raise ValueError(f"gen_share must be in (0, 1), got {engine.gen_share}")
    sim = _Sim(trace, engine, batch_groups, record_timeline, share, max_groups_per_step or 100 * batch_groups)
    knobs = {"batch_groups": batch_groups}
    if policy == "staleness":
        knobs.update(staleness=staleness, reuse_ratio=reuse_ratio)
        _staleness_run(sim, steps, int(staleness), float(reuse_ratio))
    elif policy == "dora":
        knobs.update(staleness=staleness, update_group=update_group)
        _dora_run(sim, steps, int(staleness), int(update_group))
    else:
        # partial / colocate_async: complete valid groups not trained yet; staleness_colocated: kept groups
        carry: list[_Group] = []
        for _ in range(steps):
            if policy == "naive":
                _naive_step(sim, gen_groups)
            elif policy == "verl_sync":
                _verl_sync_step(sim, gen_groups)
            elif policy == "seamless":
                _seamless_step(sim)
            elif policy == "staleness_colocated":
                _seamless_step(sim, carry, int(staleness), float(reuse_ratio))
            else:
                _partial_step(sim, carry, token_budget if policy == "partial" else None)
        knobs.update(gen_groups=gen_groups, token_budget=token_budget)
        if policy == "staleness_colocated":
            knobs.update(staleness=staleness, reuse_ratio=reuse_ratio)
    return SimResult(policy, sim.steps, sim.timeline or [], knobs, sim.engine.tokens, sim.pending_tokens())
