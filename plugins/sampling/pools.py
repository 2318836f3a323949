"""Array-backed prompt sets for 1 M-prompt pools: every operation touches only the prompts it
moves (vectorised numpy, no per-prompt Python loops), so one 512-prompt batch costs well under
a millisecond whatever the pool size (``reasonrl bench sampling`` measures it).

Prompts are positions ``0..n-1`` (the sampler maps them to the caller's prompt ids).
"""

from __future__ import annotations

import numpy as np


class IndexedSet:
    """A set of positions with uniform random draws: ``pop_random`` removes what it draws
    (an epoch's remaining prompts), ``sample`` leaves it in (the easy pool)."""

    def __init__(self, capacity: int):
        self._items = np.empty(capacity, dtype=np.int64)
        self._where = np.full(capacity, -1, dtype=np.int64)
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def contains(self, positions: np.ndarray) -> np.ndarray:
        return self._where[positions] >= 0

    def members(self) -> np.ndarray:
        return self._items[: self._size].copy()

    def add(self, positions: np.ndarray, assume_unique: bool = False) -> None:
        positions = np.asarray(positions, dtype=np.int64)
        if not assume_unique:
            positions = np.unique(positions)
        positions = positions[self._where[positions] < 0]
        end = self._size + len(positions)
        self._items[self._size : end] = positions
        self._where[positions] = np.arange(self._size, end)
        self._size = end

    def discard(self, positions: np.ndarray) -> None:
        positions = np.unique(np.asarray(positions, dtype=np.int64))
        slots = self._where[positions]
        self._remove_slots(slots[slots >= 0])

    def pop_random(self, count: int, rng: np.random.Generator) -> np.ndarray:
        slots = rng.choice(self._size, size=count, replace=False)
        drawn = self._items[slots].copy()
        self._remove_slots(slots)
        return drawn

    def sample(self, count: int, rng: np.random.Generator) -> np.ndarray:
        """``count`` distinct members (at most all of them), left in the set."""
        return self._items[rng.choice(self._size, size=min(count, self._size), replace=False)]

    def _remove_slots(self, slots: np.ndarray) -> None:
        if len(slots) == 0:
            return
        removed = self._items[slots]
        tail_start = self._size - len(slots)
        # fill the holes below tail_start with the tail members that stay
        holes = slots[slots < tail_start]
        tail = np.arange(tail_start, self._size)
        staying_tail = tail[~np.isin(tail, slots, assume_unique=True)]
        self._items[holes] = self._items[staying_tail]
        self._where[self._items[holes]] = holes
        self._where[removed] = -1
        self._size = tail_start

    def state_dict(self) -> dict:
        return {"members": self.members()}

    def load_state_dict(self, state: dict) -> None:
        self._where[:] = -1
        self._size = 0
        members = np.asarray(state["members"], dtype=np.int64)
        self._items[: len(members)] = members  # in saved order: later draws repeat exactly
        self._where[members] = np.arange(len(members))
        self._size = len(members)


class SumTree:
    """Weights with draws ∝ weight (Kimi's prioritized sampling): a binary tree of partial
    sums; setting k weights or drawing k positions costs O(k log n), done level by level."""

    def __init__(self, size: int):
        self._leaves = 1 << max(0, int(size - 1).bit_length())
        self._tree = np.zeros(2 * self._leaves, dtype=np.float64)
        self.size = size

    @property
    def total(self) -> float:
        return float(self._tree[1])

    def weights(self) -> np.ndarray:
        return self._tree[self._leaves : self._leaves + self.size].copy()

    def set(self, positions: np.ndarray, weights: np.ndarray) -> None:
        nodes = np.asarray(positions, dtype=np.int64) + self._leaves
        if len(nodes) == 0:
            return
        self._tree[nodes] = weights
        while nodes[0] > 1:  # every node of a level sits at the same depth
            nodes = nodes >> 1
            self._tree[nodes] = self._tree[2 * nodes] + self._tree[2 * nodes + 1]

    def set_all(self, weights: np.ndarray) -> None:
        self._tree[:] = 0.0
        self._tree[self._leaves : self._leaves + self.size] = weights
        level = self._leaves
        while level > 1:
            level //= 2
            self._tree[level : 2 * level] = (
                self._tree[2 * level : 4 * level : 2] + self._tree[2 * level + 1 : 4 * level : 2]
            )

    def draw(self, count: int, rng: np.random.Generator) -> np.ndarray:
        """``count`` independent draws (with replacement), P(i) = w_i / Σw."""
        if count == 0:
            return np.empty(0, dtype=np.int64)
        target = rng.random(count) * self._tree[1]
        nodes = np.ones(count, dtype=np.int64)
        while nodes[0] < self._leaves:
            left = self._tree[2 * nodes]
            right_weight = self._tree[2 * nodes + 1]
            go_right = (target >= left) & (right_weight > 0)
            target = np.where(go_right, target - left, target)
            nodes = 2 * nodes + go_right
        return nodes - self._leaves
