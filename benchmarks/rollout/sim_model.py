"""The rollout simulator's machinery (``simulator.py`` holds the policies and the model's
assumptions): cost model, per-step records, requests, groups, the engine and the shared state."""

from __future__ import annotations

import heapq
import math
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Callable, NamedTuple

import numpy as np

from benchmarks.rollout.trace import Trace
from reasonrl.plugins.rollout.seamless import (
    idle_ratio,
    sample_waste,
    valid_rate_estimate,
)


@dataclass(frozen=True)
class EngineModel:
    """Costs in seconds; calibrate ``step_a``/``step_b`` and ``train_c``/``train_d`` from measurements."""

    slots: int = 512  # concurrent requests over all engines
    engines: int = 1  # data-parallel generation engines, ``slots // engines`` requests each
    step_a: float = 0.02
    step_b: float = 6e-5
    reward_latency: float = 2.0
    #: naive's rewards, computed after each round: this many samples at a time, ``reward_latency``
    #: s each (None: the whole round at once); every other policy scores each group off the engine
    reward_workers: int | None = None
    train_c: float = 20.0
    train_d: float = 2e-5
    sync_time: float = 5.0
    gen_share: float = 0.5  # staleness mode: share of the devices that generate
    #: admitting requests (input processing, prefill) holds an engine's decoding: ``admit_b`` s per
    #: request joining it, plus ``admit_a`` s when the engine had nothing in flight (its start-up:
    #: scheduling from idle, a prefill-only step); 0: not modelled
    admit_a: float = 0.0
    admit_b: float = 0.0

    def __post_init__(self) -> None:
        if self.engines < 1 or self.slots % self.engines:
            raise ValueError(f"slots ({self.slots}) must split evenly over engines ({self.engines})")
        if self.reward_workers is not None and self.reward_workers < 1:
            raise ValueError(f"reward_workers must be >= 1 or None, got {self.reward_workers}")
        if self.admit_a < 0 or self.admit_b < 0:
            raise ValueError(f"admit_a and admit_b must be >= 0, got {self.admit_a}, {self.admit_b}")

    def step_time(self, active: int) -> float:
        return self.step_a + self.step_b * active

    def serial_reward_time(self, samples: int) -> float:
        """Naive's reward phase for a round of ``samples``."""
        if self.reward_workers is None:
            return self.reward_latency
        return math.ceil(samples / self.reward_workers) * self.reward_latency

    def train_time(self, tokens: float) -> float:
        return self.train_c + self.train_d * tokens


class RequestEvent(NamedTuple):
    """One segment of one request on the engine (a request has several under partial rollout)."""

    request: int
    group: int
    prompt: int
    sample: int
    start: float
    end: float
    version: int
    outcome: str  # "finished", "budget" (segment used its token budget), "aborted", "paused"
    engine: int = 0


@dataclass
class StepRecord:
    step: int
    wall_s: float
    gen_window_s: float  # the part of the step the engine may generate in
    gen_busy_s: float  # the engine decoded at least one request
    slot_busy_s: float  # Σ dt·active/slots
    idle_s: float  # gen_window_s − slot_busy_s
    generated_tokens: float
    trained_tokens: int
    aborted_tokens: float  # progress of requests stopped unfinished and thrown away
    discarded_tokens: float  # finished samples thrown away: surplus, stale, siblings of aborted ones
    invalid_tokens: float  # samples of invalid groups (dynamic sampling)
    trained_lengths: np.ndarray
    trained_rewards: np.ndarray
    finished_lengths: np.ndarray
    finished_rewards: np.ndarray
    staleness: np.ndarray  # per trained sample: versions behind the trainer
    segments: np.ndarray  # per trained sample: engine segments it took
    launched_groups: list[int]
    trained_groups: list[int]
    valid_launched_lengths: np.ndarray  # ground truth: every sample of the step's launched valid groups
    stop_time: float | None = None  # seamless: fifo_early_termination's stop time


