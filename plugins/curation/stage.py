"""What a curation stage is: rows in, rows out, every dropped row with its reason (the data card
counts those reasons). Framework-free."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

Row = dict[str, Any]


@dataclass(frozen=True)
class Drop:
    """A row a stage removes, and why (the reason is the data card's key: short and fixed)."""

    reason: str
    detail: str = ""


class CurationError(ValueError):
    """Bad curation input or config, named before or when it is met (the CLI exits 2)."""


class Stage:
    """A curation stage. Subclasses set ``name`` and implement :meth:`process` (one row: the row,
    possibly changed, or a :class:`Drop`) or, when rows are cheaper together (a model's answers,
    sandboxed programs), :meth:`process_batch`. Stages may keep state across rows (duplicates)."""

    name: str = ""

    def settings(self) -> dict[str, Any]:
        """What the stage's result depends on (a change reruns the stage on resume)."""
        return {}

    def process(self, row: Row) -> Row | Drop:
        raise NotImplementedError

    def process_batch(self, rows: list[Row]) -> list[Row | Drop]:
        return [self.process(row) for row in rows]

    def counters(self) -> dict[str, int]:
        """Counts for the data card besides drops (e.g. tests removed from kept problems)."""
        return {}

    def close(self) -> None:
        """Release what the stage holds (servers, sandboxes); called once after its last batch."""
