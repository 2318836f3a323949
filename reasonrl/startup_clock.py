"""Where a launch's start-up goes: when each part of ``reasonrl train`` ended, until the first
training step begins (issue 48).

The driver marks its parts (Python and reasonrl imported, config composed and checked, Hydra, the
preset's assets, ``import verl``, Ray started); verl's TaskRunner marks the trainer's (workers
spawned, actor model and reward workers, vLLM servers, checkpoint engine and load, reasonrl's
callbacks, agent-loop workers, validation before training, first step). Each mark is one JSON
line appended to the launch's record, ``<run dir>/startup/<launch>.jsonl``, whose path every
process of the run finds in :data:`RECORD_ENV` (Ray passes the driver's environment on). A part's
time is its mark minus the one before, so the parts add up to the whole start-up.

``reasonrl bench overhead --startup`` prints the table; the launch summary prints the total.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: the path of this launch's record, for every process of the run
RECORD_ENV = "REASONRL_STARTUP_RECORD"
#: the mark every record starts from: the driver process's creation time
LAUNCHED = "launched"
#: the last mark of a start-up (``ReasonrlTrainerMixin.on_train_begin``)
FIRST_STEP = "first step begins"

_pending: list[dict] = []  # the driver's marks before the run folder, and so the record, is known
_record: Path | None = None  # the driver's record (Ray's processes find theirs in RECORD_ENV)


def process_started() -> float:
    """This process's creation time (seconds since the epoch): the start of its launch."""
    import psutil

    return psutil.Process().create_time()


def mark(part: str, at: float | None = None) -> None:
    """Record that ``part`` of the start-up ended now (or at ``at``). In the driver before
    :func:`start_record` the mark waits for it; in a process without a record it is dropped
    (a trainer not started by ``reasonrl train``)."""
    entry = {"part": part, "time": time.time() if at is None else at, "pid": os.getpid()}
    path = _record or os.environ.get(RECORD_ENV)
    if path is None:
        _pending.append(entry)
        del _pending[:-64]  # a process that never starts a record keeps only a few
        return
    _append(Path(path), [entry])


def _append(path: Path, entries: list[dict]) -> None:
    # one short line per write: the driver and the TaskRunner may append at the same time
    try:
        with open(path, "a") as record:
            record.writelines(json.dumps(entry) + "\n" for entry in entries)
    except OSError as error:  # a timing record must not stop a run; say that it is incomplete
        print(f"reasonrl: start-up record {path}: {error}", file=sys.stderr, flush=True)


def start_record(path: Path, config: Any) -> Path:
    """Open this launch's record at ``path`` (the driver, once the run folder is known): write the
    marks made so far, from the process's creation on, and hand the path to every process of
    the run through the config's Ray runtime environment."""
    from omegaconf import OmegaConf

    global _record
    path.parent.mkdir(parents=True, exist_ok=True)
    _record = path
    OmegaConf.update(config, f"ray_kwargs.ray_init.runtime_env.env_vars.{RECORD_ENV}", str(path), force_add=True)
    _append(path, [{"part": LAUNCHED, "time": process_started(), "pid": os.getpid()}, *_pending])
    _pending.clear()
    return path


@contextlib.contextmanager
def marks_ray_start():
    """Within the block, mark "Ray started" when ``ray.init`` returns (verl's main body calls it
    through the ``ray`` module)."""
    try:
        import ray
    except ImportError:
        yield
        return
    original = ray.init

    @functools.wraps(original)
    def init(*args, **kwargs):
        try:
            return original(*args, **kwargs)
        finally:
            mark("Ray started")

    ray.init = init
    try:
        yield
    finally:
        ray.init = original


@dataclass(frozen=True)
class Part:
    name: str
    seconds: float


def read_parts(path: Path) -> list[Part]:
    """The record's parts in time order, each with the seconds since the mark before it."""
    entries = sorted(
        (json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()), key=lambda e: e["time"]
    )
    return [Part(entry["part"], entry["time"] - before["time"]) for before, entry in zip(entries, entries[1:])]


def until_first_step(parts: list[Part]) -> float | None:
    """Seconds from the launch to its first training step, or None if it did not get there."""
    names = [part.name for part in parts]
    if FIRST_STEP not in names:
        return None
    return sum(part.seconds for part in parts[: names.index(FIRST_STEP) + 1])


def latest_record(run_dir: Path) -> Path | None:
    """The newest launch's record in a run folder."""
    records = sorted((Path(run_dir) / "startup").glob("*.jsonl"))
    return records[-1] if records else None


def record_path() -> Path | None:
    """This driver's record, once :func:`start_record` opened it."""
    return _record


def summary_line(path: Path | None) -> str | None:
    """The launch summary's start-up line: the seconds to the first step and the longest part."""
    if path is None or not Path(path).exists():
        return None
    parts = read_parts(path)
    total = until_first_step(parts)
    if total is None:
        return None
    longest = max(parts, key=lambda part: part.seconds)
    return (
        f"  start-up          {total:.0f} s to the first step, longest part: {longest.name} {longest.seconds:.0f} s "
        f"(reasonrl bench overhead --startup {Path(path).parent.parent})"
    )