@dataclass
class SimResult:
    policy: str
    steps: list[StepRecord]
    timeline: list[RequestEvent]
    knobs: dict = field(default_factory=dict)
    generated_tokens: float = 0.0  # the whole run
    pending_tokens: float = 0.0  # generated but neither trained nor thrown away at the end

    def summary(self, skip: int = 0) -> dict:
        """Step wall median/p90, time per trained token, waste, idle ratio, biases, histograms
        over the steps after the first ``skip`` (warm-up)."""
        steps = self.steps[skip:]
        walls = np.array([s.wall_s for s in steps])
        trained = sum(s.trained_tokens for s in steps)
        thrown = sum(s.aborted_tokens + s.discarded_tokens for s in steps)
        invalid = sum(s.invalid_tokens for s in steps)
        cat = lambda name: np.concatenate([getattr(s, name) for s in steps])  # noqa: E731
        return {
            "policy": self.policy,
            "steps": len(steps),
            "step_wall_median_s": float(np.median(walls)),
            "step_wall_p90_s": float(np.percentile(walls, 90)),
            "time_per_trained_token_s": float(walls.sum() / max(trained, 1)),
            "sample_waste": sample_waste(trained + thrown + invalid, trained),
            "sample_waste_valid": sample_waste(trained + thrown, trained),
            "idle_ratio": idle_ratio(sum(s.gen_busy_s for s in steps), sum(s.gen_window_s for s in steps)),
            "slot_idle_ratio": idle_ratio(sum(s.slot_busy_s for s in steps), sum(s.gen_window_s for s in steps)),
            "length_bias": _ratio(cat("trained_lengths"), cat("finished_lengths")),
            "reward_bias": _ratio(cat("trained_rewards"), cat("finished_rewards")),
            "length_bias_vs_launched_valid": _ratio(cat("trained_lengths"), cat("valid_launched_lengths")),
            "staleness_hist": dict(sorted(Counter(cat("staleness").tolist()).items())),
            "segments_hist": dict(sorted(Counter(cat("segments").tolist()).items())),
        }


def _ratio(a: np.ndarray, b: np.ndarray) -> float:
    return float(a.mean() / b.mean()) if len(a) and len(b) and b.mean() > 0 else math.nan


# ---------------------------------------------------------------------------------------- engine


@dataclass(eq=False, slots=True)
class _Request:
    rid: int
    group: "_Group"
    sample: int
    length: int
    reward: float
    done: float = 0.0  # tokens generated so far, all segments
    target: float = 0.0  # tokens the current segment may generate
    segments: int = 0
    version: int = -1  # oldest policy version of its segments
    seg_start: float = 0.0
    seg_version: int = 0
    slot: int = -1  # engine slot while in flight
    engine: int = -1  # the only engine it may run on (a static split of the batch); -1: any

    @property
    def complete(self) -> bool:
        return self.done >= self.length - 1e-6  # segments resumed at fractional progress


@dataclass(eq=False)
class _Group:
    gid: int
    prompt: int
    requests: list[_Request]
    valid: bool  # known to the scheduler only once ready
    finished: int = 0  # complete samples
    ready: bool = False
    ready_time: float = math.nan
    dropped: bool = False
    trained: bool = False

    @property
    def version(self) -> int:
        return min(r.version for r in self.requests if r.version >= 0)

    @property
    def tokens(self) -> int:
        return sum(r.length for r in self.requests)


