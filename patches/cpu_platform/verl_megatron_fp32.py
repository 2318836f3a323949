"""verl 0.9.1's ``McoreEngineConfig`` accepts only ``dtype`` bfloat16 or float16
(``verl/workers/config/engine.py:218``). On the cpu platform the Megatron engine computes in
float32, as the FSDP engine and the float32 vLLM rollout there do: megatron's fp32 path
(``FP32Optimizer``, no ``Float16Module``) avoids the mixed-precision optimizer's CUDA-only type
checks, and the rollout's log-probs are those of the same precision. Other dtypes and other
platforms are validated exactly as before.
"""

from __future__ import annotations

import functools
import os

from reasonrl.patching import Patch


def _apply() -> None:
    # verl's config classes are not imported by `import verl` (the trigger): patch on their import.
    from reasonrl.bridges.import_hooks import run_after_import

    run_after_import("verl.workers.config.engine", _allow_float32_on_cpu)


def _allow_float32_on_cpu() -> None:
    from verl.workers.config.engine import McoreEngineConfig

    original = McoreEngineConfig.__post_init__

    @functools.wraps(original)
    def __post_init__(self) -> None:
        if self.dtype != "float32" or os.environ.get("VERL_PLATFORM") != "cpu":
            return original(self)
        # verl's check reads the field; validate everything else as verl does, keep float32.
        object.__setattr__(self, "dtype", "bfloat16")
        try:
            original(self)
        finally:
            object.__setattr__(self, "dtype", "float32")

    if getattr(McoreEngineConfig.__post_init__, "__reasonrl_patch__", None) == PATCH.name:
        return
    __post_init__.__reasonrl_patch__ = PATCH.name
    McoreEngineConfig.__post_init__ = __post_init__


PATCH = Patch(
    name="verl-megatron-fp32-on-cpu",
    package="verl",
    versions=">=0.9.1,<0.10",
    changes=(
        "verl.workers.config.engine.McoreEngineConfig.__post_init__: on the cpu platform (VERL_PLATFORM=cpu) "
        "dtype 'float32' passes the bfloat16/float16 check; every other check and value is unchanged. "
        "Applied on `import verl`, taking effect when verl.workers.config.engine is imported."
    ),
    upstream_issue="",  # none filed
    upstream_problem="verl's Megatron engine config rejects float32 although megatron-core trains in it (FP32Optimizer)",
    apply=_apply,
    # No `when`: verl is often imported before a run's environment (VERL_PLATFORM) is set; the
    # platform is read when a config is validated.
    trigger="verl",
)
