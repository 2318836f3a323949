"""A synthetic RL run for the samplers (``reasonrl bench sampling``): prompts with latent
difficulty, a policy whose skill grows with every group it trains on, responses drawn
Bernoulli(pass probability). The step loop is verl's sync DAPO loop: roll out a batch, drop
no-signal groups, top up with twice the dropped count until the batch is full, discard the
surplus (returned to the pool by the sampler)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class World:
    """Pass probability of prompt i at skill θ: sigmoid(θ − difficulty_i)."""

    difficulty: np.ndarray
    skill: float = 0.0
    learning_rate: float = 0.0  # skill gained per trained group

    @classmethod
    def make(cls, prompts: int, seed: int, skill: float = 0.0, learning_rate: float = 2e-4) -> "World":
        rng = np.random.default_rng(seed)
        # a mix like a reasoning RL set: a solved bulk, a learnable middle and a hard tail
        difficulty = np.concatenate(
            [
                rng.normal(-3.0, 1.0, prompts * 4 // 10),
                rng.normal(0.5, 1.2, prompts * 4 // 10),
                rng.normal(4.0, 1.0, prompts - 2 * (prompts * 4 // 10)),
            ]
        )
        return cls(rng.permutation(difficulty), skill, learning_rate)

    def pass_probability(self, prompts: np.ndarray) -> np.ndarray:
        return 1.0 / (1.0 + np.exp(self.difficulty[prompts] - self.skill))

    def estimated_pass_rates(self, samples: int, rng: np.random.Generator) -> np.ndarray:
        """Offline pass rates as the reports compute them: ``samples`` rollouts per prompt."""
        every = np.arange(len(self.difficulty))
        return rng.binomial(samples, self.pass_probability(every)) / samples


@dataclass
class RunStats:
    rollouts: int = 0
    trained_rollouts: int = 0
    history: list[dict] = field(default_factory=list)

    @property
    def rollouts_per_trained(self) -> float:
        return self.rollouts / max(1, self.trained_rollouts)

    @property
    def wasted_fraction(self) -> float:
        return 1.0 - self.trained_rollouts / max(1, self.rollouts)


def run(
    sampler, world: World, steps: int, batch_size: int, responses: int, seed: int, max_rounds: int = 50
) -> RunStats:
    rng = np.random.default_rng(seed)
    stats = RunStats()
    for _step in range(steps):
        trained: list = []
        wanted, refill = batch_size, False
        for _round in range(max_rounds):
            drawn = sampler.sample(wanted, refill=refill)
            passes = rng.random((len(drawn), responses)) < world.pass_probability(np.asarray(drawn))[:, None]
            stats.rollouts += passes.size
            mixed = passes.any(axis=1) & ~passes.all(axis=1)
            room = batch_size - len(trained)
            keep = [p for p, m in zip(drawn, mixed) if m][:room]
            trained += keep
            sampler.update({p: row.astype(float) for p, row in zip(drawn, passes)}, trained=keep)
            if len(trained) == batch_size:
                break
            wanted, refill = 2 * int((~mixed).sum()) or batch_size - len(trained), True
        stats.trained_rollouts += len(trained) * responses
        world.skill += world.learning_rate * len(trained)
        metrics = sampler.metrics(prefix="")
        metrics.update(rollouts=stats.rollouts, skill=world.skill, trained=len(trained))
        stats.history.append(metrics)
    return stats
