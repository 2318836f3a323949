"""Checkpoints a run can trust (issue 42).

verl saves a step as ``<trainer.default_local_dir>/global_step_<n>/`` (``actor/``, ``critic/``,
``data.pt``, ``transfer_queue/`` in its async modes), reasonrl its plugin state beside it
(``reasonrl/*.npz``), and verl writes ``latest_checkpointed_iteration.txt`` last; a launch with
``trainer.resume_mode=auto`` resumes from the step that file names. This module adds:

- a manifest per step, ``global_step_<n>/reasonrl/manifest.json``, written (atomically) by
  reasonrl's trainer right after verl's save: every file of the step folder with its size, and
  the sha256 of its bytes (reasonrl's own files always; the others smallest first within
  :data:`HASH_BUDGET` bytes per step, so that a large model costs at most about a second to hash);
- :func:`verify_step`: the step's files against its manifest (missing, cut short, altered), or,
  for a step without one (saved before manifests existed, with verl's ``async_save``, or stopped
  between verl's tracker and the manifest), a structural check of what can be read cheaply: zip
  files (torch's ``.pt``, ``.npz``) by their central directory, safetensors by their header;
- :func:`prepare_run_folder`, run by ``reasonrl train`` in the driver before anything starts:
  the run folder must be writable, and the step verl would resume from must be intact — else
  the run stops naming the file, and offers the last intact step, which
  ``+reasonrl_resume=last_intact`` takes (verl's ``trainer.resume_mode=resume_path``);
- :func:`after_verl_save`: the manifest, then verl's retention (``trainer.max_actor_ckpt_to_keep``)
  carried over to whole step folders: once verl has removed a step's model checkpoints, the step's
  folder (``data.pt``, ``reasonrl/``) goes too.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import sys
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reasonrl.errors import UserError
from reasonrl.safetensors_check import read_header
from reasonrl.state_io import CorruptCheckpoint, atomic_write_bytes, file_sha256, load_state

#: verl's tracker of the last complete checkpoint, in ``trainer.default_local_dir``
TRACKER = "latest_checkpointed_iteration.txt"
STEP_FOLDER = re.compile(r"global_step_(\d+)")
#: the manifest, relative to a step folder
MANIFEST = "reasonrl/manifest.json"
MANIFEST_FORMAT = 1
#: bytes of verl's files hashed per step (reasonrl's own files are always hashed); larger files
#: are checked by size (and, at verification, structurally)
HASH_BUDGET = 1 << 30
#: verl's model checkpoints in a step folder (``str(Role.Critic)`` is ``critic``)
MODEL_FOLDERS = ("actor", "critic")
#: the top-level override that resumes from the last intact step when the latest is corrupt
RESUME_KEY = "reasonrl_resume"
LAST_INTACT = "last_intact"
ZIP_MAGIC = b"PK\x03\x04"

__all__ = ["CorruptCheckpoint", "Problem", "verify_step", "last_intact", "prepare_run_folder", "after_verl_save"]


@dataclass(frozen=True)
class Problem:
    """Why a step cannot be trusted: the file (or folder) and what is wrong with it."""

    path: Path
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


def step_number(folder: str | os.PathLike) -> int | None:
    match = STEP_FOLDER.fullmatch(Path(folder).name)
    return int(match.group(1)) if match else None


def step_folders(run_dir: str | os.PathLike) -> dict[int, Path]:
    """``{step: folder}`` of every ``global_step_<n>`` folder in the run folder."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        return {}
    found = {}
    for entry in run_dir.iterdir():
        step = step_number(entry)
        if step is not None and entry.is_dir():
            found[step] = entry
    return dict(sorted(found.items()))


# ---------------------------------------------------------------- the manifest
def _files(folder: Path) -> list[Path]:
    """Every regular file in the step folder but the manifest and unfinished ``.partial`` writes."""
    manifest = folder / MANIFEST
    return sorted(
        path
        for path in folder.rglob("*")
        if path.is_file() and not path.is_symlink() and path != manifest and not path.name.endswith(".partial")
    )


