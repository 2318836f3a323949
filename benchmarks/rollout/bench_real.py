"""Real generation for ``reasonrl bench rollout``: vLLM's CPU build (``AsyncLLM``, the engine
verl's LLM server drives) on the smoke model, responses forced to a trace's lengths
(``ignore_eos``, per-request ``max_tokens``), rewards drawn by the trace and delivered after
``reward_latency`` seconds (MiMo's asynchronous reward stands in for the judge).

Runs in its own process (``python -m benchmarks.rollout.bench_real SPEC_JSON``) and prints
one JSON line: the engine's calibrated costs (decode step, admitting requests), measured before
every policy and after the last, and, per policy, the rollout wall time of each step (partial:
of each iteration too) and the tokens generated / trained. Training itself is not run
(every policy would pay the same): ratios are of the rollout phase.

Policies: ``verl_sync`` (verl 0.9.1's synchronous DAPO: refill while generating, drain before
training), ``naive`` (MiMo's baseline — a round of groups to the last token, then rewards in
series, keep the valid groups, repeat) and ``seamless`` (MiMo §3.4.1 — continuous launching by
``tasks_to_launch``, rewards as groups finish, the step stopped by ``fifo_early_termination``,
requests still in flight aborted), ``partial`` (Kimi §2.6.2 — iterations of at most a token
budget of decode steps, unfinished requests stopped and continued from prompt + tokens so far in
the next iteration; as the simulator's ``partial``) and ``colocate_async`` (verl's colocated async
mode as the simulator reads it: the same schedule without a budget — a step ends once its batch is
complete, and the requests still in flight are stopped and resumed with their tokens next step)
and ``staleness_colocated`` (``+reasonrl/rollout=staleness`` on one engine: seamless, the
finished valid surplus kept and reused up to ``reuse_ratio`` of a later batch within the bound).

And repeat detection (Kimi §2.6.2, vLLM's own ``repetition_detection`` with the option's
pattern sizes): its cost per generated token on non-looping sampled responses, and the tokens it
saves on greedy responses that loop (``repetition``).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import uuid
from operator import itemgetter

import numpy as np

from benchmarks.rollout.trace import long_tail_trace
from reasonrl.plugins.rollout.seamless import fifo_early_termination, tasks_to_launch, valid_rate_estimate
from reasonrl.plugins.rollout.staleness import split_kept

MAX_LEN = 64  # the smoke model's positions
#: the policies, in the order they run (the engine calibrated before each and after the last)
REAL_POLICIES = ("naive", "verl_sync", "seamless", "partial", "colocate_async", "staleness_colocated")
#: +reasonrl/rollout=repeat_detection's pattern sizes (hydra_configs/reasonrl/rollout/repeat_detection.yaml)
REPETITION = {"max_pattern_size": 64, "min_pattern_size": 1, "min_count": 8}


async def _token_ids(
    engine,
    prompt_ids,
    request_id: str,
    detect: bool = False,
    progress: dict | None = None,
    on_output=None,
    **sampling,
) -> list[int]:
    """One request's generated token ids (``sampling``: vLLM ``SamplingParams`` fields; ``detect``:
    with the option's repeat detection; ``progress``: its token count so far is kept there under
    the request id, so a request cancelled or aborted midway still counts what it generated;
    ``on_output``: called with the token ids so far on every streamed output)."""
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt
    from vllm.sampling_params import RepetitionDetectionParams

    extra = {"repetition_detection": RepetitionDetectionParams(**REPETITION)} if detect else {}
    final = None
    params = SamplingParams(**sampling, **extra)
    async for output in engine.generate(TokensPrompt(prompt_token_ids=prompt_ids), params, request_id):
        final = output
        if progress is not None and output.outputs:
            progress[request_id] = len(output.outputs[0].token_ids)
        if on_output is not None and output.outputs:
            on_output(output.outputs[0].token_ids)
    return list(final.outputs[0].token_ids) if final and final.outputs else []


async def _generate(
    engine, prompt_ids, max_tokens: int, request_id: str, progress: dict | None = None, **sampling
) -> int:
    """Tokens of one sampled response forced to ``max_tokens`` (``ignore_eos``; ``sampling``: more
    ``SamplingParams`` fields)."""
    ids = await _token_ids(
        engine,
        prompt_ids,
        request_id,
        progress=progress,
        temperature=1.0,
        ignore_eos=True,
        max_tokens=int(max_tokens),
        **sampling,
    )
    return len(ids)


async def repetition(engine, prompts: list[list[int]], pairs: int = 6, requests: int = 32) -> dict:
    """Repeat detection's cost and saving. Cost, as matched pairs: ``requests`` concurrent sampled
    responses (temperature 1, ``ignore_eos``, a seed per request) with detection, and the same
    prompts and seeds without it, each forced to the length its detected twin reached — equal
    tokens and equal batch occupancy in both arms, so the time difference is the detector's own (a
    response detection stopped early would otherwise leave a smaller batch whose fixed per-step
    cost reads as detection's). Each seed set runs in two rounds, detection first and then second
    (the seeds replay the same responses), so neither arm gains from going second (warm caches,
    the prompts' cached prefix); the median time per generated token of each arm. Saving: every
    prompt's greedy response with ``ignore_eos`` up to the model's length, without and with
    detection (the smoke model repeats itself once past its answer): a response detection stops
    early loops, and the tokens it saves are counted on those."""
    per_token = {False: [], True: []}
    stopped, equal = 0, 0
    chosen = [prompts[i % len(prompts)] for i in range(requests)]
    free = [MAX_LEN - len(prompt) - 1 for prompt in chosen]

    async def arm(detect: bool, seeds: list[int], lengths: list[int]) -> list[int]:
        start = time.perf_counter()
        responses = await asyncio.gather(
            *(
                _token_ids(
                    engine,
                    prompt,
                    uuid.uuid4().hex,
                    detect,
                    temperature=1.0,
                    ignore_eos=True,
                    seed=seed,
                    max_tokens=length,
                )
                for prompt, seed, length in zip(chosen, seeds, lengths)
            )
        )
        per_token[detect].append((time.perf_counter() - start) / max(1, sum(map(len, responses))))
        return [max(1, len(ids)) for ids in responses]

    for pair in range(pairs):
        seeds = [pair * requests + i for i in range(requests)]
        lengths = await arm(True, seeds, free)  # detection first: it sets the lengths
        stopped += sum(n < limit for n, limit in zip(lengths, free))
        await arm(False, seeds, lengths)
        await arm(False, seeds, lengths)  # then detection second, on the same seeds
        again = await arm(True, seeds, free)
        equal += sum(a == b for a, b in zip(again, lengths))
    greedy = {}
    for detect in (False, True):
        responses = await asyncio.gather(
            *(
                _token_ids(
                    engine,
                    p,
                    uuid.uuid4().hex,
                    detect,
                    temperature=0.0,
                    ignore_eos=True,
                    max_tokens=MAX_LEN - len(p) - 1,
                )
                for p in prompts
            )
        )
        greedy[detect] = [len(ids) for ids in responses]
    looping = [i for i, (off, on) in enumerate(zip(greedy[False], greedy[True])) if on < off]
    off, on = float(np.median(per_token[False])), float(np.median(per_token[True]))
    return {
        "pattern": REPETITION,
        "per_token_s": {"off": off, "on": on},
        "per_token_rounds_s": {"off": per_token[False], "on": per_token[True]},  # in run order (on, off, off, on, ...)
        "cost": on / off - 1.0,
        "cost_rounds": 2 * pairs,
        "replayed_equal": {"equal": equal, "responses": pairs * requests},  # seeded responses stopping where they did
        "sampled_stopped": {"stopped": stopped, "responses": pairs * requests},
        "greedy_responses": len(prompts),
        "looping_responses": len(looping),
        "looping_tokens": {"off": sum(greedy[False][i] for i in looping), "on": sum(greedy[True][i] for i in looping)},
        "all_tokens": {"off": sum(greedy[False]), "on": sum(greedy[True])},
    }


async def calibrate(engine, prompt_ids, sizes=(1, 4, 16, 32), lengths=(4, 36), repeats: int = 3, **sampling) -> dict:
    """Engine costs from ``n`` concurrent requests of ``T`` tokens started on an idle engine (median
    of ``repeats``, after a warm-up): ``t(n, T) = admit(n) + T·step(n)``, two lengths per size
    separate them; then least squares ``step(n) = a + b·n`` (decode step) and ``admit(n) = c + d·n``
    (starting ``n`` requests from idle: input processing and prefill, beyond a decode step)."""
    warm_up = (_generate(engine, prompt_ids, lengths[-1], uuid.uuid4().hex, **sampling) for _ in range(max(sizes)))
    await asyncio.gather(*warm_up)
    times = np.zeros((len(sizes), len(lengths)))
    for i, n in enumerate(sizes):
        for j, tokens in enumerate(lengths):
            runs = []
            for _ in range(repeats):
                start = time.perf_counter()
                await asyncio.gather(
                    *(_generate(engine, prompt_ids, tokens, uuid.uuid4().hex, **sampling) for _ in range(n))
                )
                runs.append(time.perf_counter() - start)
            times[i, j] = float(np.median(runs))
    (short, long_), n = lengths, np.array(sizes, dtype=float)
    step = (times[:, 1] - times[:, 0]) / (long_ - short)
    admit = times[:, 0] - short * step
    b, a = np.polyfit(n, step, 1)
    d, c = np.polyfit(n, admit, 1)
    return {
        "sizes": list(sizes),
        "lengths": list(lengths),
        "step_s": step.tolist(),
        "admit_s": admit.tolist(),
        "step_a": float(max(a, 1e-5)),
        "step_b": float(max(b, 0.0)),
        "admit_a": float(max(c, 0.0)),
        "admit_b": float(max(d, 0.0)),
    }


class _Run:
    def __init__(self, engine, prompt_ids, trace, latency: float) -> None:
        self.engine, self.prompt_ids, self.trace, self.latency = engine, prompt_ids, trace, latency
        self.next_prompt = 0
        self.progress: dict[str, int] = {}  # request id -> tokens generated (aborted ones included)
        self.launched: list[int] = []  # prompt of every group launched, in order
        self.finished_lengths: list[int] = []  # every sample of every group that finished
        self.finished_valid_lengths: list[int] = []  # ... of the valid ones (dynamic sampling keeps)
        self.trained_lengths: list[int] = []
        self.finished_prompts: list[int] = []  # every group that finished (its rewards: the trace's)
        self.trained_prompts: list[int] = []
        self.dropped_tokens = 0  # tokens of the scored groups dynamic sampling drops (no signal)
        self.valid = trace.group_valid()

    def finished(self, prompt: int, lengths) -> None:
        self.finished_lengths += [int(n) for n in lengths]
        self.finished_prompts.append(prompt)
        if self.valid[prompt]:
            self.finished_valid_lengths += [int(n) for n in lengths]

    def scored(self, prompt: int, tokens: int) -> None:
        """A group's reward is in: dynamic sampling drops it unless its rewards are mixed (a group
        stopped before its reward arrived counts as the early stop's waste, as in the simulator)."""
        if not self.valid[prompt]:
            self.dropped_tokens += int(tokens)

    @property
    def generated(self) -> int:
        return sum(self.progress.values())

    def group(self) -> int:
        index = self.next_prompt % self.trace.n_prompts
        self.next_prompt += 1
        self.launched.append(index)
        return index

    def reward_bias(self, valid_only: bool = False) -> float:
        """Trained samples' mean reward ÷ that of the finished samples (of the valid groups only)."""
        finished = [p for p in self.finished_prompts if self.valid[p] or not valid_only]
        return float(self.trace.correct[self.trained_prompts].mean() / self.trace.correct[finished].mean())

    def length_bias_vs_launched_valid(self) -> float:
        """Trained samples' mean length ÷ that of every sample of every valid group launched, at its
        trace length (finished or not): early stopping's own bias, dynamic sampling's left out."""
        valid = [p for p in self.launched if self.valid[p]]
        return float(np.mean(self.trained_lengths) / self.trace.lengths[valid].mean())

    async def run_group(self, prompt: int, ids: list[str]) -> int:
        lengths = self.trace.lengths[prompt]
        done = await asyncio.gather(
            *(_generate(self.engine, self.prompt_ids, n, i, self.progress) for n, i in zip(lengths, ids))
        )
        self.finished(prompt, done)
        return int(sum(done))

    def train(self, prompt: int) -> int:
        self.trained_lengths += [int(n) for n in self.trace.lengths[prompt]]
        self.trained_prompts.append(prompt)
        return int(self.trace.lengths[prompt].sum())


def _raise_failed(tasks) -> None:
    """Raise the exception of the first task that failed (a step must fail, not wait for a group forever)."""
    for task in tasks:
        if task.done() and not task.cancelled() and task.exception() is not None:
            raise task.exception()


async def naive_step(run: _Run, batch: int, round_groups: int) -> dict:
    start, kept, trained = time.perf_counter(), 0, 0
    valid = run.trace.group_valid()
    while kept < batch:
        prompts = [run.group() for _ in range(round_groups)]
        tokens = await asyncio.gather(
            *(run.run_group(p, [uuid.uuid4().hex for _ in range(run.trace.group_size)]) for p in prompts)
        )
        await asyncio.sleep(run.latency)  # rewards of the round, after generation
        for p, n in zip(prompts, tokens):
            run.scored(p, n)
            if valid[p] and kept < batch:
                kept, trained = kept + 1, trained + run.train(p)
    return {"wall_s": time.perf_counter() - start, "trained_tokens": trained}


async def verl_sync_step(run: _Run, batch: int) -> dict:
    """verl 0.9.1's synchronous DAPO (``trainer/ppo/v1/replay_buffer.py``): launch ``batch``
    groups, score each as it finishes, each filtered group adds 2 refill credits (dispatched
    while fewer than ``batch`` groups are in flight); once ``batch`` valid groups are in, drain
    every in-flight request and train the first ``batch`` valid ones in launch order."""
    start = time.perf_counter()
    valid = run.trace.group_valid()
    order: list[int] = []
    done: dict[int, bool] = {}
    pending: set = set()
    credits = batch

    async def one(prompt: int) -> int:
        tokens = await run.run_group(prompt, [uuid.uuid4().hex for _ in range(run.trace.group_size)])
        await asyncio.sleep(run.latency)
        run.scored(prompt, tokens)
        return prompt

    while True:
        while credits > 0 and len(pending) < batch and sum(done.values()) < batch:
            prompt = run.group()
            order.append(prompt)
            pending.add(asyncio.create_task(one(prompt)))
            credits -= 1
        if not pending:
            break
        finished, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
        for task in finished:
            prompt = task.result()
            done[prompt] = bool(valid[prompt])
            credits += 0 if valid[prompt] else 2
        if sum(done.values()) >= batch and pending:
            await asyncio.wait(pending)  # drain: verl waits for every in-flight request
            pending = set()
    trained = sum(run.train(p) for p in [p for p in order if done.get(p)][:batch])
    return {"wall_s": time.perf_counter() - start, "trained_tokens": trained}


async def seamless_step(
    run: _Run,
    batch: int,
    slots: int,
    stats: list[int],
    kept: list[dict] | None = None,
    version: int = 0,
    staleness: int = 0,
    reuse_ratio: float = 0.0,
) -> dict:
    """One step of continuous rollout with FIFO early termination; ``stats`` = [valid, finished]
    groups so far (the live pass-rate statistics, carried across steps).

    ``kept`` (``staleness_colocated``: ``+reasonrl/rollout=staleness`` on one engine, as
    reasonrl's replay buffer runs it): the finished valid groups earlier steps did not train, each
    tagged with the ``version`` (step) that launched it. Those more than ``staleness`` versions
    old are dropped; the oldest ``reuse_ratio·batch`` lead this step's FIFO order as finished valid
    groups, the others wait; the step's finished valid surplus joins them (aborted groups never)."""
    start = time.perf_counter()
    valid = run.trace.group_valid()
    # launch order: prompt, request ids, finish time, valid, tokens, version, launch index
    groups: list[dict] = []
    if kept is not None:  # the stale ones are dropped: neither trained nor carried, so waste
        quota = int(reuse_ratio * batch)
        reused, kept[:], _stale = split_kept(
            kept, version, staleness, quota, itemgetter("version"), itemgetter("launch")
        )
        groups = [{**g, "finish": 0.0} for g in reused]
    wake = asyncio.Event()

    async def one(group: dict) -> None:
        try:
            group["tokens"] = await run.run_group(group["prompt"], group["ids"])
            await asyncio.sleep(run.latency)  # asynchronous reward
            run.scored(group["prompt"], group["tokens"])
            group["finish"], group["valid"] = time.perf_counter() - start, bool(valid[group["prompt"]])
            stats[0] += group["valid"]
            stats[1] += 1
        finally:  # a group that fails wakes the loop too, which then raises its exception
            wake.set()

    tasks: list[asyncio.Task] = []
    while True:
        _raise_failed(tasks)
        finished = [g for g in groups if "finish" in g]
        selected, stop = fifo_early_termination(
            [g.get("finish") for g in groups], [g.get("valid", False) for g in groups], batch
        )
        if selected:
            break
        active = len(groups) - len(finished)
        missing = max(0, batch - sum(g["valid"] for g in finished))  # FIFO may still wait for earlier tasks
        free = slots // run.trace.group_size - active
        for _ in range(tasks_to_launch(missing, active, valid_rate_estimate(*stats), max(free, 0))):
            group = {
                "prompt": run.group(),
                "ids": [uuid.uuid4().hex for _ in range(run.trace.group_size)],
                "version": version,
                "launch": len(run.launched) - 1,  # run.group() above appended it
            }
            groups.append(group)
            tasks.append(asyncio.create_task(one(group)))
        wake.clear()
        await wake.wait()
    in_flight = [i for g in groups if "finish" not in g for i in g["ids"]]
    if in_flight:
        await run.engine.abort(in_flight)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    trained = sum(run.train(groups[i]["prompt"]) for i in selected)
    if kept is not None:  # the finished valid surplus
        chosen = set(selected)
        kept += [g for i, g in enumerate(groups) if i not in chosen and g.get("valid")]
    return {
        "wall_s": time.perf_counter() - start,
        "trained_tokens": int(trained),
        "stop_s": stop,
        "reused_groups": sum(version > groups[i]["version"] for i in selected),
    }


async def partial_step(run: _Run, batch: int, slots: int, budget: int | None, stats: list[int], carry: dict) -> dict:
    """One training step of Kimi's partial rollout (§2.6.2), as the simulator's ``partial`` runs
    it: an iteration lasts at most ``budget`` decode steps, so a request writes at most ``budget``
    tokens in it; saved trajectories continue first (prompt + tokens so far), free slots take new
    groups while the batch is short (``tasks_to_launch`` with no active credit). The iteration
    ends once ``batch`` valid groups are complete, or its decode steps reach ``budget``, or nothing
    is left to do; every request still in flight is then stopped and saved with its tokens (the
    next iteration continues it under the newer policy). An iteration with no complete valid group
    goes on without an update. Trains at most ``batch`` complete valid groups (the rest carry over,
    as do saved trajectories and rewards still in flight: ``carry``).

    Decode steps are counted from the stream: a segment launched when the iteration had run
    ``c`` steps holds ``c + n`` after its ``n``-th token (continuous batching admits a request at
    the next step), the iteration's count is the largest such value. ``budget=None``: verl's
    ``colocate_async`` (no budget: the iteration, and with it the step, ends with its batch)."""
    start = time.perf_counter()
    budget = float("inf") if budget is None else budget
    valid = run.trace.group_valid()
    ready: list[int] = carry.setdefault("ready", [])
    saved: list[dict] = carry.setdefault("saved", [])
    wake = carry.setdefault("wake", asyncio.Event())  # rewards in flight outlive the step ...
    rewards: list = carry.setdefault("rewards", [])  # ... as tasks
    state: dict = {}

    async def reward(group: dict) -> None:
        await asyncio.sleep(run.latency)  # reward once the whole group is complete
        run.finished(group["prompt"], [len(t) for t in group["tokens"]])
        run.scored(group["prompt"], sum(len(t) for t in group["tokens"]))
        stats[0] += bool(valid[group["prompt"]])
        stats[1] += 1
        if valid[group["prompt"]]:
            ready.append(group["prompt"])
        wake.set()

    async def segment(group: dict, sample: int) -> None:
        want = int(run.trace.lengths[group["prompt"]][sample])
        tokens, launched_at, streamed, request_id = group["tokens"][sample], state["clock"], [], uuid.uuid4().hex
        state["requests"].add(request_id)

        def seen(ids) -> None:
            streamed[:] = ids
            state["clock"] = max(state["clock"], launched_at + len(ids))
            if state["clock"] >= budget:
                wake.set()

        try:
            await _token_ids(
                run.engine,
                run.prompt_ids + tokens,
                request_id,
                progress=run.progress,
                on_output=seen,
                temperature=1.0,
                ignore_eos=True,
                max_tokens=int(min(budget, want - len(tokens))),
            )
        finally:  # finished, or stopped at the iteration's end: the tokens it wrote are kept
            tokens += streamed
            state["requests"].discard(request_id)
            wake.set()  # the loop looks once this task yields: after the bookkeeping below, or its exception
        group["open"] -= 1
        state["segments"] -= 1
        if group["open"] == 0:
            state["groups"].pop(id(group))
            if all(len(t) >= int(n) for t, n in zip(group["tokens"], run.trace.lengths[group["prompt"]])):
                rewards.append(asyncio.create_task(reward(group)))
            else:
                saved.append(group)

    def send(group: dict) -> None:
        lengths = run.trace.lengths[group["prompt"]]
        unfinished = [i for i, t in enumerate(group["tokens"]) if len(t) < int(lengths[i])]
        group["open"] = len(unfinished)
        state["segments"] += len(unfinished)
        state["groups"][id(group)] = group
        for i in unfinished:
            state["tasks"].append(asyncio.create_task(segment(group, i)))

    iterations: list[float] = []  # wall time of each iteration (Kimi's unit: at most `budget` steps)
    while True:  # iterations of at most `budget` decode steps
        iteration_start = time.perf_counter()
        state.update(clock=0, segments=0, groups={}, tasks=[], requests=set())
        waiting, saved[:] = list(saved), []
        for group in waiting:  # saved trajectories first
            send(group)
        while True:
            _raise_failed(state["tasks"])
            if len(ready) < batch:
                free = max(0, slots - state["segments"]) // run.trace.group_size
                for _ in range(tasks_to_launch(batch - len(ready), 0, valid_rate_estimate(*stats), free)):
                    send({"prompt": run.group(), "tokens": [[] for _ in range(run.trace.group_size)]})
            idle = state["segments"] == 0 and all(task.done() for task in rewards)
            if len(ready) >= batch or state["clock"] >= budget or idle:
                break
            wake.clear()
            await wake.wait()
        if state["requests"]:  # the iteration is over: in-flight requests stop (one abort call, as
            await run.engine.abort(list(state["requests"]))  # verl's pause does), their tokens kept
        stopped = {task for task in state["tasks"] if not task.done()}
        for task in stopped:
            task.cancel()
        await asyncio.gather(*stopped, return_exceptions=True)
        _raise_failed([task for task in state["tasks"] if task not in stopped])
        saved += state["groups"].values()  # groups with a request stopped midway
        iterations.append(time.perf_counter() - iteration_start)
        if ready:
            break
    rewards[:] = [task for task in rewards if not task.done()]
    trained = ready[:batch]
    del ready[:batch]
    tokens = sum(run.train(prompt) for prompt in trained)
    return {
        "wall_s": time.perf_counter() - start,
        "trained_tokens": int(tokens),
        "trained_groups": len(trained),
        "iterations_s": iterations,
    }


async def run_policy(engine, prompt_ids, trace, policy: str, spec: dict) -> dict:
    """``spec["steps"]`` steps of one policy (one of :data:`REAL_POLICIES`) over ``trace``: each step's
    wall time and tokens trained, the tokens generated and the length and reward biases."""
    run, stats, steps, carry = _Run(engine, prompt_ids, trace, spec["reward_latency"]), [0, 0], [], {}
    batch, slots = spec["batch_groups"], spec["slots"]
    for _ in range(spec["steps"]):
        if policy in ("partial", "colocate_async"):
            budget = spec["token_budget"] if policy == "partial" else None
            steps.append(await partial_step(run, batch, slots, budget, stats, carry))
        elif policy == "naive":
            steps.append(await naive_step(run, batch, batch))
        elif policy == "verl_sync":
            steps.append(await verl_sync_step(run, batch))
        elif policy == "seamless":
            steps.append(await seamless_step(run, batch, slots, stats))
        elif policy == "staleness_colocated":
            kept = carry.setdefault("kept", [])
            knobs = {"staleness": spec["staleness"], "reuse_ratio": spec["reuse_ratio"]}
            steps.append(await seamless_step(run, batch, slots, stats, kept, len(steps), **knobs))
        else:
            raise ValueError(f"unknown policy {policy!r}; one of {REAL_POLICIES}")
    # tokens whose fate is still open (the simulator's pending tokens, left out of its waste): partial
    # rollout's saved trajectories and complete valid groups not trained yet, the kept groups of
    # staleness_colocated; the rewards still in flight land first (the others carry nothing)
    await asyncio.gather(*carry.get("rewards", []))
    pending = sum(len(t) for group in carry.get("saved", []) for t in group["tokens"])
    pending += sum(int(trace.lengths[prompt].sum()) for prompt in carry.get("ready", []))
    pending += sum(int(trace.lengths[group["prompt"]].sum()) for group in carry.get("kept", []))
    return {
        "steps": steps,
        "generated_tokens": run.generated,
        "pending_tokens": int(pending),
        "dropped_tokens": run.dropped_tokens,  # scored groups dynamic sampling drops
        "length_bias": float(np.mean(run.trained_lengths) / np.mean(run.finished_lengths)),
        # early stopping's own share: against the finished samples of valid groups only, and
        # against every sample of the valid groups launched (trace lengths, finished or not)
        "length_bias_valid": float(np.mean(run.trained_lengths) / np.mean(run.finished_valid_lengths)),
        "length_bias_vs_launched_valid": run.length_bias_vs_launched_valid(),
        "reward_bias": run.reward_bias(),
        "reward_bias_valid": run.reward_bias(valid_only=True),
    }


async def main(spec: dict) -> dict:
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.v1.engine.async_llm import AsyncLLM

    engine = AsyncLLM.from_engine_args(
        AsyncEngineArgs(
            model=spec["model"],
            dtype="float32",
            enforce_eager=True,
            max_model_len=MAX_LEN,
            max_num_seqs=spec["slots"],
            seed=0,
            kv_cache_memory_bytes=256 << 20,
        )
    )
    from transformers import AutoTokenizer

    from reasonrl.smoke.arithmetic import make_problems

    tokenizer = AutoTokenizer.from_pretrained(spec["model"])
    prompts = [tokenizer(problem.prompt)["input_ids"] for problem in make_problems(24, seed=0)]
    prompt_ids = prompts[0]
    trace = long_tail_trace(**spec["trace"])
    # the engine's costs drift on two shared cores: calibrated before every policy and after the
    # last, so each policy's prediction uses the calibrations that bracket its own run
    result: dict = {"calibrations": []}
    for policy in REAL_POLICIES:
        result["calibrations"].append(await calibrate(engine, prompt_ids))
        result[policy] = await run_policy(engine, prompt_ids, trace, policy, spec)
    result["calibrations"].append(await calibrate(engine, prompt_ids))
    result["repetition"] = await repetition(engine, prompts)  # on the warm engine
    engine.shutdown()
    return result


if __name__ == "__main__":
    os.environ.setdefault("VERL_PLATFORM", "cpu")
    print(json.dumps(asyncio.run(main(json.loads(sys.argv[1])))))
