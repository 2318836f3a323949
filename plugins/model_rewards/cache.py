"""A bounded cache of verdicts for repeated (template, question, reference, answer).

A group of n responses to one prompt often repeats a final answer (``42`` eight times): the
judge is asked once. Keys are hashes of the exact strings the judge would see, so a hit is the
same question to the same judge. Only parsed verdicts are kept: a timeout or an unparsed reply
is asked again next time. Per reward-worker process; a restart starts empty (it only saves
judge calls, it never changes a score).
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict


def verdict_key(template: str, question: str, reference: str, answer: str) -> str:
    digest = hashlib.sha256()
    for part in (template, question, reference, answer):
        digest.update(part.encode())
        digest.update(b"\0")  # separator: ("ab", "c") and ("a", "bc") differ
    return digest.hexdigest()


class VerdictCache:
    """Least-recently-used verdicts, at most ``capacity`` (0: off); thread-safe."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self._items: OrderedDict[str, float] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> float | None:
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
            return None

    def put(self, key: str, verdict: float) -> None:
        if self.capacity <= 0:
            return
        with self._lock:
            self._items[key] = verdict
            self._items.move_to_end(key)
            while len(self._items) > self.capacity:
                self._items.popitem(last=False)
