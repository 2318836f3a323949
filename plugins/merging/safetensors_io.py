"""Hugging Face safetensors files read and written one tensor at a time, without mmap.

A merge must never hold a whole model: tensors are read with plain file reads at their offsets
(an mmap'ed file would count every page it touched as resident) and written into a file whose
header is known up front — the output has the base's names, dtypes and shapes, so its header and
data offsets are the base file's own. Format: 8-byte little-endian header length, a JSON header
``{name: {dtype, shape, data_offsets}, "__metadata__": {...}}``, then the tensors' bytes.

Every file is validated before any of it is used (``reasonrl.safetensors_check.read_header``:
a truncated or padded file, or one whose dtype × shape disagrees with its bytes, is refused
naming the file and the tensor), never merged.
"""

from __future__ import annotations

import struct
from pathlib import Path

import torch

from reasonrl.errors import UserError
from reasonrl.safetensors_check import (  # noqa: F401  (re-exported: the merge engine's readers)
    DTYPE_BITS,
    MAX_HEADER_BYTES,
    SafetensorsFile,
    TensorEntry,
    read_header,
    validate_header,
)

DTYPES = {
    "F64": torch.float64,
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "I64": torch.int64,
    "I32": torch.int32,
    "I16": torch.int16,
    "I8": torch.int8,
    "U8": torch.uint8,
    "BOOL": torch.bool,
    "F8_E4M3": torch.float8_e4m3fn,
    "F8_E5M2": torch.float8_e5m2,
}


def element_size(dtype: str) -> int:
    return torch.tensor([], dtype=DTYPES[dtype]).element_size()


def read_entries(file: SafetensorsFile, name: str, start: int, stop: int, handle) -> torch.Tensor:
    """Entries [start, stop) of a tensor, flattened, read into their own buffer (``handle``: an
    open binary file of ``file``)."""
    entry = file.entries[name]
    if entry.dtype not in DTYPES:
        raise ValueError(f"{file.path}: tensor {name!r} has dtype {entry.dtype}, which the merge does not read")
    size = element_size(entry.dtype)
    buffer = bytearray((stop - start) * size)
    if buffer:
        handle.seek(file.data_start + entry.begin + start * size)
        if handle.readinto(buffer) != len(buffer):  # the file shrank after read_header checked it
            raise UserError(file.path, f"truncated while tensor {name!r} was read (the file changed during the merge)")
        return torch.frombuffer(buffer, dtype=DTYPES[entry.dtype])
    return torch.empty(0, dtype=DTYPES[entry.dtype])


class SafetensorsWriter:
    """Writes a file with ``template``'s header (names, dtypes, shapes, offsets); tensors arrive
    in chunks of entries, in any order; :meth:`close` checks that every byte was written."""

    def __init__(self, template: SafetensorsFile, path: Path):
        self.template, self.path = template, Path(path)
        self.handle = open(self.path, "wb")
        self.handle.write(struct.pack("<Q", len(template.header_bytes)))
        self.handle.write(template.header_bytes)
        self.handle.truncate(template.data_start + max((e.end for e in template.entries.values()), default=0))
        self.written = dict.fromkeys(template.entries, 0)

    def write(self, name: str, start: int, chunk: torch.Tensor) -> None:
        entry = self.template.entries[name]
        if DTYPES[entry.dtype] != chunk.dtype:
            raise ValueError(f"{self.path}: tensor {name!r} chunk is {chunk.dtype}, the file holds {entry.dtype}")
        size = element_size(entry.dtype)
        self.handle.seek(self.template.data_start + entry.begin + start * size)
        if chunk.numel():  # the chunk's own bytes, no copy
            self.handle.write(memoryview(chunk.contiguous().reshape(-1).view(torch.uint8).numpy()))
        self.written[name] += chunk.numel() * size

    def close(self) -> None:
        self.handle.close()
        short = [n for n, e in self.template.entries.items() if self.written[n] != e.end - e.begin]
        if short:
            raise ValueError(f"{self.path}: tensors not completely written: {short[:5]}")
