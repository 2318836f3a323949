"""Plugin state on disk: nested dicts/lists of numpy arrays and JSON scalars in one ``.npz``
(no pickle), written atomically, with a content digest to compare states exactly."""

from __future__ import annotations

import hashlib
import io
import json
import os
from pathlib import Path
from typing import Any

import numpy as np

META = "__meta__"


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
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_bytes(buffer.getvalue())
    os.replace(partial, path)
    return _digest(meta, arrays)


def load_state(path: str | os.PathLike) -> dict:
    with np.load(path, allow_pickle=False) as stored:
        arrays = {name: stored[name] for name in stored.files if name != META}
        meta = json.loads(stored[META].tobytes().decode())
    return _decode(meta, arrays)