def write_manifest(folder: str | os.PathLike, hash_budget: int = HASH_BUDGET) -> Path:
    """Record every file of the step folder (size; sha256 within the budget) in its manifest."""
    folder = Path(folder)
    sized = [(path, path.relative_to(folder).as_posix(), path.stat().st_size) for path in _files(folder)]
    # reasonrl's own files first (always hashed), then verl's smallest first
    sized.sort(key=lambda item: (not item[1].startswith("reasonrl/"), item[2], item[1]))
    files: dict[str, dict[str, Any]] = {}
    for path, relative, size in sized:
        entry: dict[str, Any] = {"size": size}
        if relative.startswith("reasonrl/") or size <= hash_budget:
            entry["sha256"] = file_sha256(path)
            if not relative.startswith("reasonrl/"):
                hash_budget -= size
        files[relative] = entry
    manifest = {"format": MANIFEST_FORMAT, "step": step_number(folder), "files": dict(sorted(files.items()))}
    path = folder / MANIFEST
    atomic_write_bytes(path, (json.dumps(manifest, indent=1) + "\n").encode())
    return path


def read_manifest(folder: str | os.PathLike) -> dict | None:
    """The step's manifest (None when it has none); an unreadable one raises :class:`CorruptCheckpoint`."""
    path = Path(folder) / MANIFEST
    if not path.exists():
        return None
    try:
        manifest = json.loads(path.read_text())
        files = manifest["files"]
        if not isinstance(files, dict) or not all("size" in entry for entry in files.values()):
            raise ValueError("no size per file")
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise CorruptCheckpoint(path, f"corrupt checkpoint: manifest unreadable ({type(exc).__name__}: {exc})") from exc
    return manifest


def recorded_sha256(path: str | os.PathLike) -> str | None:
    """The sha256 the manifest of the step holding ``path`` (``global_step_<n>/reasonrl/<x>.npz``)
    recorded for it, if any."""
    path = Path(path)
    for folder in path.parents:
        if step_number(folder) is not None:
            manifest = read_manifest(folder)
            if manifest is None:
                return None
            return manifest["files"].get(path.relative_to(folder).as_posix(), {}).get("sha256")
    return None


def load_checkpointed_state(path: str | os.PathLike) -> dict:
    """reasonrl state from a checkpoint, checked against its step's manifest."""
    return load_state(path, sha256=recorded_sha256(path))


# ---------------------------------------------------------------- verification
def _structural_problem(path: Path) -> str | None:
    """What is wrong with a file that its bytes show cheaply (no full read of a large file)."""
    try:
        with open(path, "rb") as stream:
            head = stream.read(8)
        if head[:4] == ZIP_MAGIC:  # torch.save's format, numpy's .npz
            with zipfile.ZipFile(path) as archive:  # the central directory, at the end of the file
                if path.suffix == ".npz" and (bad := archive.testzip()) is not None:  # small: every CRC
                    return f"entry {bad} fails its CRC"
        elif path.suffix == ".safetensors":
            try:
                read_header(path)  # the merge engine's validation: length, dtype × shape, offsets
            except UserError as exc:
                return exc.message
        elif path.suffix == ".json":
            json.loads(path.read_text())
    except (zipfile.BadZipFile, zlib.error, OSError, EOFError, ValueError, KeyError, TypeError, struct.error) as exc:
        return f"cannot be read ({type(exc).__name__}: {exc})"
    return None


def verify_step(folder: str | os.PathLike) -> Problem | None:
    """The first problem of the step folder verl would resume from, or None when it is intact."""
    folder = Path(folder)
    if not folder.is_dir():
        return Problem(folder, "missing")
    try:
        manifest = read_manifest(folder)
    except CorruptCheckpoint as exc:
        return Problem(Path(exc.subject), exc.message.removeprefix("corrupt checkpoint: "))
    actor = folder / "actor"
    if not actor.is_dir() or not any(actor.iterdir()):
        return Problem(actor, "missing (verl's actor checkpoint)")
    if manifest is None:
        for path in _files(folder):
            if reason := _structural_problem(path):
                return Problem(path, reason)
        return None
    for relative, entry in manifest["files"].items():
        path = folder / relative
        if not path.is_file():
            return Problem(path, "missing (listed in the step's manifest)")
        size = path.stat().st_size
        if size != entry["size"]:
            return Problem(path, f"{size} bytes, {entry['size']} when saved (cut short or overwritten)")
        recorded = entry.get("sha256")
        if recorded is None:
            if reason := _structural_problem(path):
                return Problem(path, reason)
        elif (actual := file_sha256(path)) != recorded:
            return Problem(path, f"checksum mismatch (sha256 {actual[:16]}..., {recorded[:16]}... when saved)")
    return None


