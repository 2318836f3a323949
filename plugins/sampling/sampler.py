"""The prompt sampler behind ``reasonrl.api.build_sampler`` and the verl adapter (MiMo §3.3.2, Kimi k1.5 §2.3.4, LongCat §3.2.2, Llama-Nemotron §5.1).

One pipeline: offline difficulty filter (per domain: MiMo §3.2) → selector (uniform epochs,
curriculum, prioritized, curriculum then prioritized (Kimi k1.5 §2.3.4), or Gaussian curriculum)
→ easy pool → dynamic sampling with replacement. ``sample`` draws a batch, ``update`` feeds back
each drawn prompt's per-response scores; ``state_dict`` holds everything (pools, success records,
curriculum position and phase, RNG) for an exact resume.
"""

from __future__ import annotations

import itertools
import warnings
from dataclasses import asdict
from typing import Hashable, Iterable, Mapping, Sequence

import numpy as np

from reasonrl.config import ConfigError, validate_group
from reasonrl.plugins.sampling.config import KEY, NEEDS_PASS_RATES, SAMPLING_GROUP, STAGES, SamplingConfig
from reasonrl.plugins.sampling.pools import IndexedSet
from reasonrl.plugins.sampling.selectors import (
    Curriculum,
    CurriculumThenPrioritized,
    EmptyPool,
    GaussianCurriculum,
    Prioritized,
    UniformEpochs,
)

STATE_VERSION = 1


class OutcomeRecord:
    """Per prompt: responses scored, their summed scores, the last group's pass rate."""

    def __init__(self, size: int):
        self.attempts = np.zeros(size, dtype=np.float64)
        self.successes = np.zeros(size, dtype=np.float64)
        self.last_pass_rate = np.full(size, np.nan)

    def state_dict(self) -> dict:
        return {
            "attempts": self.attempts.copy(),
            "successes": self.successes.copy(),
            "last_pass_rate": self.last_pass_rate.copy(),
        }

    def load_state_dict(self, state: dict) -> None:
        self.attempts[:], self.successes[:], self.last_pass_rate[:] = (
            state["attempts"],
            state["successes"],
            state["last_pass_rate"],
        )


