"""Request transforms: how several plugins shape the same generation request.

reasonrl has one agent loop, ``reasonrl`` (verl's single-turn loop; the adapter is
``bridges/verl_agent_loop.py``). A plugin does not subclass it: it offers
:class:`RequestTransform` factories through the hook ``reasonrl_request_transforms(config)``,
and the loop builds one transform of each per request and applies them all, in ``order``:

1. :meth:`RequestTransform.sampling_params` — each in turn rewrites the request's sampling
   parameters (a length cap, an engine option) from the batch fields it declared in ``fields``;
2. :meth:`RequestTransform.generate` — wrapped around the engine call, the lowest ``order``
   outermost (a budgeted continuation inside, a stop-reason recorder around it);
3. :meth:`RequestTransform.finish` — on the loop's output, the highest ``order`` first.

So the length curriculum's cap, repeat detection and partial rollout's budget compose in one
request instead of excluding each other as separate loops would. Framework-free: nothing here
imports verl or vLLM.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Awaitable, Callable

#: verl's agent-loop registry name of reasonrl's one composable loop (the options select it)
AGENT_LOOP = "reasonrl"


@dataclass(frozen=True)
class RequestContext:
    """What a transform may need to know about the loop that runs the request."""

    config: Any  # the run's config (verl's trainer config, reasonrl's section included)
    response_length: int  # verl's configured response length (the request's hard bound)
    tokenizer: Any = None


class RequestTransform:
    """One plugin's part of one request. Every method defaults to leaving the request alone;
    every method takes ``**kwargs`` so a later loop may pass more."""

    #: lower runs first in ``sampling_params`` and wraps the higher ones' ``generate``
    order: int = 100
    #: the batch fields this transform reads; the loop takes them out of the request (None when a
    #: batch does not carry them, e.g. validation) so verl's loop never sees them
    fields: tuple[str, ...] = ()

    def sampling_params(self, params: dict[str, Any], fields: dict[str, Any], request: dict[str, Any], **kwargs: Any):
        """The request's sampling parameters after this transform (``request``: the rest of the
        request's fields, e.g. verl's ``session_id``/``global_steps``/``uid``; read only)."""
        return params

    async def generate(self, call_next: Callable[..., Awaitable[Any]], **request: Any) -> Any:
        """Around the engine call: ``await call_next(**request)`` is the next transform's (last,
        verl's LLM client); ``request`` holds ``prompt_ids`` and ``sampling_params``."""
        return await call_next(**request)

    def finish(self, output: Any, **kwargs: Any) -> None:
        """The loop's output (verl's ``AgentLoopOutput``) before it goes back to verl."""


#: a plugin's factory: the transform for one request, or None when it has nothing to do in this run
RequestTransformFactory = Callable[[RequestContext], "RequestTransform | None"]


def transform_factories(config: Any) -> list[tuple[str, RequestTransformFactory]]:
    """``(plugin, factory)`` of every transform the installed plugins offer for this run."""
    from reasonrl.manager import call_each

    return [
        (plugin, factory)
        for plugin, offered in call_each("reasonrl_request_transforms", config=config)
        for factory in offered
    ]


def build_transforms(factories: list[tuple[str, RequestTransformFactory]], context: RequestContext) -> list:
    """One request's transforms, in ``order`` (ties: plugin order); a factory that builds anything
    but a :class:`RequestTransform` is refused naming its plugin."""
    built = []
    for plugin, factory in factories:
        transform = factory(context)
        if transform is None:
            continue
        if not isinstance(transform, RequestTransform):
            raise TypeError(
                f"plugin {plugin!r}: request transform factory built a {type(transform).__name__}, not a "
                "reasonrl.request_transforms.RequestTransform"
            )
        built.append(transform)
    return sorted(built, key=lambda transform: transform.order)


def chain_generate(transforms: list[RequestTransform], engine: Callable[..., Awaitable[Any]]):
    """The engine call wrapped by every transform's ``generate``, the first transform outermost."""
    call = engine
    for transform in reversed(transforms):
        call = _wrapped(transform, call)
    return call


def _wrapped(transform: RequestTransform, call_next: Callable[..., Awaitable[Any]]):
    async def call(**request: Any) -> Any:
        return await transform.generate(call_next, **request)

    return call