def last_intact(run_dir: str | os.PathLike, below: int | None = None) -> Path | None:
    """The newest intact step folder (below step ``below``, if given)."""
    for step, folder in sorted(step_folders(run_dir).items(), reverse=True):
        if (below is None or step < below) and verify_step(folder) is None:
            return folder
    return None


def tracked_step(run_dir: str | os.PathLike) -> tuple[Path | None, Problem | None]:
    """(the step folder verl's tracker names, a problem with the tracker itself)."""
    tracker = Path(run_dir) / TRACKER
    if not tracker.exists():
        return None, None
    try:
        step = int(tracker.read_text().strip())
    except (OSError, ValueError) as exc:
        return None, Problem(tracker, f"unreadable ({type(exc).__name__}: {exc})")
    return Path(run_dir) / f"global_step_{step}", None


@dataclass(frozen=True)
class CheckpointStatus:
    """What the end-of-run summary says about the run folder's checkpoints."""

    intact: Path | None  # the newest step one can resume from
    latest: Path | None  # the step verl's tracker names
    problem: Problem | None  # why ``latest`` is not intact

    def line(self) -> str:
        if self.latest is None and self.problem is None:
            return "none"
        if self.problem is None:
            return str(self.latest)
        name = self.latest.name if self.latest is not None else TRACKER
        found = str(self.intact) if self.intact is not None else "none intact"
        return f"{found} ({name} is corrupt: {self.problem})"


def checkpoint_status(run_dir: str | os.PathLike) -> CheckpointStatus:
    latest, problem = tracked_step(run_dir)
    if latest is None and problem is None:
        return CheckpointStatus(None, None, None)
    if problem is None:
        problem = verify_step(latest)
        if problem is None:
            return CheckpointStatus(latest, latest, None)
    below = step_number(latest) if latest is not None else None
    return CheckpointStatus(last_intact(run_dir, below=below), latest, problem)


# ---------------------------------------------------------------- start-up, in the driver
def check_writable(run_dir: str | os.PathLike) -> None:
    """Create the run folder and write and delete a file in it; a UserError if that fails."""
    probe = Path(run_dir) / f".reasonrl-write-probe-{os.getpid()}"
    try:
        Path(run_dir).mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise UserError(
            "trainer.default_local_dir",
            f"{run_dir} cannot be written: {exc.strerror or exc} (checkpoints and metrics go there)",
        ) from exc


def resume_choice(config: Any) -> str | None:
    """``+reasonrl_resume=last_intact`` (or nothing)."""
    value = config.get(RESUME_KEY) if hasattr(config, "get") else None
    if value in (None, ""):
        return None
    if str(value) != LAST_INTACT:
        raise UserError(RESUME_KEY, f"unknown value {value!r}: the one value is {LAST_INTACT}")
    return LAST_INTACT


def resume_target(config: Any, run_dir: Path) -> tuple[Path | None, Problem | None]:
    """(the step folder verl will resume from, a problem found on the way) as verl 0.9's
    ``_load_checkpoint`` finds it: nothing with ``resume_mode=disable``, ``resume_from_path``
    with ``resume_path`` (relative to the working directory), else the tracker's step."""
    mode = str(config.trainer.get("resume_mode", "auto"))
    if mode == "disable":
        return None, None
    if mode == "resume_path":
        return Path(os.path.abspath(str(config.trainer.resume_from_path))), None
    return tracked_step(run_dir)


