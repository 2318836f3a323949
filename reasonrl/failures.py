"""What stopped a failed launch, in one line for the console summary.

A worker process that dies (killed, out of memory, its node gone) reaches the driver as Ray's
``RayActorError`` wrapped in the TaskRunner's ``RayTaskError``, with the dead actor's class, pid
and node in its message: the summary names them and says how to go on, instead of leaving the
cause below a page of traceback.
"""

from __future__ import annotations

import re

#: ``field: value`` lines of Ray's actor-death message.
_ACTOR_FIELDS = re.compile(r"^\s*(class_name|pid|ip|name): (\S+)\s*$", re.MULTILINE)


def ray_failure(error: BaseException) -> str | None:
    """One line naming the Ray worker or node whose loss stopped the run, or None for other errors."""
    try:
        from ray.exceptions import NodeDiedError, RayActorError
    except ImportError:
        return None
    if isinstance(error, NodeDiedError):
        return (
            f"a Ray node was lost ({error}); the run stopped. Run the same command to resume from the last checkpoint"
        )
    if not isinstance(error, RayActorError):
        return None
    # the TaskRunner's RayTaskError carries the worker's own error as ``cause``
    cause = getattr(error, "cause", None)
    fields = dict(_ACTOR_FIELDS.findall(f"{error}\n{cause or ''}"))
    worker = fields.get("class_name", "").split(".")[-1]
    where = ", ".join(f"{key} {fields[key]}" for key in ("pid", "ip") if key in fields)
    return (
        f"a Ray worker died{f': {worker}' if worker else ''}{f' ({where})' if where else ''} — its process ended (killed, out of "
        "memory, or its node lost); the run stopped. Run the same command to resume from the last checkpoint"
    )
