"""Staleness-bounded streaming, framework-free (LongCat-Flash-Thinking §3.1.1, DORA).

The engine keeps generating while the trainer updates; each response is generated entirely by
one policy version (no mixed segments, unlike Kimi's partial rollout) and tagged with it. A
finished sample may be trained while the trainer is at most ``staleness`` versions ahead of it;
older ones are discarded (and their prompts regenerated). Finished samples the current batch does
not need stay in the buffer and may fill up to ``reuse_ratio`` of a later batch while within the
bound; each batch is shuffled.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Callable, TypeVar

Group = TypeVar("Group")


@dataclass
class TaggedSample:
    key: str
    version: int  # the policy version that generated the whole response


def within_bound(sample_version: int, trainer_version: int, staleness: int) -> bool:
    return 0 <= trainer_version - sample_version <= staleness


def split_kept(
    kept: list[Group],
    trainer_version: int,
    staleness: int,
    quota: int,
    version_of: Callable[[Group], int],
    launch_of: Callable[[Group], int],
) -> tuple[list[Group], list[Group], list[Group]]:
    """A step's start under ``+reasonrl/rollout=staleness`` on one engine (the rule reasonrl's
    replay buffer applies to verl's version tags): of the finished groups earlier steps kept, those
    past the bound are stale; of the rest, the oldest ``quota`` (by version, then launch order) lead
    this step's batch and the others wait. Returns ``(reused, waiting, stale)``."""
    stale = [g for g in kept if not within_bound(version_of(g), trainer_version, staleness)]
    fresh = sorted(
        (g for g in kept if within_bound(version_of(g), trainer_version, staleness)),
        key=lambda g: (version_of(g), launch_of(g)),
    )
    return fresh[:quota], fresh[quota:], stale


class StalenessBuffer:
    """Finished samples with their policy versions; batches drawn within the staleness bound."""

    def __init__(self, staleness: int, reuse_ratio: float = 0.0, seed: int = 0) -> None:
        if staleness < 0:
            raise ValueError(f"staleness must be >= 0, got {staleness}")
        if not 0.0 <= reuse_ratio <= 1.0:
            raise ValueError(f"reuse_ratio must be in [0, 1], got {reuse_ratio}")
        self.staleness, self.reuse_ratio, self.seed = int(staleness), float(reuse_ratio), int(seed)
        self._kept: list[TaggedSample] = []  # over-sampled finished samples from earlier steps
        self.draws = 0

    def __len__(self) -> int:
        return len(self._kept)

    def batch(
        self, fresh: list[TaggedSample], trainer_version: int, size: int
    ) -> tuple[list[TaggedSample], list[TaggedSample]]:
        """Build one batch of ``size`` for the trainer at ``trainer_version`` from kept samples
        (at most ``reuse_ratio·size``) and the step's ``fresh`` ones; the rest of ``fresh`` is
        kept. Returns (batch, discarded): every sample past the bound is discarded, never trained."""
        discarded = [s for s in self._kept + fresh if not within_bound(s.version, trainer_version, self.staleness)]
        kept = [s for s in self._kept if within_bound(s.version, trainer_version, self.staleness)]
        fresh = [s for s in fresh if within_bound(s.version, trainer_version, self.staleness)]
        reused = kept[: int(self.reuse_ratio * size)]
        chosen = reused + fresh[: max(0, size - len(reused))]
        self._kept = kept[len(reused) :] + fresh[max(0, size - len(reused)) :]
        rng = random.Random(self.seed * 1_000_003 + self.draws)
        self.draws += 1
        rng.shuffle(chosen)
        return chosen, discarded

    def state_dict(self) -> dict[str, Any]:
        return {"keys": [s.key for s in self._kept], "versions": [s.version for s in self._kept], "draws": self.draws}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._kept = [TaggedSample(str(k), int(v)) for k, v in zip(state["keys"], state["versions"])]
        self.draws = int(state["draws"])
