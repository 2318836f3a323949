"""Which normal-pool prompts a batch gets (Kimi k1.5 §2.3.4, Llama-Nemotron §5.1): uniform epochs, Kimi's curriculum and
prioritized sampling (alone, or the curriculum then prioritized), Llama-Nemotron's progressive
Gaussian curriculum.

A selector owns the *active* prompts (not offline-filtered, not in the easy pool). Epoch
selectors hand out every active prompt once per epoch (without replacement); prompts given
back (filtered groups, dynamic sampling with replacement) can be drawn again in the same
epoch. Positions are ``0..n-1``.
"""

from __future__ import annotations

import math

import numpy as np

from reasonrl.plugins.sampling.pools import IndexedSet, SumTree


class EmptyPool(RuntimeError):
    """No active prompt is left to draw (everything filtered or in the easy pool)."""


def active_positions(active: np.ndarray) -> np.ndarray:
    """The active prompts; EmptyPool when there are none."""
    positions = np.flatnonzero(active)
    if len(positions) == 0:
        raise EmptyPool("no active prompt left: every prompt is filtered out or in the easy pool")
    return positions


class Selector:
    centre: float | None = None  # curriculum position for the metrics (None: no curriculum)

    def __init__(self, active: np.ndarray, rng: np.random.Generator):
        self.active = active.copy()
        self.rng = rng
        self.epoch = 0

    def draw(self, count: int, refill: bool) -> np.ndarray:
        raise NotImplementedError

    def set_active(self, positions: np.ndarray, active: bool) -> None:
        self.active[positions] = active

    def give_back(self, positions: np.ndarray) -> None:
        """Prompts drawn but not trained: drawable again (dynamic sampling with replacement)."""

    def observe(self, positions: np.ndarray) -> None:
        """New outcomes for ``positions`` are in the sampler's stats; called after any
        ``set_active`` for them in the same update."""

    def begin_batch(self, batch_index: int) -> None:
        """A new training batch (not a refill) is about to be drawn."""

    def remaining(self) -> int:
        """Prompts still to be drawn this epoch (all active prompts for non-epoch selectors)."""
        return int(self.active.sum())

    def state_dict(self) -> dict:
        return {"active": self.active.copy(), "epoch": self.epoch}

    def load_state_dict(self, state: dict) -> None:
        self.active[:] = state["active"]
        self.epoch = int(state["epoch"])


class UniformEpochs(Selector):
    """Every eligible active prompt once per epoch in random order; given-back prompts rejoin
    the epoch. Prompts given back after their epoch ended are drawn first in the next one."""

    def __init__(self, active: np.ndarray, rng: np.random.Generator):
        super().__init__(active, rng)
        self.left = IndexedSet(len(active))
        self.carried = IndexedSet(len(active))  # owed to an epoch that already ended
        self.drawn_epoch = np.full(len(active), -1, dtype=np.int32)

    def eligible(self) -> np.ndarray:
        return self.active

    def is_eligible(self, positions: np.ndarray) -> np.ndarray:
        return self.active[positions]

    def remaining(self) -> int:
        return len(self.left) + len(self.carried)

    def draw(self, count: int, refill: bool) -> np.ndarray:
        parts = [self._take(self.carried, count)]
        need, held_out = count - len(parts[0]), np.empty(0, dtype=np.int64)
        while need > 0:
            if len(self.left) == 0:
                # a batch that straddles two epochs never holds a prompt twice: what it already
                # has joins the new epoch once the batch is drawn
                held_out = np.concatenate(parts)
                self._new_epoch()
                self.left.discard(held_out)
                if len(self.left) == 0:  # fewer active prompts than the batch: repeats unavoidable
                    self.left.add(held_out)
                    held_out = held_out[:0]
            taken = self._take(self.left, need)
            parts.append(taken)
            need -= len(taken)
        self.left.add(held_out)
        drawn = np.concatenate(parts)
        self.drawn_epoch[drawn] = self.epoch
        return drawn

    def _take(self, pool: IndexedSet, count: int) -> np.ndarray:
        return pool.pop_random(min(count, len(pool)), self.rng)

    def _new_epoch(self) -> None:
        fresh = active_positions(self.eligible())
        self.epoch += 1
        self.left.add(fresh, assume_unique=True)

    def give_back(self, positions: np.ndarray) -> None:
        positions = positions[self.active[positions]]
        old = self.drawn_epoch[positions] < self.epoch
        self.carried.add(positions[old])
        self.left.add(positions[~old])

    def set_active(self, positions: np.ndarray, active: bool) -> None:
        super().set_active(positions, active)
        if active:
            self.left.add(positions[self.is_eligible(positions)])
        else:
            self.left.discard(positions)
            self.carried.discard(positions)

    def state_dict(self) -> dict:
        return {
            **super().state_dict(),
            "left": self.left.state_dict(),
            "carried": self.carried.state_dict(),
            "drawn_epoch": self.drawn_epoch.copy(),
        }

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.left.load_state_dict(state["left"])
        self.carried.load_state_dict(state["carried"])
        self.drawn_epoch[:] = state["drawn_epoch"]


