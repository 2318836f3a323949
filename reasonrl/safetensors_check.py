"""A safetensors file's header, validated against the file before any of it is used.

Format: 8-byte little-endian header length, a JSON header ``{name: {dtype, shape,
data_offsets}, "__metadata__": {...}}``, then the tensors' bytes. :func:`read_header` checks it
with safetensors' own rules (:func:`validate_header`): a sane header length, a JSON header, every
tensor's dtype, shape and byte length consistent, the tensors' byte ranges contiguous from 0
without overlap or gap, and the file exactly as long as the last one ends — a truncated or padded
file is refused (:class:`reasonrl.errors.UserError` naming the file and the tensor). Reads only
the header (no torch): the merge engine and the checkpoint checks share it.
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass
from pathlib import Path

from reasonrl.errors import UserError

#: bits per element of every dtype the safetensors format defines (the merge reads DTYPES only)
DTYPE_BITS = {
    "BOOL": 8, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8,
    "I16": 16, "U16": 16, "F16": 16, "BF16": 16,
    "I32": 32, "U32": 32, "F32": 32,
    "I64": 64, "U64": 64, "F64": 64, "C64": 64,
    "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6,
}  # fmt: skip
#: safetensors' own limit on the JSON header (a larger length field means a corrupt file)
MAX_HEADER_BYTES = 100_000_000


@dataclass(frozen=True)
class TensorEntry:
    name: str
    dtype: str
    shape: tuple[int, ...]
    begin: int
    end: int


@dataclass(frozen=True)
class SafetensorsFile:
    path: Path
    header_bytes: bytes  # the JSON header as stored (padding included)
    entries: dict[str, TensorEntry]

    @property
    def data_start(self) -> int:
        return 8 + len(self.header_bytes)


def read_header(path: Path) -> SafetensorsFile:
    """The file's header, validated against the file (:func:`validate_header`) before any use."""
    path = Path(path)
    try:
        size = path.stat().st_size
        with open(path, "rb") as handle:
            prefix = handle.read(8)
            if len(prefix) < 8:
                raise UserError(
                    path, f"truncated: {size} bytes, not even the 8-byte header length of a safetensors file"
                )
            (length,) = struct.unpack("<Q", prefix)
            if length > MAX_HEADER_BYTES:
                raise UserError(
                    path,
                    f"header length {length} bytes is over safetensors' limit of {MAX_HEADER_BYTES}: not a safetensors file",
                )
            if 8 + length > size:
                raise UserError(path, f"truncated: the header ends at byte {8 + length}, the file has {size}")
            header_bytes = handle.read(length)
    except OSError as error:
        raise UserError(path, f"cannot read: {error.strerror or error}") from None
    try:
        header = json.loads(header_bytes)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise UserError(
            path, f"the header is not valid JSON ({error}): not a safetensors file, or a corrupt one"
        ) from None
    entries = validate_header(path, header, size - 8 - length, data_start=8 + length)
    return SafetensorsFile(path, header_bytes, entries)


def _tensor_entry(path: Path, name: str, spec) -> TensorEntry:
    """One header entry, its fields checked and its byte length matched to dtype × shape."""
    if not isinstance(spec, dict) or not {"dtype", "shape", "data_offsets"} <= set(spec):
        raise UserError(path, f"tensor {name!r}: the header entry needs dtype, shape and data_offsets, got {spec!r}")
    dtype, shape, offsets = spec["dtype"], spec["shape"], spec["data_offsets"]
    if dtype not in DTYPE_BITS:
        raise UserError(path, f"tensor {name!r}: unknown dtype {dtype!r} (safetensors has {', '.join(DTYPE_BITS)})")

    def whole(value) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and value >= 0

    if not isinstance(shape, list) or not all(whole(d) for d in shape):
        raise UserError(path, f"tensor {name!r}: shape {shape!r} is not a list of non-negative integers")
    if not isinstance(offsets, list) or len(offsets) != 2 or not all(whole(o) for o in offsets):
        raise UserError(path, f"tensor {name!r}: data_offsets {offsets!r} is not [begin, end] in bytes")
    begin, end = offsets
    if end < begin:
        raise UserError(path, f"tensor {name!r}: data_offsets [{begin}, {end}] end before they begin")
    bits = math.prod(shape) * DTYPE_BITS[dtype]
    if bits % 8 or bits // 8 != end - begin:
        raise UserError(
            path,
            f"tensor {name!r}: dtype {dtype} × shape {list(shape)} is {bits / 8:g} bytes, "
            f"its data_offsets [{begin}, {end}] hold {end - begin}",
        )
    return TensorEntry(name, dtype, tuple(shape), begin, end)


def validate_header(path: Path, header, data_length: int, data_start: int = 0) -> dict[str, TensorEntry]:
    """The tensors of a parsed header, checked as safetensors checks them: each entry's dtype,
    shape and byte length agree; their byte ranges, in offset order, tile the data section from
    byte 0 without gap or overlap; and the data section (``data_length`` bytes, starting at file
    byte ``data_start``) ends exactly where the last tensor does. Else :class:`UserError` naming
    ``path`` and the first tensor at fault."""
    path = Path(path)
    if not isinstance(header, dict):
        raise UserError(path, f"the header is a JSON {type(header).__name__}, not an object of tensors")
    metadata = header.get("__metadata__", {})
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise UserError(path, "__metadata__ must map names to strings")
    entries = {name: _tensor_entry(path, name, spec) for name, spec in header.items() if name != "__metadata__"}
    position, previous = 0, None
    for entry in sorted(entries.values(), key=lambda e: (e.begin, e.end)):
        if entry.begin < position:
            raise UserError(
                path,
                f"tensor {entry.name!r} (bytes [{entry.begin}, {entry.end}]) overlaps tensor {previous!r}, "
                f"which ends at {position}",
            )
        if entry.begin > position:
            raise UserError(
                path,
                f"tensor {entry.name!r} begins at data byte {entry.begin}, {entry.begin - position} bytes after "
                f"the previous tensor ends: safetensors' tensors are contiguous",
            )
        if entry.end > data_length:
            raise UserError(
                path,
                f"truncated: tensor {entry.name!r} ends at byte {data_start + entry.end}, "
                f"the file has {data_start + data_length}",
            )
        position, previous = entry.end, entry.name
    if data_length != position:
        raise UserError(
            path,
            f"{data_length - position} bytes after the last tensor (the file has {data_start + data_length}, "
            f"the tensors end at byte {data_start + position}): not the file its header describes",
        )
    return entries
