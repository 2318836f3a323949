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
        return _worker_error(error)
    # the TaskRunner's RayTaskError carries the worker's own error as ``cause``
    cause = getattr(error, "cause", None)
    fields = dict(_ACTOR_FIELDS.findall(f"{error}\n{cause or ''}"))
    worker = fields.get("class_name", "").split(".")[-1]
    where = ", ".join(f"{key} {fields[key]}" for key in ("pid", "ip") if key in fields)
    return (
        f"a Ray worker died{f': {worker}' if worker else ''}{f' ({where})' if where else ''} — its process ended (killed, out of "
        "memory, or its node lost); the run stopped. Run the same command to resume from the last checkpoint"
    )


def _worker_error(error: BaseException) -> str | None:
    """A worker's own exception, as Ray hands it to the driver (``RayTaskError``): its type and first
    line, and the remote call it came from."""
    from ray.exceptions import RayTaskError

    if not isinstance(error, RayTaskError):
        return None
    cause = getattr(error, "cause", None)
    if cause is None:
        return None
    message = (str(cause).strip().splitlines() or [""])[0][:200]
    # Ray's traceback text names each remote call it passed through ("ray::Actor.method()"): the last
    # is where the exception was raised
    calls = re.findall(r"ray::([\w.]+)\(\)", str(error))
    where = calls[-1] if calls else "a Ray worker"
    return f"{type(cause).__name__}: {message} (raised in {where}; the traceback is below / in the log)"