class Curriculum(UniformEpochs):
    """Kimi k1.5 curriculum: prompts sorted easy → hard; the drawable window grows linearly from
    the easiest ``start_fraction`` of the pool to all of it over ``pace_steps`` batches."""

    def __init__(self, active, rng, easiness: np.ndarray, start_fraction: float, pace_steps: int):
        super().__init__(active, rng)
        order = np.argsort(-easiness, kind="stable")
        self.order = order
        self.rank = np.empty(len(order), dtype=np.int64)
        self.rank[order] = np.arange(len(order))
        self.sorted_easiness = easiness[order]
        self.start_fraction, self.pace_steps = start_fraction, pace_steps
        self.window = self._window_at(0)

    def _window_at(self, batch_index: int) -> int:
        progress = min(1.0, batch_index / self.pace_steps)
        return max(1, math.ceil(len(self.rank) * (self.start_fraction + (1 - self.start_fraction) * progress)))

    @property
    def centre(self) -> float:
        """Easiness (pass rate, or minus the difficulty label) of the hardest drawable prompt."""
        return float(self.sorted_easiness[self.window - 1])

    def eligible(self) -> np.ndarray:
        return self.active & (self.rank < self.window)

    def is_eligible(self, positions: np.ndarray) -> np.ndarray:
        return self.active[positions] & (self.rank[positions] < self.window)

    def begin_batch(self, batch_index: int) -> None:
        window = self._window_at(batch_index)
        if window > self.window:
            newly = self.order[self.window : window]
            newly = newly[self.active[newly]]
            self.window = window
            self.left.add(newly)  # joins the current epoch

    def state_dict(self) -> dict:
        return {**super().state_dict(), "window": self.window}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.window = int(state["window"])


class Prioritized(Selector):
    """Kimi k1.5 prioritized sampling: P(i) ∝ max(1 − s_i, min_priority) over active prompts,
    s_i = (successes_i + smoothing·unseen_success) / (attempts_i + smoothing). Independent draws."""

    def __init__(self, active, rng, stats, unseen_success: float, smoothing: float, min_priority: float):
        super().__init__(active, rng)
        self.stats = stats
        self.unseen_success, self.smoothing, self.min_priority = unseen_success, smoothing, min_priority
        self.tree = SumTree(len(active))
        self._refresh_all()

    def _refresh_all(self) -> None:
        """Every weight from the outcome record: the tree is derived state, never stored."""
        self.tree.set_all(self.priority(np.arange(len(self.active))))

    def success_rate(self, attempts: np.ndarray, successes: np.ndarray) -> np.ndarray:
        prior = self.smoothing * self.unseen_success
        denominator = attempts + self.smoothing
        return np.where(
            denominator > 0, (successes + prior) / np.where(denominator > 0, denominator, 1), self.unseen_success
        )

    def priority(self, positions: np.ndarray) -> np.ndarray:
        rate = self.success_rate(self.stats.attempts[positions], self.stats.successes[positions])
        return np.where(self.active[positions], np.maximum(1.0 - rate, self.min_priority), 0.0)

    def draw(self, count: int, refill: bool) -> np.ndarray:
        if count and self.tree.total <= 0:
            return self.rng.choice(active_positions(self.active), size=count)  # all solved: uniform
        return self.tree.draw(count, self.rng)

    def observe(self, positions: np.ndarray) -> None:
        self.tree.set(positions, self.priority(positions))

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)  # the sampler restores its outcome record first
        self._refresh_all()


