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

from reasonrl.errors import UserError
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


class MergeError(UserError, ValueError):
    """A merge that cannot run: ``subject`` is the file, the message names the tensor or key."""

    def __reduce__(self):  # picklable (a worker process may raise it)
        return type(self), (self.subject, self.message)


def safetensors_files(model: Path) -> list[Path]:
    """The checkpoint's safetensors files (sharded or not)."""
    model = Path(model)
    if not model.is_dir():
        raise MergeError(model, "not a checkpoint folder")
    index = model / "model.safetensors.index.json"
    if index.exists():
        shards = sorted(set(index_weight_map(index).values()))
        return [model / shard for shard in shards]
    files = sorted(model.glob("*.safetensors"))
    if not files:
        raise MergeError(model, "no *.safetensors file (save the checkpoint with safe_serialization)")
    return files


def index_weight_map(index: Path) -> dict[str, str]:
    """``weight_map`` (tensor name -> shard file) of a sharded checkpoint's index."""
    try:
        weight_map = json.loads(index.read_text())["weight_map"]
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise MergeError(index, f"not valid JSON ({error})") from None
    except (KeyError, TypeError):
        raise MergeError(index, "has no weight_map (tensor name -> shard file)") from None
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        raise MergeError(index, "weight_map must map tensor names to shard file names")
    return weight_map


def architecture(model: Path) -> dict:
    config = Path(model) / "config.json"
    if not config.exists():
        raise MergeError(config, "missing (a Hugging Face checkpoint folder has one)")
    try:
        values = json.loads(config.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise MergeError(config, f"not valid JSON ({error})") from None
    if not isinstance(values, dict):
        raise MergeError(config, "not a JSON object of model settings")
    return {key: values.get(key) for key in ARCHITECTURE_KEYS}


class Checkpoint:
    """A checkpoint's tensors by name (headers only; tensors read on demand)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.files = [read_header(file) for file in safetensors_files(self.path)]  # each validated
        self.where: dict[str, SafetensorsFile] = {}
        for file in self.files:
            for name, entry in file.entries.items():
                if name in self.where:
                    raise MergeError(file.path, f"tensor {name!r} is also in {self.where[name].path}")
                if entry.dtype not in DTYPES:
                    raise MergeError(
                        file.path,
                        f"tensor {name!r} has dtype {entry.dtype}, which the merge does not read "
                        f"(it reads {', '.join(DTYPES)})",
                    )
                self.where[name] = file
        index = self.path / "model.safetensors.index.json"
        if index.exists():
            listed = index_weight_map(index)
            wrong = sorted(n for n in set(listed) | set(self.where) if n not in self.where or n not in listed
                           or listed[n] != self.where[n].path.name)  # fmt: skip
            if wrong:
                name = wrong[0]
                held = self.where[name].path.name if name in self.where else "no shard"
                raise MergeError(
                    index,
                    f"weight_map puts tensor {name!r} in {listed.get(name, 'no shard')}, {held} holds it "
                    f"({len(wrong)} such tensor(s))",
                )

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
                other.path / "config.json",
                f"architecture {found} differs from the base's {expected} ({base.path / 'config.json'})",
            )
        missing, extra = sorted(set(base.where) - set(other.where)), sorted(set(other.where) - set(base.where))
        if missing or extra:
            raise MergeError(
                other.path, f"tensor names differ from {base.path} (missing {missing[:5]}, extra {extra[:5]})"
            )
        for name in base.where:
            if other.shape(name) != base.shape(name):
                raise MergeError(
                    other.where[name].path,
                    f"tensor {name!r} has shape {other.shape(name)}, {base.where[name].path} has {base.shape(name)}",
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
        raise MergeError(output, "exists and is not empty (choose a new output folder)")
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
