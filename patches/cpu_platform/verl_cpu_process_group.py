"""verl builds the backend string ``cpu:gloo,<device>:<backend>`` for its process group;
with the ``cpu`` platform that reads ``cpu:gloo,cpu:gloo``, which torch rejects
("Duplicate device type cpu"). On the cpu platform the group is plain ``gloo``.

verl has no extension point for the backend string (it is built inside
``verl.utils.distributed.initialize_global_process_group_ray`` — Ray workers — and
``initialize_global_process_group`` — torchrun entry points such as ``verl.trainer.sft_trainer``),
hence this patch. It changes nothing on any other platform.
"""

from __future__ import annotations

import functools
import os
from datetime import timedelta

from reasonrl.patching import Patch


def _apply() -> None:
    import verl.utils.distributed as distributed
    from verl.utils.device import get_device_name

    original = distributed.initialize_global_process_group_ray

    @functools.wraps(original)
    def initialize_global_process_group_ray(timeout_second=None, backend=None):
        if backend is None and get_device_name() == "cpu":
            backend = "gloo"
        return original(timeout_second=timeout_second, backend=backend)

    original_torchrun = distributed.initialize_global_process_group

    @functools.wraps(original_torchrun)
    def initialize_global_process_group(timeout_second=36000):
        if get_device_name() != "cpu":
            return original_torchrun(timeout_second=timeout_second)
        import torch.distributed

        torch.distributed.init_process_group(
            backend="gloo",
            timeout=timedelta(seconds=timeout_second),
            init_method=os.environ.get("DIST_INIT_METHOD", None),
        )
        return int(os.environ["LOCAL_RANK"]), int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])

    for patched in (initialize_global_process_group_ray, initialize_global_process_group):
        patched.__reasonrl_patch__ = PATCH.name
    distributed.initialize_global_process_group_ray = initialize_global_process_group_ray
    distributed.initialize_global_process_group = initialize_global_process_group


PATCH = Patch(
    name="verl-cpu-process-group",
    package="verl",
    versions=">=0.9.1,<0.10",
    changes=(
        "verl.utils.distributed.initialize_global_process_group_ray and initialize_global_process_group "
        "(torchrun entry points): on the cpu platform, use backend 'gloo' instead of the invalid "
        "'cpu:gloo,cpu:gloo'; other platforms unchanged. "
        "Applied on `import verl`, before verl's workers import the function."
    ),
    upstream_issue="",  # none filed
    upstream_problem="verl has no CPU device platform (see plugins/cpu_platform)",
    apply=_apply,
    trigger="verl",
)
