"""verl builds the backend string ``cpu:gloo,<device>:<backend>`` for its process group;
with the ``cpu`` platform that reads ``cpu:gloo,cpu:gloo``, which torch rejects
("Duplicate device type cpu"). On the cpu platform the group is plain ``gloo``.

verl has no extension point for the backend string (it is built inside
``verl.utils.distributed.initialize_global_process_group_ray``), hence this patch. It
changes nothing on any other platform.
"""

from __future__ import annotations

import functools

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

    initialize_global_process_group_ray.__reasonrl_patch__ = PATCH.name
    distributed.initialize_global_process_group_ray = initialize_global_process_group_ray


PATCH = Patch(
    name="verl-cpu-process-group",
    package="verl",
    versions=">=0.9.1,<0.10",
    changes=(
        "verl.utils.distributed.initialize_global_process_group_ray: on the cpu platform, use "
        "backend 'gloo' instead of the invalid 'cpu:gloo,cpu:gloo'; other platforms unchanged. "
        "Applied on `import verl`, before verl's workers import the function."
    ),
    upstream_issue="verl has no CPU device platform (no upstream issue filed yet; see plugins/cpu_platform)",
    apply=_apply,
    trigger="verl",
)