class _Engine:
    """``engines`` data-parallel engines of ``slots // engines`` concurrent requests each, one FIFO
    queue, event-to-event decoding. Each engine decodes at its own pace (``step_a + step_b·n`` s per
    decode step with ``n`` of its requests active). A queued request takes a free slot on the engine
    with the most free slots, or only on its own engine if it is pinned (``_Request.engine``).
    Admitting ``k`` requests at once holds that engine's decoding for ``admit_b·k`` s, plus
    ``admit_a`` s if it had nothing in flight (the engine counts as busy meanwhile)."""

    def __init__(
        self,
        slots: int,
        step_a: float,
        step_b: float,
        timeline: list | None,
        engines: int = 1,
        admit_a: float = 0.0,
        admit_b: float = 0.0,
    ) -> None:
        if engines < 1 or slots % engines:
            raise ValueError(f"slots ({slots}) must split evenly over engines ({engines})")
        self.slots, self.engines, self.per_engine = slots, engines, slots // engines
        self.step_a, self.step_b, self.timeline = step_a, step_b, timeline
        self.admit_a, self.admit_b = admit_a, admit_b
        self.hold = np.zeros(engines)  # seconds each engine still spends admitting before it decodes
        self.time = 0.0
        self.version = 0
        #: per-engine weight versions (DORA: engines updated one after another); None: ``version`` for all
        self.engine_versions: np.ndarray | None = None
        self.offline_until = np.zeros(engines)  # an engine taking weights admits nothing before this
        self.budget: int | None = None
        self.slot_engine = np.arange(slots) // self.per_engine
        self.decode_steps = np.zeros(engines)  # per engine
        self.step_limit = np.full(engines, np.inf)  # no decoding past this count (partial's iteration)
        self.rem = np.full(slots, np.inf)
        self.occupant: list[_Request | None] = [None] * slots
        per = self.per_engine
        self.free = [list(range((e + 1) * per - 1, e * per - 1, -1)) for e in range(engines)]
        self.n_free = np.full(engines, per)
        self.queue: deque[_Request] = deque()
        self.busy = self.slot_busy = self.tokens = 0.0

    @property
    def n_active(self) -> int:
        return self.slots - int(self.n_free.sum())

    @property
    def free_after_queue(self) -> int:
        online = self.offline_until <= self.time
        return max(0, int((self.n_free * online).sum()) - len(self.queue))

    def start_iteration(self, budget: int | None) -> None:
        """Partial rollout: every engine may decode ``budget`` more steps (None: no limit)."""
        self.step_limit = self.decode_steps + budget if budget else np.full(self.engines, np.inf)

    def limit_reached(self) -> bool:
        """Some engine reached its step limit and nothing else can move: the iteration is over."""
        open_engines = self.decode_steps < self.step_limit
        if open_engines.all():
            return False
        working = open_engines & (self.n_free < self.per_engine)
        return not working.any() and not (self.queue and (self.n_free * open_engines).any())

    def submit(self, requests: list[_Request], front: bool = False) -> None:
        if front:
            self.queue.extendleft(reversed(requests))
        else:
            self.queue.extend(requests)

    def _admit(self) -> None:
        # an engine at its step limit, or taking weights, takes none
        room = self.n_free * (self.decode_steps < self.step_limit) * (self.offline_until <= self.time)
        if not self.queue or not room.any():
            return
        waiting: deque[_Request] = deque()  # pinned requests whose engine is full
        joined, was_idle = np.zeros(self.engines), self.n_free == self.per_engine
        while self.queue:
            req = self.queue.popleft()
            engine = req.engine if req.engine >= 0 else int(np.argmax(room))
            if room[engine] <= 0:
                waiting.append(req)
                if req.engine < 0 or not room.any():
                    break
                continue
            room[engine] -= 1
            joined[engine] += 1
            self.n_free[engine] -= 1
            slot = self.free[engine].pop()
            left = req.length - req.done
            req.target = left if self.budget is None else min(left, self.budget)
            version = self.version if self.engine_versions is None else int(self.engine_versions[engine])
            req.seg_start, req.seg_version, req.segments = self.time, version, req.segments + 1
            req.version = version if req.version < 0 else min(req.version, version)
            self.rem[slot], self.occupant[slot], req.slot = req.target, req, slot
        waiting.extend(self.queue)
        self.queue = waiting
        if self.admit_a or self.admit_b:
            self.hold += np.where(joined > 0, self.admit_a * was_idle + self.admit_b * joined, 0.0)

    def advance(self, until: float = math.inf) -> list[_Request]:
        """Decode to the next segment end, to ``until`` or to a step limit, whichever is first;
        the requests whose segment ended (freed slots are refilled at the next call)."""
        self._admit()
        if self.n_active == 0:
            if math.isfinite(until):
                self.time = max(self.time, until)
            return []
        active = self.per_engine - self.n_free
        self.hold[active == 0] = 0.0  # requests stopped before they were admitted: nothing to finish
        working = (active > 0) & (self.decode_steps < self.step_limit)
        holding = working & (self.hold > 0)  # admitting: busy, not decoding yet
        moving = working & ~holding
        if not working.any():
            return []  # every engine with work is at its step limit
        step = self.step_a + self.step_b * active  # seconds per decode step, per engine
        pace = np.where(moving, step, np.inf)  # an engine at its step limit does not move
        t_end = float((self.rem * pace[self.slot_engine]).min())  # free slots: inf
        t_limit = float(np.where(moving, (self.step_limit - self.decode_steps) * step, np.inf).min())
        t_hold = float(np.where(holding, self.hold, np.inf).min())
        t_until = until - self.time
        dt = max(0.0, min(t_end, t_limit, t_hold, t_until))
        k = dt / pace  # decode steps per engine (0 where it does not move)
        self.rem -= k[self.slot_engine]
        self.decode_steps += k
        self.hold = np.where(holding, np.maximum(self.hold - dt, 0.0), self.hold)
        self.time = until if dt == t_until < min(t_end, t_limit, t_hold) else self.time + dt
        self.busy += dt * int(working.sum()) / self.engines
        self.slot_busy += dt * int(active[working].sum()) / self.slots
        self.tokens += float((k * active).sum())
        if dt < t_end:
            return []
        return [self._release(int(s), "finished") for s in np.flatnonzero(self.rem <= 1e-9)]

    def _release(self, slot: int, outcome: str) -> _Request:
        req = self.occupant[slot]
        req.done += req.target if outcome == "finished" else max(0.0, req.target - float(self.rem[slot]))
        if outcome == "finished" and req.complete:
            req.done = float(req.length)
        elif outcome == "finished":
            outcome = "budget"  # a partial-rollout segment that used its budget
        engine = int(self.slot_engine[slot])
        self.rem[slot], self.occupant[slot], req.slot = np.inf, None, -1
        self.free[engine].append(slot)
        self.n_free[engine] += 1
        if self.timeline is not None:
            g = req.group
            self.timeline.append(
                RequestEvent(
                    req.rid, g.gid, g.prompt, req.sample, req.seg_start, self.time, req.seg_version, outcome, engine
                )
            )
        return req

    def stop_all(self, outcome: str) -> list[_Request]:
        """Take every in-flight request off the engine (``aborted`` or ``paused``), in slot order."""
        return [self._release(s, outcome) for s in range(self.slots) if self.occupant[s] is not None]

    def stop_engine(self, engine: int, outcome: str) -> list[_Request]:
        """Take ``engine``'s in-flight requests off it (``paused``: continued elsewhere, tokens kept)."""
        slots = range(engine * self.per_engine, (engine + 1) * self.per_engine)
        return [self._release(s, outcome) for s in slots if self.occupant[s] is not None]

    def progress(self, req: _Request) -> float:
        """Tokens ``req`` holds now, the current segment's included."""
        return req.done + (req.target - float(self.rem[req.slot]) if req.slot >= 0 else 0.0)

    def wait(self, seconds: float) -> None:
        """Time passes with nothing decoding (rewards in series, training, weight sync)."""
        if self.n_active:
            raise RuntimeError("wait() with requests in flight")
        self.time += seconds


