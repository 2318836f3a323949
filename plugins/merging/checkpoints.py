"""Merging Hugging Face checkpoints (safetensors) tensor by tensor.

The output mirrors the base's files (same shards, names, dtypes, shapes; its config, tokenizer
and index copied), each tensor computed chunk by chunk from the same chunk of every model and
written at once, so the merge holds a few chunks per model whatever the model's size. Everything is checked before
anything is written (architecture in config.json, tensor names, shapes), and the output is built
in a temporary folder beside the target and renamed into place at the end: a failed merge
writes nothing.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from pathlib import Path

from reasonrl.plugins.merging.fusion import Rule, chunk_bounds
from reasonrl.plugins.merging.safetensors_io import (
    DTYPES,
    SafetensorsFile,
    SafetensorsWriter,
    read_entries,
    read_header,
)

#: config.json keys that must agree for two checkpoints to be one architecture
ARCHITECTURE_KEYS = ("architectures", "model_type")


class MergeError(ValueError):
    """A merge that cannot run; the message names the file, tensor or key."""


def safetensors_files(model: Path) -> list[Path]:
    """The checkpoint's safetensors files (sharded or not)."""
    model = Path(model)
    if not model.is_dir():
        raise MergeError(f"{model}: not a checkpoint folder")
    index = model / "model.safetensors.index.json"
    if index.exists():
        shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        return [model / shard for shard in shards]
    files = sorted(model.glob("*.safetensors"))
    if not files:
        raise MergeError(f"{model}: no *.safetensors file (save the checkpoint with safe_serialization)")
    return files


def architecture(model: Path) -> dict:
    config = Path(model) / "config.json"
    if not config.exists():
        raise MergeError(f"{config}: missing (a Hugging Face checkpoint folder has one)")
    values = json.loads(config.read_text())
    return {key: values.get(key) for key in ARCHITECTURE_KEYS}


class Checkpoint:
    """A checkpoint's tensors by name (headers only; tensors read on demand)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.files = [read_header(file) for file in safetensors_files(self.path)]
        self.where: dict[str, SafetensorsFile] = {}
        for file in self.files:
            for name in file.entries:
                self.where[name] = file

    def shape(self, name: str) -> tuple[int, ...]:
        return self.where[name].entries[name].shape


def check_compatible(base: Checkpoint, others: Sequence[Checkpoint]) -> None:
    """Same architecture (config.json), same tensor names and shapes — else a MergeError naming
    the file and what differs."""
    expected = architecture(base.path)
    for other in others:
        found = architecture(other.path)
        if found != expected:
            raise MergeError(
                f"{other.path / 'config.json'}: architecture {found} differs from the base's {expected} "
                f"({base.path / 'config.json'})"
            )
        missing, extra = sorted(set(base.where) - set(other.where)), sorted(set(other.where) - set(base.where))
        if missing or extra:
            raise MergeError(
                f"{other.path}: tensor names differ from {base.path} (missing {missing[:5]}, extra {extra[:5]})"
            )
        for name in base.where:
            if other.shape(name) != base.shape(name):
                raise MergeError(
                    f"{other.where[name].path}: tensor {name!r} has shape {other.shape(name)}, "
                    f"{base.where[name].path} has {base.shape(name)}"
                )


def _reader(file: SafetensorsFile, name: str, handle):
    return lambda start, stop: read_entries(file, name, start, stop, handle)


def _merge_tensor(rule: Rule, name: str, entry, readers, writer: SafetensorsWriter) -> None:
    """One output tensor, chunk by chunk: a few chunks per model resident, whatever its size."""
    numel = math.prod(entry.shape)
    base, others = readers[0], readers[1:]
    if not DTYPES[entry.dtype].is_floating_point:  # integer buffers: the base's
        for start, stop in chunk_bounds(numel):
            writer.write(name, start, base(start, stop))
        return
    prepared = rule.prepare(name, numel, DTYPES[entry.dtype], base, others)
    for index, (start, stop) in enumerate(chunk_bounds(numel)):
        writer.write(
            name, start, rule.chunk(name, index, base(start, stop), [r(start, stop) for r in others], prepared)
        )


def merge_checkpoints(
    base: Path,
    others: Sequence[Path],
    output: Path,
    rule: Rule,
    progress: Callable[[int, int], None] | None = None,
) -> Path:
    """Stream every tensor of ``base`` and ``others`` through ``rule`` into ``output`` (a new
    folder with the base's layout and non-tensor files)."""
    output = Path(output)
    if output.exists() and any(output.iterdir()):
        raise MergeError(f"{output}: exists and is not empty (choose a new output folder)")
    first = Checkpoint(base)
    rest = [Checkpoint(path) for path in others]
    check_compatible(first, rest)
    staging = output.parent / f".{output.name}.partial-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        for item in first.path.iterdir():  # config, tokenizer, generation config, shard index
            if item.is_file() and item.suffix != ".safetensors":
                shutil.copy2(item, staging / item.name)
        total = len(first.where)
        with ExitStack() as stack:
            handles = {}
            for checkpoint in [first, *rest]:
                for file in checkpoint.files:
                    handles[file.path] = stack.enter_context(open(file.path, "rb"))
            done = 0
            for file in first.files:
                writer = SafetensorsWriter(file, staging / file.path.name)
                for name in sorted(file.entries, key=lambda n: file.entries[n].begin):
                    readers = [_reader(c.where[name], name, handles[c.where[name].path]) for c in [first, *rest]]
                    _merge_tensor(rule, name, file.entries[name], readers, writer)
                    done += 1
                    if progress is not None:
                        progress(done, total)
                writer.close()
        if output.exists():
            output.rmdir()
        staging.rename(output)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return output
