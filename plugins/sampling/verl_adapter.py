"""verl adapter: the ``sampling`` callback of trainer mode ``reasonrl_sync``.

verl 0.9.1 has no sampler hook; this callback is the trainer's prompt source
(``next_prompts``: dataset rows from the sampler instead of verl's dataloader, including the
top-ups after verl's own DAPO filter, ``algorithm.filter_groups``, evicted no-signal groups),
learns from every finished group that reasonrl's ``ReportingReplayBuffer`` reports (trained
or evicted), logs the sampler's metrics each step and checkpoints its state with verl's.
"""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np

from reasonrl.callbacks import CheckpointedState, PromptSource
from reasonrl.config import ConfigError
from reasonrl.plugins.sampling.config import KEY, SamplingConfig
from reasonrl.plugins.sampling.sampler import PromptSampler, build_sampler


def _values(dataset, name: str) -> list | None:
    """A column of verl's RLHFDataset, top level or inside ``extra_info`` (None: not in every row)."""
    frame = dataset.dataframe
    if name in frame.column_names:
        return list(frame[name])
    if "extra_info" in frame.column_names:
        infos = frame["extra_info"]
        if all(isinstance(info, dict) and name in info for info in infos):
            return [info[name] for info in infos]
    return None


def _column(dataset, name: str) -> np.ndarray | None:
    """A numeric column of verl's RLHFDataset, top level or inside ``extra_info``."""
    values = _values(dataset, name)
    return None if values is None else np.asarray(values, dtype=np.float64)


def _text_column(dataset, name: str) -> list | None:
    """A label column (e.g. verl's ``ability``: math, code, ...) as strings; a missing cell is None."""
    values = _values(dataset, name)
    return None if values is None else [None if value is None else str(value) for value in values]


def response_score(reward: float, extra: dict, score_key: str) -> float:
    """A response's score in [0, 1]: ``reward_extra_info[score_key]`` or the summed reward, clipped."""
    value = reward if score_key == "reward" else extra.get(score_key)
    if value is None:
        raise KeyError(
            f"{KEY}.score_key: the reward manager's reward_extra_info has no {score_key!r} "
            f"(keys: {sorted(extra)}); set score_key=reward to use the reward itself"
        )
    return min(1.0, max(0.0, float(value)))


class SamplingCallback(PromptSource, CheckpointedState):
    def __init__(self, settings: SamplingConfig):
        self.settings = settings
        self.sampler: PromptSampler | None = None

    def on_init_end(self, trainer) -> None:
        s = self.settings
        dataset = trainer.train_dataset
        pass_rates = _column(dataset, s.pass_rate_column)
        difficulty = _column(dataset, s.difficulty_column) if s.difficulty_column else None
        if s.difficulty_column and difficulty is None:
            raise ConfigError(
                f"{KEY}.difficulty_column",
                f"{s.difficulty_column!r} is not a column (or extra_info key) of every row of data.train_files",
            )
        if s.pace_steps is None:
            s.pace_steps = int(trainer.total_training_steps)
        # curriculum_optional: Kimi's pair runs prioritized-only without a difficulty signal
        optional = s.curriculum_optional and s.selector == "curriculum+prioritized"
        if pass_rates is None and s.needs_pass_rates(has_difficulty=difficulty is not None):
            raise ConfigError(
                f"{KEY}.pass_rate_column",
                f"{s.pass_rate_column!r} is not a column (or extra_info key) of every row of data.train_files; `reasonrl sampling pass-rates` writes it",
            )
        if optional and pass_rates is None and difficulty is None:
            print(
                f"[reasonrl] sampling: no {s.pass_rate_column!r} column (nor difficulty_column) in data.train_files: "
                "the curriculum is skipped, prioritized sampling from step 0 (curriculum_optional)",
                flush=True,
            )
        domains = None
        if s.needs_domains():
            domains = _text_column(dataset, s.domain_column)
            if domains is None:
                raise ConfigError(
                    f"{KEY}.domain_column",
                    f"{s.domain_column!r} is not a column (or extra_info key) of every row of data.train_files "
                    f"(needed by domain_filters {sorted(s.domain_filters)})",
                )
        # reasonrl.api.build_sampler itself: the facade is the product's path
        options = {key: value for key, value in dataclasses.asdict(s).items() if key != "samplers"}
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=f"{KEY}: no pre-computed pass rate")  # printed above
            self.sampler = build_sampler(
                s.samplers,
                np.arange(len(dataset)),
                pass_rates=pass_rates,
                difficulty=difficulty,
                domains=domains,
                **options,
            )

    def next_prompts(self, trainer, count: int, refill: bool) -> list[int]:
        return self.sampler.sample(count, refill=refill)

    def on_groups_finished(self, trainer, groups) -> None:
        results, trained = {}, []
        for group in groups:
            if group.row is None or not group.outcome:  # not one of ours, or held back / aborted (no outcome)
                continue
            scores = [
                response_score(r, e, self.settings.score_key) for r, e in zip(group.rewards, group.reward_extra_info)
            ]
            if group.row in results:  # the same prompt twice in flight: one record per update
                self.sampler.update(results, trained=trained)
                results, trained = {}, []
            results[group.row] = scores
            if group.trained:
                trained.append(group.row)
        self.sampler.update(results, trained=trained)

    def before_advantage(self, trainer, batch, metrics: dict) -> None:
        metrics.update(self.sampler.metrics(prefix="reasonrl/sampling/"))

    def state_dict(self) -> dict:
        return self.sampler.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.sampler.load_state_dict(state)


def build(config):
    from reasonrl.plugins.sampling.config import settings_from

    settings = settings_from(config)
    return SamplingCallback(settings) if settings.samplers else None