# ------------------------------------------------------------------------------------ simulation


class _Sim:
    """State shared by the policies: the engine, the trace cursor, rewards in flight, step logs."""

    def __init__(
        self, trace: Trace, model: EngineModel, batch_groups: int, timeline: bool, share: float, max_groups: int
    ):
        self.trace, self.model, self.batch, self.max_groups = trace, model, int(batch_groups), int(max_groups)
        self.G = trace.group_size
        if model.engines > 1:  # a share of the engines generates, each as fast as before
            engines = max(1, round(model.engines * share))
            slots, step_b = engines * (model.slots // model.engines), model.step_b
        else:  # one engine on a share of the devices: the same load per device
            engines, slots, step_b = 1, int(model.slots * share), model.step_b / share
        if slots < self.G:
            raise ValueError(f"{slots} slots cannot hold a group of {self.G}")
        self.timeline: list[RequestEvent] | None = [] if timeline else None
        self.engine = _Engine(slots, model.step_a, step_b, self.timeline, engines, model.admit_a, model.admit_b)
        self.trace_valid = trace.group_valid()
        self.rewards: list[tuple[float, int, _Group]] = []  # heap of (ready time, gid, group)
        self.async_rewards = True
        self.valid_done = self.groups_done = 0  # pass-rate statistics, kept across steps
        self.cursor = self.next_rid = 0
        self.version = 0
        self.open_groups = 0  # launched, neither ready nor dropped
        self.carry: list[_Request] = []  # requests saved for the next iteration (partial)
        self.groups: list[_Group] = []  # every launched group
        self.steps: list[StepRecord] = []
        self._open_log()

    # -- groups
    def launch(self) -> _Group:
        prompt = self.cursor % self.trace.n_prompts
        self.cursor += 1
        group = _Group(self.cursor - 1, prompt, [], bool(self.trace_valid[prompt]))
        for j in range(self.G):
            length, correct = int(self.trace.lengths[prompt, j]), bool(self.trace.correct[prompt, j])
            group.requests.append(_Request(self.next_rid, group, j, length, float(correct)))
            self.next_rid += 1
        self.engine.submit(group.requests)
        self.groups.append(group)
        self.open_groups += 1
        self.log["launched"].append(group.gid)
        if group.valid:
            self.log["valid_launched"] += [r.length for r in group.requests]
        if len(self.log["launched"]) > self.max_groups:
            raise RuntimeError(
                f"a step launched over {self.max_groups} groups (max_groups_per_step): too few valid groups "
                "in the trace, or a token budget too small for any group to complete?"
            )
        return group

    def launch_many(self, count: int) -> list[_Group]:
        return [self.launch() for _ in range(count)]

    def pin_in_chunks(self, groups: list[_Group]) -> None:
        """A static split of a batch (verl's SPMD rollout, MiMo's baseline): the groups in equal
        contiguous chunks, one per engine; a request then runs only on its chunk's engine."""
        engines = self.engine.engines
        for k, group in enumerate(groups):
            for req in group.requests:
                req.engine = k * engines // len(groups)

    def valid_rate(self) -> float:
        return valid_rate_estimate(self.valid_done, self.groups_done)

    def free_groups(self) -> int:
        return self.engine.free_after_queue // self.G

    def segment_end(self, req: _Request) -> None:
        group = req.group
        if not req.complete:  # reached the token budget: waits for the next iteration
            self.carry.append(req)
            return
        group.finished += 1
        self.log["finished_lengths"].append(req.length)
        self.log["finished_rewards"].append(req.reward)
        if group.finished == self.G and self.async_rewards:
            heapq.heappush(self.rewards, (self.engine.time + self.model.reward_latency, group.gid, group))

    def mark_ready(self, group: _Group, when: float) -> _Group:
        group.ready, group.ready_time = True, when
        self.open_groups -= 1
        self.groups_done += 1
        self.valid_done += group.valid
        return group

    def drop(self, group: _Group) -> None:
        """Throw a group away: finished samples are discarded, unfinished progress aborted."""
        if group.dropped:
            return
        if not group.ready:
            self.open_groups -= 1
        group.dropped = True
        invalid = group.ready and not group.valid
        for r in group.requests:
            key = "aborted" if not r.complete else "invalid" if invalid else "discarded"
            self.log[key] += r.length if r.complete else r.done

    def abort_in_flight(self) -> None:
        """Stop every request (in flight or queued); their groups are dropped by the caller."""
        self.engine.stop_all("aborted")
        self.engine.queue.clear()
        self.rewards.clear()

    # -- the event loop
    def run(self, on_ready: Callable[[_Group], None], done: Callable[[], bool], tick=None, deadline=None) -> None:
        """Advance event by event: segment ends, then groups whose reward arrived; ``tick`` before
        each event (launch decisions). Stops when ``done()``; never decodes past ``deadline()``."""
        while not done():
            if tick is not None:
                tick()
            t_next = min(self.rewards[0][0] if self.rewards else math.inf, deadline() if deadline else math.inf)
            if not self.engine.n_active and not self.engine.queue and math.isinf(t_next):
                raise RuntimeError("the simulation stalled: nothing in flight and the step is not done")
            for req in self.engine.advance(t_next):
                self.segment_end(req)
            while self.rewards and self.rewards[0][0] <= self.engine.time:
                when, _, group = heapq.heappop(self.rewards)
                if not group.dropped:
                    on_ready(self.mark_ready(group, when))

    def drain(self) -> None:
        while self.engine.n_active or self.engine.queue:
            for req in self.engine.advance():
                self.segment_end(req)

    # -- steps
    def _open_log(self) -> None:
        e = self.engine
        self.log = {
            "start": e.time,
            "busy": e.busy,
            "slot_busy": e.slot_busy,
            "tokens": e.tokens,
            "launched": [],
            "valid_launched": [],
            "finished_lengths": [],
            "finished_rewards": [],
            "aborted": 0.0,
            "discarded": 0.0,
            "invalid": 0.0,
        }

    def close_step(self, trained: list[_Group], version: int, non_gen_s: float, stop_time=None) -> StepRecord:
        """Record the step that trained ``trained`` at trainer version ``version``."""
        e, log = self.engine, self.log
        reqs = [r for g in trained for r in g.requests]
        for g in trained:
            g.trained = True
        wall, slot_busy = e.time - log["start"], e.slot_busy - log["slot_busy"]
        record = StepRecord(
            step=len(self.steps),
            wall_s=wall,
            gen_window_s=wall - non_gen_s,
            gen_busy_s=e.busy - log["busy"],
            slot_busy_s=slot_busy,
            idle_s=max(0.0, wall - non_gen_s - slot_busy),
            generated_tokens=e.tokens - log["tokens"],
            trained_tokens=sum(r.length for r in reqs),
            aborted_tokens=log["aborted"],
            discarded_tokens=log["discarded"],
            invalid_tokens=log["invalid"],
            trained_lengths=np.array([r.length for r in reqs], dtype=np.int64),
            trained_rewards=np.array([r.reward for r in reqs]),
            finished_lengths=np.array(log["finished_lengths"], dtype=np.int64),
            finished_rewards=np.array(log["finished_rewards"]),
            staleness=np.array([version - g.version for g in trained for _ in g.requests], dtype=np.int64),
            segments=np.array([r.segments for r in reqs], dtype=np.int64),
            launched_groups=log["launched"],
            trained_groups=[g.gid for g in trained],
            valid_launched_lengths=np.array(log["valid_launched"], dtype=np.int64),
            stop_time=stop_time,
        )
        self.steps.append(record)
        self._open_log()
        return record

    def pending_tokens(self) -> float:
        """Tokens generated but neither trained nor thrown away yet (in flight, saved, buffered)."""
        live = [g for g in self.groups if not (g.trained or g.dropped)]
        return sum(self.engine.progress(r) for g in live for r in g.requests)

    def train_colocated(self, trained: list[_Group], stop_time=None) -> None:
        """Train and sync on the generation devices, then publish the next policy version."""
        tokens = sum(g.tokens for g in trained)
        non_gen = self.model.train_time(tokens) + self.model.sync_time
        self.engine.wait(non_gen)
        self.close_step(trained, self.version, non_gen, stop_time)
        self.version += 1
        self.engine.version = self.version