def prepare_run_folder(config: Any, out=None) -> None:
    """Before Ray starts: the run folder is writable, and the step verl would resume from is
    intact. A corrupt step stops the launch with a :class:`CorruptCheckpoint` naming the file and
    offering the last intact step; with ``+reasonrl_resume=last_intact`` the launch resumes from it
    instead (``trainer.resume_mode=resume_path``, ``trainer.resume_from_path=<its folder>``: verl's
    own way to resume from a given step; nothing on disk is changed or deleted by the choice, and
    reasonrl's trainer replaces the corrupt folder when it saves that step again)."""
    from omegaconf import open_dict

    out = out or sys.stderr
    run_dir = Path(os.path.abspath(os.path.expanduser(str(config.trainer.default_local_dir))))
    check_writable(run_dir)
    choice = resume_choice(config)
    target, problem = resume_target(config, run_dir)
    if target is None and problem is None:
        return
    problem = problem or verify_step(target)
    if problem is None:
        how = "against its manifest" if read_manifest(target) is not None else "structurally (it has no manifest)"
        print(f"[reasonrl] resuming from {target} (its files checked {how})", file=out, flush=True)
        return
    below = step_number(target) if target is not None else None
    intact = last_intact(run_dir, below=below)
    if choice == LAST_INTACT and intact is not None:
        with open_dict(config):
            config.trainer.resume_mode = "resume_path"
            config.trainer.resume_from_path = str(intact)
        print(
            f"[reasonrl] {problem.path}: corrupt checkpoint: {problem.reason}\n"
            f"[reasonrl] resuming from the last intact step, {intact} ({RESUME_KEY}={LAST_INTACT})",
            file=out,
            flush=True,
        )
        return
    if intact is not None:
        advice = (
            f"{intact.name} is intact: rerun with +{RESUME_KEY}={LAST_INTACT} "
            f"(or trainer.resume_mode=resume_path trainer.resume_from_path={intact})"
        )
    else:
        advice = (
            f"no earlier intact step in {run_dir}: rerun with trainer.resume_mode=disable to start over "
            "(or another trainer.default_local_dir)"
        )
    raise CorruptCheckpoint(problem.path, f"corrupt checkpoint: {problem.reason}. {advice}")


# ---------------------------------------------------------------- in the trainer, around verl's save
def before_verl_save(folder: str | os.PathLike, out=None) -> None:
    """A folder of this step left by an earlier launch (a corrupt step resumed past, or a run
    resumed from an earlier step) is removed before the step is saved again: the new save's
    folder then holds its own files only, and no older manifest describes it."""
    folder = Path(folder)
    if folder.exists():
        print(f"[reasonrl] {folder}: left by an earlier launch; replaced by this save", file=out or sys.stdout)
        shutil.rmtree(folder)


def retention_configured(config: Any) -> bool:
    trainer = config.trainer
    keeps = [trainer.get("max_actor_ckpt_to_keep"), trainer.get("max_critic_ckpt_to_keep")]
    return bool(trainer.get("remove_previous_ckpt_in_save", False)) or any(
        isinstance(k, int) and not isinstance(k, bool) and k > 0 for k in keeps
    )


def remove_retired_steps(run_dir: str | os.PathLike, step: int) -> list[Path]:
    """Step folders before ``step`` whose model checkpoints verl's retention removed: removed
    whole (their ``data.pt`` and reasonrl state cannot resume anything without them)."""
    removed = []
    for earlier, folder in step_folders(run_dir).items():
        if earlier < step and not any((folder / name).exists() for name in MODEL_FOLDERS):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed


def after_verl_save(config: Any, step: int, out=None) -> None:
    """Right after verl saved ``step``: its manifest (not with verl's ``async_save``, whose files
    are still being written), then verl's retention carried over to whole step folders."""
    out = out or sys.stdout
    run_dir = Path(str(config.trainer.default_local_dir))
    folder = run_dir / f"global_step_{step}"
    actor_checkpoint = config.actor_rollout_ref.actor.get("checkpoint", {}) or {}
    if not actor_checkpoint.get("async_save", False):
        write_manifest(folder)
    if retention_configured(config):
        removed = remove_retired_steps(run_dir, step)
        if removed:
            names = ", ".join(path.name for path in removed)
            print(f"[reasonrl] removed {names}: verl's retention removed their model checkpoints", file=out)
