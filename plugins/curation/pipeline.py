"""Runs curation stages over a data set, streamed and resumable by stage, with a data card.

    out/rows.jsonl                     the source's rows, mapped to reasonrl's row keys
    out/stages/NN_<stage>.jsonl        the rows each stage keeps
    out/stages/NN_<stage>.drops.jsonl  the rows it drops, each with its reason
    out/card.json, out/card.md         per stage: rows in, rows out, drops by reason
    out/train.parquet                  verl's columns (what the recipes read)

A stage whose card entry matches (same settings, same stages before it) is not run again: a
run stopped with Ctrl-C resumes at the stage it was in. Each file is written under a ``.partial``
name and renamed when complete.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from reasonrl.plugins.curation.stage import CurationError, Drop, Row, Stage

#: reasonrl's row keys; ``fields`` maps the source's columns onto them (question and answer needed)
ROW_KEYS = ("id", "question", "answer", "tests", "solutions", "pass_rate", "ability", "data_source")
BATCH = 64


BUILDERS = {".jsonl": "json", ".json": "json", ".parquet": "parquet", ".csv": "csv"}


def stream(source: str | Path) -> Iterator[dict]:
    """Records as they are, streamed by Hugging Face ``datasets``: a local .jsonl/.json/.parquet/.csv
    file or folder of them, or a Hub data set name."""
    from datasets import load_dataset

    path = Path(source)
    if path.exists():
        files = sorted(p for p in path.iterdir() if p.suffix in BUILDERS) if path.is_dir() else [path]
        if not files or files[0].suffix not in BUILDERS:
            raise CurationError(f"{source}: no .jsonl/.json/.parquet/.csv file")
        data = load_dataset(
            BUILDERS[files[0].suffix], data_files=[str(p) for p in files], split="train", streaming=True
        )
    else:
        data = load_dataset(str(source), split="train", streaming=True)
    yield from data


def source_rows(source: str | Path, fields: dict[str, str]) -> Iterator[Row]:
    """The source's rows mapped through ``fields`` (row key → column); ``id`` is the row's
    position unless mapped."""
    missing = {"question", "answer"} - set(fields)
    if missing:
        raise CurationError(f"fields: map {sorted(missing)} to the source's columns")
    unknown = set(fields) - set(ROW_KEYS)
    if unknown:
        raise CurationError(f"fields: unknown row key(s) {sorted(unknown)}; known: {list(ROW_KEYS)}")
    for index, record in enumerate(stream(source)):
        row: Row = {"id": str(index)}
        for key, column in fields.items():
            if column not in record:
                raise CurationError(
                    f"{source}: row {index} has no column {column!r} (fields.{key}); columns: {sorted(record)}"
                )
            row[key] = record[column]
        row["id"] = str(row["id"])
        yield row


def _read_jsonl(path: Path) -> Iterator[Row]:
    with open(path) as handle:
        for line in handle:
            yield json.loads(line)


def _write_atomic(path: Path, text: str) -> None:
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text)
    os.replace(partial, path)


def _digest(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


class Curation:
    """``stages`` over ``source`` into ``out`` (see the module's docstring)."""

    def __init__(self, source: str | Path, fields: dict[str, str], stages: list[Stage], out: Path, progress=None):
        self.source, self.fields, self.stages, self.out = str(source), dict(fields), stages, Path(out)
        self.progress: Callable[[Iterable, str, int | None], Iterable] = progress or (lambda rows, _name, _n: rows)
        self.card_path = self.out / "card.json"

    def run(self, output: dict | None = None) -> dict:
        self.out.mkdir(parents=True, exist_ok=True)
        (self.out / "stages").mkdir(exist_ok=True)
        card = self._card()
        key = _digest(self.source, self.fields)
        rows_file = self.out / "rows.jsonl"
        if card.get("read", {}).get("key") != key or not rows_file.exists():
            card = {"source": self.source, "fields": self.fields, "stages": []}
            count = self._write(rows_file, self.progress(source_rows(self.source, self.fields), "read", None))
            card["read"] = {"key": key, "rows": count}
            self._save(card)
        previous, rows_in = rows_file, card["read"]["rows"]
        done = {entry["key"]: entry for entry in card["stages"]}
        card["stages"] = []
        for number, stage in enumerate(self.stages, 1):
            key = _digest(key, stage.name, stage.settings())
            kept = self.out / "stages" / f"{number:02d}_{stage.name}.jsonl"
            entry = done.get(key)
            if entry is None or not kept.exists():
                entry = self._run_stage(stage, previous, kept, rows_in, key)
            card["stages"].append(entry)
            self._save(card)
            previous, rows_in = kept, entry["rows_out"]
        card["output"] = self._write_verl(previous, rows_in, output or {})
        self._save(card)
        return card

    def _run_stage(self, stage: Stage, rows_file: Path, kept: Path, rows_in: int, key: str) -> dict:
        drops_file = kept.with_name(kept.stem + ".drops.jsonl")
        dropped: dict[str, int] = {}
        started = time.perf_counter()
        partial = kept.with_name(kept.name + ".partial")
        try:
            with open(partial, "w") as keep, open(drops_file.with_name(drops_file.name + ".partial"), "w") as drop:
                for batch in _batches(self.progress(_read_jsonl(rows_file), stage.name, rows_in)):
                    results = stage.process_batch(batch)
                    for row, result in zip(batch, results):
                        if isinstance(result, Drop):
                            dropped[result.reason] = dropped.get(result.reason, 0) + 1
                            drop.write(
                                json.dumps({"id": row["id"], "reason": result.reason, "detail": result.detail}) + "\n"
                            )
                        else:
                            keep.write(json.dumps(result, default=_plain) + "\n")
        finally:
            stage.close()
        os.replace(drops_file.with_name(drops_file.name + ".partial"), drops_file)
        os.replace(partial, kept)
        rows_out = rows_in - sum(dropped.values())
        return {
            "stage": stage.name,
            "key": key,
            "settings": stage.settings(),
            "rows_in": rows_in,
            "rows_out": rows_out,
            "dropped": dict(sorted(dropped.items())),
            **({"counters": stage.counters()} if stage.counters() else {}),
            "seconds": round(time.perf_counter() - started, 2),
        }

    def _write(self, path: Path, rows: Iterable[Row]) -> int:
        partial = path.with_name(path.name + ".partial")
        count = 0
        with open(partial, "w") as handle:
            for row in rows:
                handle.write(json.dumps(row, default=_plain) + "\n")
                count += 1
        os.replace(partial, path)
        return count

    def _write_verl(self, rows_file: Path, count: int, output: dict) -> dict:
        import pyarrow as pa
        import pyarrow.parquet as pq

        from reasonrl.plugins.curation.verl_rows import SCHEMA, verl_row

        path = self.out / "train.parquet"
        partial = path.with_name(path.name + ".partial")
        writer = None
        try:
            for start, batch in enumerate(_batches(_read_jsonl(rows_file), 1024)):
                rows = [verl_row(row, start * 1024 + i, output) for i, row in enumerate(batch)]
                writer = writer or pq.ParquetWriter(partial, SCHEMA)
                writer.write_table(pa.Table.from_pylist(rows, schema=SCHEMA))
        finally:
            if writer is not None:
                writer.close()
        if writer is None:
            raise CurationError("no row survived the stages: nothing to write (see card.md)")
        os.replace(partial, path)
        return {"path": str(path), "rows": count}

    def _card(self) -> dict:
        return json.loads(self.card_path.read_text()) if self.card_path.exists() else {"stages": []}

    def _save(self, card: dict) -> None:
        from reasonrl.plugins.curation.card import card_markdown

        _write_atomic(self.card_path, json.dumps(card, indent=2))
        _write_atomic(self.out / "card.md", card_markdown(card))


def _batches(rows: Iterable[Row], size: int = BATCH) -> Iterator[list[Row]]:
    batch: list[Row] = []
    for row in rows:
        batch.append(row)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def _plain(value):
    """JSON for what ``datasets`` and numpy hand back (arrays, numpy scalars)."""
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def read_questions(spec: str) -> list[str]:
    """An evaluation set's questions: ``FILE[:COLUMN]`` (column ``question``, ``problem`` or
    ``prompt`` when not named; a chat ``prompt`` gives its user turns)."""
    path, _, column = spec.rpartition(":") if ":" in spec and not Path(spec).exists() else (spec, "", "")
    rows = list(stream(path))
    if not rows:
        raise CurationError(f"--eval {spec}: no rows")
    column = column or next((c for c in ("question", "problem", "prompt") if c in rows[0]), "")
    if column not in rows[0]:
        raise CurationError(
            f"--eval {spec}: no column {column or 'question/problem/prompt'!r}; columns: {sorted(rows[0])}"
        )
    out = []
    for row in rows:
        value = row[column]
        if isinstance(value, list):  # chat messages
            value = "\n".join(m["content"] for m in value if m.get("role") == "user")
        out.append(str(value))
    return out
