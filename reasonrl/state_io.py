"""Plugin state on disk: nested dicts/lists of numpy arrays and JSON scalars in one ``.npz``
(no pickle), written atomically, with a content digest to compare states exactly.

A file that cannot be read back, or whose bytes differ from the sha256 its checkpoint's
manifest recorded (``reasonrl.checkpoints``), raises :class:`CorruptCheckpoint` naming it.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import zipfile
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from reasonrl.errors import UserError

META = "__meta__"


class CorruptCheckpoint(UserError):
    """A checkpoint file that is missing, cut short or altered: ``subject`` is the file."""

    def __reduce__(self):  # crosses Ray's process boundary (the trainer runs in a Ray actor)
        return type(self), (self.subject, self.message)


def file_sha256(path: str | os.PathLike) -> str:
    """sha256 of the file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as stream:
        while chunk := stream.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``path`` so that it holds either its old bytes or ``data``, never a part: a
    ``.partial`` file beside it, flushed to disk, then renamed over it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    with open(partial, "wb") as stream:
        stream.write(data)
        stream.flush()
        os.fsync(stream.fileno())
    os.replace(partial, path)
    try:  # the rename itself, on filesystems that support a directory fsync
        folder = os.open(path.parent, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(folder)
    except OSError:
        pass
    finally:
        os.close(folder)


def _encode(value: Any, arrays: list) -> Any:
    if isinstance(value, np.ndarray):
        arrays.append(value)
        return {"__array__": len(arrays) - 1}
    if isinstance(value, dict):
        return {"__dict__": {str(k): _encode(value[k], arrays) for k in sorted(value, key=str)}}
    if isinstance(value, (list, tuple)):
        return {"__list__": [_encode(v, arrays) for v in value]}
    if isinstance(value, np.generic):
        return value.item()
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"cannot store {type(value).__name__} in plugin state")


def _decode(value: Any, arrays: dict) -> Any:
    if isinstance(value, dict):
        if "__array__" in value:
            return arrays[f"a{value['__array__']}"]
        if "__dict__" in value:
            return {k: _decode(v, arrays) for k, v in value["__dict__"].items()}
        return [_decode(v, arrays) for v in value["__list__"]]
    return value


def _split(state: dict) -> tuple[str, list[np.ndarray]]:
    arrays: list[np.ndarray] = []
    meta = json.dumps(_encode(state, arrays), sort_keys=True)
    return meta, arrays


def digest(state: dict) -> str:
    """sha256 over the structure, scalars, and every array's dtype, shape and bytes."""
    return _digest(*_split(state))


def _digest(meta: str, arrays: list[np.ndarray]) -> str:
    h = hashlib.sha256(meta.encode())
    for array in arrays:
        array = np.ascontiguousarray(array)
        h.update(f"{array.dtype.str}{array.shape}".encode())
        h.update(array.tobytes())
    return h.hexdigest()


def save_state(path: str | os.PathLike, state: dict) -> str:
    """Write ``state`` to ``path`` (atomically); returns its :func:`digest`."""
    meta, arrays = _split(state)
    buffer = io.BytesIO()
    np.savez(
        buffer, **{META: np.frombuffer(meta.encode(), dtype=np.uint8)}, **{f"a{i}": a for i, a in enumerate(arrays)}
    )
    atomic_write_bytes(path, buffer.getvalue())
    return _digest(meta, arrays)


def load_state(path: str | os.PathLike, sha256: str | None = None) -> dict:
    """The state :func:`save_state` wrote to ``path``. With ``sha256`` (the file's checksum as its
    checkpoint's manifest recorded it) the bytes are checked first; a mismatch, or a file that
    cannot be read (cut short: ``BadZipFile``), raises :class:`CorruptCheckpoint` naming it."""
    if sha256 is not None:
        actual = file_sha256(path)
        if actual != sha256:
            raise CorruptCheckpoint(
                path, f"corrupt checkpoint: checksum mismatch (sha256 {actual[:16]}..., {sha256[:16]}... when saved)"
            )
    try:
        with np.load(path, allow_pickle=False) as stored:
            arrays = {name: stored[name] for name in stored.files if name != META}
            meta = json.loads(stored[META].tobytes().decode())
    except FileNotFoundError:
        raise
    except (zipfile.BadZipFile, zlib.error, OSError, EOFError, ValueError, KeyError) as exc:
        raise CorruptCheckpoint(path, f"corrupt checkpoint: cannot be read ({type(exc).__name__}: {exc})") from exc
    return _decode(meta, arrays)