class CurriculumThenPrioritized(Selector):
    """Kimi k1.5 §2.3.4 uses both: the curriculum draws batches ``0 .. switch_step − 1`` (phase 0),
    prioritized sampling every later batch (phase 1; the §3.5 ablation switches at iteration 24).
    Both sub-selectors see every ``set_active``/``observe``/``give_back``, so the prioritized one
    holds the whole outcome record when it takes over. ``curriculum=None``: no difficulty per
    prompt, prioritized from the start (``curriculum_optional``)."""

    def __init__(self, curriculum: Curriculum | None, prioritized: Prioritized, switch_step: int):
        # no Selector.__init__: the active set, RNG and epoch are the sub-selectors'
        self.curriculum, self.prioritized, self.switch_step = curriculum, prioritized, switch_step
        self.phase = 0 if curriculum is not None else 1

    @property
    def parts(self) -> tuple:
        return tuple(part for part in (self.curriculum, self.prioritized) if part is not None)

    @property
    def current(self) -> Selector:
        return self.curriculum if self.phase == 0 else self.prioritized

    @property
    def active(self) -> np.ndarray:
        return self.prioritized.active  # every part gets the same set_active calls

    @property
    def epoch(self) -> int:
        """The curriculum's epochs (prioritized has none): frozen after the switch."""
        return self.curriculum.epoch if self.curriculum is not None else 0

    @property
    def centre(self) -> float | None:
        return self.curriculum.centre if self.phase == 0 else None

    def begin_batch(self, batch_index: int) -> None:
        if self.phase == 0 and batch_index >= self.switch_step:
            self.phase = 1
        self.current.begin_batch(batch_index)

    def draw(self, count: int, refill: bool) -> np.ndarray:
        return self.current.draw(count, refill)

    def remaining(self) -> int:
        return self.current.remaining()

    def set_active(self, positions: np.ndarray, active: bool) -> None:
        for part in self.parts:
            part.set_active(positions, active)

    def give_back(self, positions: np.ndarray) -> None:
        for part in self.parts:
            part.give_back(positions)

    def observe(self, positions: np.ndarray) -> None:
        for part in self.parts:
            part.observe(positions)

    def state_dict(self) -> dict:
        state = {"phase": self.phase, "prioritized": self.prioritized.state_dict()}
        if self.curriculum is not None:
            state["curriculum"] = self.curriculum.state_dict()
        return state

    def load_state_dict(self, state: dict) -> None:
        if ("curriculum" in state) != (self.curriculum is not None):
            saved, here = ("with", "without") if "curriculum" in state else ("without", "with")
            raise ValueError(
                f"sampler state was saved {saved} a curriculum phase, this run is {here} one "
                "(a pass rate / difficulty per prompt decides: reasonrl.sampling.curriculum_optional)"
            )
        self.phase = int(state["phase"])
        if self.curriculum is not None:
            self.curriculum.load_state_dict(state["curriculum"])
        self.prioritized.load_state_dict(state["prioritized"])


