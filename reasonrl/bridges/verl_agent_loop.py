"""verl adapter: agent loop ``reasonrl`` — verl's single-turn agent loop with every plugin's
request transforms applied (``reasonrl.request_transforms``).

verl builds one agent-loop instance per request (``AgentLoopWorker._run_agent_loop``), handing
a training batch's fields to ``run(**kwargs)``. This loop takes each transform's declared fields
out of the request, lets the transforms rewrite the sampling parameters in turn, wraps its
``server_manager`` so that the engine call goes through every transform's ``generate``, and
hands verl's ``AgentLoopOutput`` to each transform's ``finish``. With no transform it is verl's
loop unchanged.

Selected with ``actor_rollout_ref.rollout.agent.default_agent_loop=reasonrl`` (the plugins'
option files set it); registered in verl's agent-loop registry when
``verl.experimental.agent_loop`` is imported (the agent-loop workers).
"""

from __future__ import annotations

from typing import Any

from reasonrl.compat.verl import single_turn_agent_loop_base
from reasonrl.request_transforms import (
    AGENT_LOOP,
    RequestContext,
    build_transforms,
    chain_generate,
    transform_factories,
)

SingleTurnAgentLoop = single_turn_agent_loop_base()

#: id(config) -> (config, factories): verl passes each worker's one config object to every request
_FACTORIES: dict[int, tuple[Any, list]] = {}


def factories_for(config: Any) -> list:
    cached = _FACTORIES.get(id(config))
    if cached is None or cached[0] is not config:
        cached = _FACTORIES[id(config)] = (config, transform_factories(config))
    return cached[1]


class _TransformedClient:
    """The loop's LLM client with the engine call wrapped by the request's transforms."""

    def __init__(self, client: Any, transforms: list) -> None:
        self._client = client
        self._generate = chain_generate(transforms, client.generate)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    async def generate(self, **request: Any) -> Any:
        return await self._generate(**request)


class ComposedAgentLoop(SingleTurnAgentLoop):
    """``SingleTurnAgentLoop`` with the run's request transforms, in their order."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        context = RequestContext(config=self.config, response_length=self.response_length, tokenizer=self.tokenizer)
        self.transforms = build_transforms(factories_for(self.config), context)
        if self.transforms:
            self.server_manager = _TransformedClient(self.server_manager, self.transforms)

    async def run(self, sampling_params: dict[str, Any], **kwargs):
        taken = [{name: kwargs.pop(name, None) for name in t.fields} for t in self.transforms]
        for transform, fields in zip(self.transforms, taken):
            sampling_params = transform.sampling_params(dict(sampling_params), fields, dict(kwargs))
        output = await super().run(sampling_params, **kwargs)
        for transform in reversed(self.transforms):
            transform.finish(output)
        return output


def register() -> None:
    """Add the loop to verl's agent-loop registry (idempotent: verl's ``register`` overwrites)."""
    from verl.experimental.agent_loop.agent_loop import register as register_agent_loop

    register_agent_loop(AGENT_LOOP)(ComposedAgentLoop)


register()  # see reasonrl.bridges.import_hooks.register_agent_loop_when_loaded
