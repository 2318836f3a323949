"""A training or validation batch through verl's own agent-loop worker code, without Ray or vLLM.

``AgentLoopWorkerTQ.generate_sequences`` and ``AgentLoopWorker._run_agent_loop`` run as verl
runs them (the agent-loop registry, hydra instantiation, the batch's fields handed to
``run(**kwargs)``); only the LLM client is a :class:`ScriptedServer` that records each request.
For plugin tests of request transforms (reasonrl's agent loop ``reasonrl``).
"""

from __future__ import annotations

import asyncio
import types
from typing import Any

import numpy as np


class ScriptedServer:
    """verl's ``LLMServerClient.generate`` signature: answers each request with ``reply(request)``
    tokens (by default as many 7s as ``max_tokens`` allows, else 40) and records the requests."""

    def __init__(self, reply=None) -> None:
        self.requests: list[dict] = []
        self.reply = reply or (lambda request: [7] * int(request["sampling_params"].get("max_tokens", 40)))

    async def generate(self, request_id, *, prompt_ids, sampling_params, **kwargs):
        from verl.workers.rollout.replica import TokenOutput

        request = {"prompt_ids": list(prompt_ids), "sampling_params": dict(sampling_params)}
        self.requests.append(request)
        tokens = list(self.reply(request))
        return TokenOutput(token_ids=tokens, log_probs=[0.0] * len(tokens), stop_reason="completed")


def _unwrapped(method):
    """Ray wraps actor methods for tracing; the plain function underneath."""
    return getattr(method, "__wrapped__", method)


def run_batch(
    config: Any,
    fields: dict[str, Any],
    *,
    validate: bool = False,
    prompts: int = 4,
    n: int = 1,
    global_steps: int = 3,
    server: ScriptedServer | None = None,
) -> tuple[ScriptedServer, list]:
    """``prompts`` prompts (``n`` responses each) with batch-level ``fields`` (what trainer
    callbacks' ``batch_fields`` put there) through verl's agent-loop worker; returns the server
    (its requests) and every ``AgentLoopOutput``."""
    import verl  # noqa: F401  (reasonrl's verl bridge: registrations wait for the agent-loop package)
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
    from verl.trainer.ppo.v1.agent_loop_tq import AgentLoopWorkerTQ
    from verl.utils import tensordict_utils as tu
    from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn

    from reasonrl.smoke.tokenizer import build_tokenizer

    rows = [
        {"raw_prompt": [{"role": "user", "content": f"{i}+1="}], "index": i, "data_source": "sum"}
        for i in range(prompts)
    ]
    batch_dict = collate_fn(rows)
    batch_dict["uid"] = np.array([f"u{i}" for i in range(prompts)], dtype=object)
    batch = tu.get_tensordict(batch_dict)
    tu.assign_non_tensor_data(batch, "global_steps", global_steps)
    if validate:
        tu.assign_non_tensor_data(batch, "validate", True)  # as verl's _validate does
    for key, value in fields.items():
        tu.assign_non_tensor_data(batch, key, value)

    server, outputs = server or ScriptedServer(), []

    async def postprocess(output, validate, **kwargs):
        outputs.append(output)

    async def main():
        worker = types.SimpleNamespace(
            config=config,
            background_tasks=set(),
            llm_client=server,
            tokenizer=build_tokenizer(),
            processor=None,
            hf_model_type=None,
            dataset_cls=RLHFDataset,
            tools=[],
            _agent_loop_postprocess=postprocess,
        )
        run_agent_loop = _unwrapped(AgentLoopWorker._run_agent_loop)

        async def run_prompt(prompt, sampling_params, trajectory, trace=False):
            # verl's _run_prompt without its TransferQueue status writes: n sessions per prompt
            for session in range(n):
                await run_agent_loop(
                    worker, dict(sampling_params), trajectory=trajectory, trace=False, session_id=session, **prompt
                )

        worker._run_prompt = run_prompt
        for chunk in batch.chunk(2):  # as AgentLoopManagerTQ splits a batch over its workers
            await _unwrapped(AgentLoopWorkerTQ.generate_sequences)(worker, chunk)
        while worker.background_tasks:
            await asyncio.gather(*list(worker.background_tasks))

    asyncio.run(main())
    return server, outputs