class GaussianCurriculum(Selector):
    """Llama-Nemotron §5.1: prompts binned by pre-computed pass rate; each batch targets a
    Gaussian over the bins whose centre moves from ``centre_start`` (easy) to ``centre_end``
    (hard) over ``pace_steps`` batches; a bin short of its target gives way to the largest
    remaining bins; the batch is shuffled. Each prompt once per epoch, like uniform epochs."""

    def __init__(
        self,
        active,
        rng,
        pass_rates: np.ndarray,
        bins: int,
        centre_start: float,
        centre_end: float,
        width: float,
        pace_steps: int,
    ):
        super().__init__(active, rng)
        self.bin_of = np.minimum((pass_rates * bins).astype(np.int64), bins - 1)
        self.bin_centres = (np.arange(bins) + 0.5) / bins
        self.left = [IndexedSet(len(active)) for _ in range(bins)]
        self.centre_start, self.centre_end, self.width, self.pace_steps = centre_start, centre_end, width, pace_steps
        self.centre = centre_start

    def target_shares(self) -> np.ndarray:
        density = np.exp(-0.5 * ((self.bin_centres - self.centre) / self.width) ** 2)
        return density / density.sum()

    def targets(self, count: int, refill: bool) -> np.ndarray:
        shares = self.target_shares()
        if refill:  # a few prompts topping up a batch: draw their bins from the target
            return self.rng.multinomial(count, shares)
        exact = count * shares
        counts = np.floor(exact).astype(np.int64)
        short = count - counts.sum()  # largest remainders get the rounding
        counts[np.argsort(-(exact - counts), kind="stable")[:short]] += 1
        return counts

    def begin_batch(self, batch_index: int) -> None:
        progress = min(1.0, batch_index / self.pace_steps)
        self.centre = self.centre_start + (self.centre_end - self.centre_start) * progress

    def remaining(self) -> int:
        return sum(len(pool) for pool in self.left)

    def draw(self, count: int, refill: bool) -> np.ndarray:
        if self.remaining() == 0 and count:
            self._new_epoch()
        wanted = self.targets(count, refill)
        parts, held_out = [], np.empty(0, dtype=np.int64)
        while True:
            available = np.array([len(pool) for pool in self.left])
            take = np.minimum(wanted, available)
            short = int(wanted.sum() - take.sum())
            # remaining capacity from the largest remaining bins
            spare = available - take
            for b in np.argsort(-spare, kind="stable"):
                extra = min(short, int(spare[b]))
                take[b] += extra
                short -= extra
            parts += [self.left[b].pop_random(int(take[b]), self.rng) for b in range(len(take)) if take[b]]
            if short == 0:
                break
            # the epoch ran dry: start the next one for what is still missing
            wanted = self.targets(short, refill)
            held_out = np.concatenate(parts) if parts else held_out
            self._new_epoch()
            for pool, members in self._by_bin(held_out):
                pool.discard(members)
            if self.remaining() == 0:  # fewer active prompts than the batch: repeats unavoidable
                for pool, members in self._by_bin(held_out):
                    pool.add(members)
                held_out = held_out[:0]
        for pool, members in self._by_bin(held_out):
            pool.add(members)  # what the batch already held joins the new epoch
        return self.rng.permutation(np.concatenate(parts))

    def _new_epoch(self) -> None:
        fresh = active_positions(self.active)
        self.epoch += 1
        for pool, members in self._by_bin(fresh):
            pool.add(members, assume_unique=True)

    def _by_bin(self, positions: np.ndarray):
        for b, pool in enumerate(self.left):
            yield pool, positions[self.bin_of[positions] == b]

    def give_back(self, positions: np.ndarray) -> None:
        for pool, members in self._by_bin(positions[self.active[positions]]):
            pool.add(members)

    def set_active(self, positions: np.ndarray, active: bool) -> None:
        super().set_active(positions, active)
        for pool, members in self._by_bin(positions):
            pool.add(members) if active else pool.discard(members)

    def state_dict(self) -> dict:
        return {**super().state_dict(), "centre": self.centre, "left": [pool.state_dict() for pool in self.left]}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.centre = float(state["centre"])
        for pool, pool_state in zip(self.left, state["left"]):
            pool.load_state_dict(pool_state)
