"""mbridge 0.15.1 receives pipeline-parallel weights into ``torch.cuda.current_device()``
(``mbridge/core/util.py:323``, ``broadcast_from_megatron_pp``: every weight export with PP > 1)
and moves MoE expert biases there (``mbridge/core/bridge.py:321``). On the cpu platform both
belong in host memory: the two modules get the ``torch`` of ``megatron-core-host-device``.
"""

from __future__ import annotations

from reasonrl.patches.cpu_platform.megatron_host_device import needed_on_host, use_host_torch
from reasonrl.patching import Patch

#: mbridge modules whose ``torch`` maps CUDA to the host (the sites are in the docstring).
HOST_DEVICE_MODULES = ("mbridge.core.util", "mbridge.core.bridge")


def _apply() -> None:
    use_host_torch(HOST_DEVICE_MODULES)


PATCH = Patch(
    name="mbridge-host-device",
    package="mbridge",
    versions=">=0.15.1,<0.16",
    changes=(
        "mbridge.core.util and mbridge.core.bridge: the module's `torch` maps torch.cuda.current_device() to the "
        "host (pipeline-parallel weight export, MoE expert biases). Applied by reasonrl's CPU Megatron engine "
        "when it is built (VERL_PLATFORM=cpu)."
    ),
    upstream_issue="",  # none filed
    upstream_problem="mbridge hard-codes CUDA as the device of weights received from other pipeline stages",
    apply=_apply,
    trigger="manual",
    when=needed_on_host,
)