class PromptSampler:
    """Draws prompt ids for each batch and learns from their results (see module docstring)."""

    def __init__(
        self, settings: SamplingConfig, prompt_ids: Sequence[Hashable], pass_rates=None, difficulty=None, domains=None
    ):
        self.settings = settings
        ids = np.asarray(prompt_ids)
        if ids.ndim != 1 or len(ids) == 0:
            raise ConfigError("prompt_ids", "the prompt pool is empty: nothing to sample")
        self.ids = ids
        self._identity = ids.dtype.kind in "iu" and bool(np.array_equal(ids, np.arange(len(ids))))
        self._position = None if self._identity else {key: pos for pos, key in enumerate(ids.tolist())}
        if not self._identity and len(self._position) != len(ids):
            raise ConfigError("prompt_ids", "holds the same prompt id twice")
        self.pass_rates = self._aligned(pass_rates, "pass_rates")
        self.difficulty = self._aligned(difficulty, "difficulty")
        self.domains = self._labels(domains, "domains")
        names = list(settings.samplers)
        # Kimi's pair without any difficulty signal: prioritized from the start when allowed
        self.skip_curriculum = (
            settings.selector == "curriculum+prioritized"
            and settings.curriculum_optional
            and self.pass_rates is None
            and self.difficulty is None
        )
        if self.skip_curriculum:
            warnings.warn(
                f"{KEY}: no pre-computed pass rate or difficulty per prompt: the curriculum is skipped, "
                "prioritized sampling from step 0 (curriculum_optional: true)",
                stacklevel=2,
            )
        needs_rates = NEEDS_PASS_RATES + (
            ("curriculum",) if self.difficulty is None and not self.skip_curriculum else ()
        )
        for name in needs_rates:
            if name in names and self.pass_rates is None:
                raise ConfigError(
                    f"{KEY}.samplers",
                    f"{name!r} needs a pre-computed pass rate per prompt (pass_rates=..., or the dataset column reasonrl.sampling.pass_rate_column)",
                )
        if settings.selector in ("curriculum", "gaussian_curriculum", "curriculum+prioritized") and (
            settings.pace_steps is None
        ):
            raise ConfigError(f"{KEY}.pace_steps", f"is required by {settings.selector!r}: batches from easy to hard")
        self.rng = np.random.default_rng(settings.seed)
        self.stats = OutcomeRecord(len(ids))
        self.use_easy_pool, self.dynamic = "easy_pool" in names, "dynamic" in names

        self.kept = np.ones(len(ids), dtype=bool)  # survives the offline difficulty filter
        self.filtering = "difficulty_filter" in names
        if settings.filter_schedule and not self.filtering:
            raise ConfigError(
                f"{KEY}.filter_schedule", "schedules the offline filter: add difficulty_filter to samplers"
            )
        if self.filtering:
            for threshold in {settings.filter_threshold, *(value for _, value in settings.filter_schedule)}:
                if not (~self._too_easy(threshold)).any():
                    raise ConfigError(
                        f"{KEY}.filter_threshold"
                        if threshold == settings.filter_threshold
                        else f"{KEY}.filter_schedule",
                        f"= {threshold} (domain_filters {settings.domain_filters}) drops every one "
                        f"of the {len(ids)} prompts: the pool is empty",
                    )
            self.kept = ~self._too_easy(settings.threshold_at(0))
        self.selector = self._build_selector()
        self.easy = IndexedSet(len(ids))
        self.requeues = np.zeros(len(ids), dtype=np.int32)
        self.requeue_epoch = self.selector.epoch
        self.batches = 0
        self._step = self._empty_step()

    # ---------------------------------------------------------------- construction
    def _in_prompt_order(self, values, name: str):
        """``values`` as given, or a mapping id → value put in ``prompt_ids`` order."""
        if not isinstance(values, Mapping):
            return values
        missing = [key for key in self.ids.tolist() if key not in values]
        if missing:
            raise ConfigError(name, f"has no value for {len(missing)} of {len(self.ids)} prompts (e.g. {missing[:3]})")
        return [values[key] for key in self.ids.tolist()]

    def _aligned(self, values, name: str):
        if values is None:
            return None
        array = np.asarray(self._in_prompt_order(values, name), dtype=np.float64)
        if array.shape != self.ids.shape:
            raise ConfigError(name, f"has {array.size} values for {len(self.ids)} prompts")
        if not np.isfinite(array).all():
            raise ConfigError(name, "must be finite for every prompt")
        if name == "pass_rates" and ((array < 0) | (array > 1)).any():
            raise ConfigError(name, "must lie in [0, 1]")
        return array

    def _labels(self, values, name: str):
        """Per-prompt string labels (``None``: no label), aligned with ``prompt_ids``."""
        if values is None:
            return None
        values = list(self._in_prompt_order(values, name))
        if len(values) != len(self.ids):
            raise ConfigError(name, f"has {len(values)} values for {len(self.ids)} prompts")
        return np.asarray([None if value is None else str(value) for value in values], dtype=object)

    def _too_easy(self, default_threshold: float) -> np.ndarray:
        """The offline filter: pass rate > threshold (>= when inclusive), the rule of the prompt's
        domain where ``domain_filters`` has one, else ``default_threshold``/``filter_inclusive``."""
        s = self.settings
        threshold = np.full(len(self.ids), default_threshold)
        inclusive = np.full(len(self.ids), s.filter_inclusive)
        if s.domain_filters:
            if self.domains is None:
                raise ConfigError(
                    f"{KEY}.domain_filters",
                    f"needs a domain label per prompt (domains=..., or the dataset column {KEY}.domain_column)",
                )
            for domain, rule in s.domain_filters.items():
                mine = self.domains == domain
                threshold[mine], inclusive[mine] = rule["threshold"], rule["inclusive"]
        return np.where(inclusive, self.pass_rates >= threshold, self.pass_rates > threshold)

    def _build_selector(self):
        s = self.settings
        if s.selector == "curriculum":
            return self._curriculum()
        if s.selector == "prioritized":
            return self._prioritized()
        if s.selector == "curriculum+prioritized":
            switch = s.prioritized_from_step if s.prioritized_from_step is not None else s.pace_steps
            curriculum = None if self.skip_curriculum else self._curriculum()
            return CurriculumThenPrioritized(curriculum, self._prioritized(), switch)
        if s.selector == "gaussian_curriculum":
            return GaussianCurriculum(
                self.kept, self.rng, self.pass_rates, s.bins, s.centre_start, s.centre_end, s.width, s.pace_steps
            )
        return UniformEpochs(self.kept, self.rng)

    def _curriculum(self) -> Curriculum:
        easiness = self.pass_rates if self.difficulty is None else -self.difficulty
        return Curriculum(self.kept, self.rng, easiness, self.settings.start_fraction, self.settings.pace_steps)

    def _prioritized(self) -> Prioritized:
        s = self.settings
        return Prioritized(self.kept, self.rng, self.stats, s.unseen_success, s.smoothing, s.min_priority)

    # ---------------------------------------------------------------- ids <-> positions
    def positions(self, prompt_ids: Iterable[Hashable]) -> np.ndarray:
        keys = list(prompt_ids)
        if self._identity:
            positions = np.asarray(keys, dtype=np.int64)
            bad = (positions < 0) | (positions >= len(self.ids))
            if bad.any():
                raise KeyError(f"unknown prompt id {positions[bad][0]}")
            return positions
        try:
            return np.fromiter((self._position[key] for key in keys), dtype=np.int64, count=len(keys))
        except KeyError as missing:
            raise KeyError(f"unknown prompt id {missing.args[0]!r}") from None

    def _ids_of(self, positions: np.ndarray) -> list:
        return positions.tolist() if self._identity else self.ids[positions].tolist()

    # ---------------------------------------------------------------- draw
    def sample(self, batch_size: int, *, refill: bool = False) -> list:
        """``batch_size`` prompt ids. A call is one training batch (it advances curricula);
        ``refill=True`` tops up the current batch (dynamic sampling) at the same position."""
        if batch_size < 0:
            raise ValueError(f"batch_size must be >= 0, got {batch_size}")
        if not refill:
            self.batches += 1
            self._follow_filter_schedule(self.batches - 1)
            self.selector.begin_batch(self.batches - 1)
        from_easy = 0
        if self.use_easy_pool and len(self.easy):
            from_easy = min(int(self.rng.binomial(batch_size, self.settings.alpha)), len(self.easy))
        try:
            normal = self.selector.draw(batch_size - from_easy, refill)
        except EmptyPool:
            if not len(self.easy):
                raise
            normal = self.easy.sample(batch_size - from_easy, self.rng)  # only solved prompts left
            normal = (
                self.rng.choice(normal, size=batch_size - from_easy) if len(normal) < batch_size - from_easy else normal
            )
        easy = self.easy.sample(from_easy, self.rng)
        drawn = np.concatenate([normal, easy])
        if from_easy:
            drawn = self.rng.permutation(drawn)
        self._record_draw(drawn, from_easy)
        return self._ids_of(drawn)

    def _follow_filter_schedule(self, batch: int) -> None:
        """``filter_schedule``: at a new threshold, prompts it drops leave the draw and prompts it
        keeps again come back (not those in the easy pool: it owns them until they fail)."""
        if not self.settings.filter_schedule:
            return
        kept = ~self._too_easy(self.settings.threshold_at(batch))
        dropped, back = np.flatnonzero(self.kept & ~kept), np.flatnonzero(~self.kept & kept)
        self.selector.set_active(dropped, False)
        self.selector.set_active(back[~self.easy.contains(back)] if len(back) else back, True)
        self.kept = kept

    def _record_draw(self, drawn: np.ndarray, from_easy: int) -> None:
        step = self._step
        step["drawn"] += len(drawn)
        step["from_easy"] += from_easy
        if self.pass_rates is not None and len(drawn):
            step["prior_pass_rate_sum"] += float(self.pass_rates[drawn].sum())

    # ---------------------------------------------------------------- feedback
    def update(self, results: Mapping[Hashable, Sequence[float]], trained: Iterable[Hashable] | None = None) -> None:
        """Per drawn prompt id, the scores in [0, 1] of its responses. ``trained``: the ids whose
        group went into the loss (default: all, or with ``dynamic`` those with mixed scores)."""
        if not results:
            return
        positions = self.positions(results.keys())
        scores = list(results.values())
        counts = np.fromiter(map(len, scores), dtype=np.int64, count=len(scores))
        if (counts == 0).any():
            raise ValueError("every prompt in results needs at least one score")
        flat = np.fromiter(itertools.chain.from_iterable(scores), dtype=np.float64, count=int(counts.sum()))
        if not ((flat >= 0) & (flat <= 1)).all():
            raise ValueError("scores must lie in [0, 1]")
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        sums = np.add.reduceat(flat, starts)
        # DAPO: identical scores in a group give zero advantage, no gradient
        no_signal = np.maximum.reduceat(flat, starts) == np.minimum.reduceat(flat, starts)
        pass_rate = sums / counts
        self.stats.attempts[positions] += counts  # positions are unique: the keys of a mapping
        self.stats.successes[positions] += sums
        self.stats.last_pass_rate[positions] = pass_rate
        if trained is None:
            was_trained = ~no_signal if self.dynamic else np.ones(len(positions), dtype=bool)
        else:
            was_trained = np.isin(positions, self.positions(trained))

        stays_easy = np.zeros(len(positions), dtype=bool)
        if self.use_easy_pool:
            in_easy = self.easy.contains(positions)
            solved = pass_rate >= 1.0
            joining, leaving = positions[solved & ~in_easy], positions[~solved & in_easy]
            self.easy.add(joining)
            self.selector.set_active(joining, False)
            self.easy.discard(leaving)
            self.selector.set_active(leaving, True)
            stays_easy = solved
            self._step["moved_to_easy"] += len(joining)
            self._step["moved_back"] += len(leaving)
        self.selector.observe(positions)
        if self.dynamic:
            self._give_back(positions[~was_trained & ~stays_easy])
        step = self._step
        step["groups"] += len(positions)
        step["no_signal"] += int(no_signal.sum())
        step["pass_rate_sum"] += float(pass_rate.sum())

    def _give_back(self, positions: np.ndarray) -> None:
        """With-replacement online filtering (LongCat): untrained prompts return to the pool,
        at most ``max_requeues`` times per prompt and epoch."""
        if self.requeue_epoch != self.selector.epoch:
            self.requeues[:] = 0
            self.requeue_epoch = self.selector.epoch
        positions = np.unique(positions)
        allowed = positions[self.requeues[positions] < self.settings.max_requeues]
        self.requeues[allowed] += 1
        self.selector.give_back(allowed)
        self._step["requeued"] += len(allowed)
        self._step["consumed_unused"] += len(positions) - len(allowed)

    # ---------------------------------------------------------------- reporting
    @property
    def epoch(self) -> int:
        return self.selector.epoch

    @staticmethod
    def _empty_step() -> dict:
        keys = (
            "drawn",
            "from_easy",
            "groups",
            "no_signal",
            "requeued",
            "consumed_unused",
            "moved_to_easy",
            "moved_back",
        )
        return {**dict.fromkeys(keys, 0), "pass_rate_sum": 0.0, "prior_pass_rate_sum": 0.0}

    def metrics(self, prefix: str = "sampling/") -> dict[str, float]:
        """What happened since the last call (draws, outcomes) and the pools now."""
        step, self._step = self._step, self._empty_step()
        out = {
            "pool_active": float(self.selector.active.sum()),
            "pool_remaining_this_epoch": float(self.selector.remaining()),
            "pool_filtered_offline": float((~self.kept).sum()),
            "easy_pool_size": float(len(self.easy)),
            "epoch": float(self.selector.epoch),
            "drawn": float(step["drawn"]),
            "easy_drawn_frac": step["from_easy"] / step["drawn"] if step["drawn"] else 0.0,
            "filtered_group_frac": step["no_signal"] / step["groups"] if step["groups"] else 0.0,
            "requeued": float(step["requeued"]),
            "consumed_without_training": float(step["consumed_unused"]),
            "moved_to_easy": float(step["moved_to_easy"]),
            "moved_back_from_easy": float(step["moved_back"]),
        }
        if step["groups"]:
            out["drawn_pass_rate_mean"] = step["pass_rate_sum"] / step["groups"]
        if step["drawn"] and self.pass_rates is not None:
            out["drawn_precomputed_pass_rate_mean"] = step["prior_pass_rate_sum"] / step["drawn"]
        if self.selector.centre is not None:
            out["curriculum_centre"] = float(self.selector.centre)
        if isinstance(self.selector, CurriculumThenPrioritized):
            out["phase"] = float(self.selector.phase)  # 0 curriculum, 1 prioritized
        return {prefix + key: value for key, value in out.items()}

    # ---------------------------------------------------------------- checkpoint
    def state_dict(self) -> dict:
        return {
            "version": STATE_VERSION,
            "settings": asdict(self.settings),
            "num_prompts": len(self.ids),
            "rng": self.rng.bit_generator.state,
            "batches": self.batches,
            "stats": self.stats.state_dict(),
            "selector": self.selector.state_dict(),
            "easy": self.easy.state_dict(),
            "requeues": self.requeues.copy(),
            "requeue_epoch": self.requeue_epoch,
            "step": dict(self._step),
        }

    def load_state_dict(self, state: dict) -> None:
        if state.get("version") != STATE_VERSION:
            raise ValueError(f"sampler state version {state.get('version')!r}, this reasonrl reads {STATE_VERSION}")
        if int(state["num_prompts"]) != len(self.ids):
            raise ValueError(f"sampler state is for {state['num_prompts']} prompts, this pool has {len(self.ids)}")
        saved = state["settings"]
        if list(saved["samplers"]) != list(self.settings.samplers):
            raise ValueError(
                f"sampler state is for samplers {list(saved['samplers'])}, this run has {list(self.settings.samplers)}"
            )
        self.rng.bit_generator.state = state["rng"]
        self.batches = int(state["batches"])
        self.stats.load_state_dict(state["stats"])
        self.selector.load_state_dict(state["selector"])
        self.easy.load_state_dict(state["easy"])
        self.requeues[:] = state["requeues"]
        self.requeue_epoch = int(state["requeue_epoch"])
        self._step = {key: type(value)(state["step"][key]) for key, value in self._empty_step().items()}
        if self.filtering:  # the filter at the restored batch (the selector's own state holds who is drawn)
            self.kept = ~self._too_easy(self.settings.threshold_at(max(self.batches - 1, 0)))


def build_sampler(
    name, prompt_ids: Sequence[Hashable], *, pass_rates=None, difficulty=None, domains=None, **options
) -> PromptSampler:
    """``name``: one sampler name or a list (pipeline order, see ``SamplingConfig``); ``options``:
    the ``reasonrl.sampling`` knobs (``seed``, ``alpha``, ``pace_steps``, ...); ``pass_rates`` /
    ``difficulty`` / ``domains`` (labels for ``domain_filters``): per prompt, as a mapping
    id → value or a sequence aligned with ``prompt_ids``."""
    names = [name] if isinstance(name, str) else list(name)
    if not names:
        raise ConfigError(f"{KEY}.samplers", f"name at least one sampler: {list(STAGES)}")
    settings = validate_group(SAMPLING_GROUP, {**options, "samplers": names})
    return PromptSampler(settings, prompt_ids, pass_rates=pass_rates, difficulty=difficulty, domains=domains)
