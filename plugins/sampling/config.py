"""Knobs at ``reasonrl.sampling`` (MiMo §3.3.2, Kimi k1.5 §2.3.4, LongCat §3.2.2, Llama-Nemotron §5.1) — the same names as the options of
``reasonrl.api.build_sampler`` — validated before any work.

``samplers`` lists the stages in pipeline order: ``difficulty_filter`` (the pool), then at most
one selector (``curriculum``, ``prioritized`` or ``gaussian_curriculum``; uniform epochs when
none) — or the pair ``curriculum, prioritized`` (Kimi k1.5 §2.3.4: curriculum, then prioritized
from ``prioritized_from_step``) —, then ``easy_pool``, then ``dynamic``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Optional

from reasonrl.config import ConfigError, group_settings, knob
from reasonrl.contracts import ConfigGroup

#: stage of each sampler name: the configured order must not go backwards
STAGES = {
    "difficulty_filter": 0,
    "curriculum": 1,
    "prioritized": 1,
    "gaussian_curriculum": 1,
    "easy_pool": 2,
    "dynamic": 3,
}
SELECTORS = ("curriculum", "prioritized", "gaussian_curriculum")
#: the one allowed pair of selectors, in this order (Kimi k1.5 §2.3.4: curriculum, then prioritized)
CURRICULUM_THEN_PRIORITIZED = ("curriculum", "prioritized")
#: keys of one ``domain_filters`` rule, both required
DOMAIN_RULE_KEYS = ("threshold", "inclusive")
NEEDS_PASS_RATES = ("difficulty_filter", "gaussian_curriculum")
KEY = "reasonrl.sampling"


@dataclass
class SamplingConfig:
    """``reasonrl.sampling``: which prompts each step rolls out."""

    samplers: list = knob([], help=f"stages in order, from {list(STAGES)} (empty: plugin off)")
    seed: int = knob(0, help="seed of the sampler's own random generator (checkpointed with its state)")
    # dynamic sampling with replacement (DAPO, LongCat)
    max_requeues: int = knob(
        4, help="times per epoch a filtered prompt goes back to the pool before it counts as consumed", low=0
    )
    # easy-data pool (MiMo §3.3.2)
    alpha: float = knob(
        0.1, help="probability that a drawn prompt comes from the easy pool (MiMo: 0.1)", low=0.0, high=1.0
    )
    # curricula (Kimi; Llama-Nemotron §5.1)
    pace_steps: Optional[int] = knob(
        None,
        help="batches over which a curriculum goes from easy to hard (verl: default trainer.total_training_steps)",
        low=1,
    )
    start_fraction: float = knob(
        0.25, help="curriculum: easiest share of the pool drawable at step 0", low=0.0, high=1.0, low_open=True
    )
    bins: int = knob(10, help="Gaussian curriculum: equal-width pass-rate bins on [0, 1]", low=1)
    centre_start: float = knob(
        1.0, help="Gaussian curriculum: pass rate the target is centred on at step 0 (easy)", low=0.0, high=1.0
    )
    centre_end: float = knob(0.0, help="Gaussian curriculum: centre after pace_steps batches (hard)", low=0.0, high=1.0)
    width: float = knob(
        0.15, help="Gaussian curriculum: standard deviation of the target, in pass rate", low=0.0, low_open=True
    )
    # curriculum then prioritized (Kimi k1.5 §2.3.4, samplers [curriculum, prioritized])
    prioritized_from_step: Optional[int] = knob(
        None,
        help="[curriculum, prioritized]: batches drawn by the curriculum before prioritized sampling takes over "
        "(null: pace_steps, when the curriculum window covers the whole pool)",
        low=1,
    )
    curriculum_optional: bool = knob(
        False,
        help="[curriculum, prioritized]: with neither a pass rate nor a difficulty per prompt, skip the curriculum "
        "(prioritized from step 0, with a warning) instead of failing",
    )
    # prioritized (Kimi)
    unseen_success: float = knob(
        0.0, help="prioritized: success rate assumed for a prompt never rolled out", low=0.0, high=1.0
    )
    smoothing: float = knob(
        1.0, help="prioritized: pseudo-responses of unseen_success added to each prompt's record", low=0.0
    )
    min_priority: float = knob(
        0.0, help="prioritized: floor of 1 - s_i (0: solved prompts are never drawn)", low=0.0, high=1.0
    )
    # offline difficulty filter
    filter_threshold: float = knob(
        0.75,
        help="drop prompts whose pre-computed pass rate is >= this (Nemotron 0.75 of 8; MiMo > 0.9 of 16)",
        low=0.0,
        high=1.0,
    )
    filter_inclusive: bool = knob(
        True, help="drop pass rate == filter_threshold too (false: only above, as MiMo's '> 0.9')"
    )
    filter_schedule: list = knob(
        [],
        help="[[batch, threshold], ...]: from that batch on, filter_threshold is this one — a threshold lowered as "
        "training goes keeps ever harder prompts (LongCat §3.4.1's STEM curriculum); batches count from 0",
    )
    domain_filters: dict = knob(
        {},
        help="per-domain offline filter rules, domain label -> {threshold: [0, 1], inclusive: bool} "
        "(MiMo §3.2: math > 0.9, code only 16/16); other domains use filter_threshold/filter_inclusive",
    )
    domain_column: str = knob(
        "ability", help="verl: dataset column (or extra_info key) with each prompt's domain label for domain_filters"
    )
    # verl adapter
    pass_rate_column: str = knob(
        "pass_rate", help="verl: dataset column (or extra_info key) with each prompt's pre-computed pass rate"
    )
    difficulty_column: Optional[str] = knob(
        None, help="verl: curriculum by this label column (higher = harder) instead of pass rate"
    )
    score_key: str = knob(
        "acc", help="verl: reward_extra_info key with each response's score in [0, 1] ('reward': the summed rm_scores)"
    )

    def check(self) -> None:
        names = list(self.samplers)
        for name in names:
            if name not in STAGES:
                raise ConfigError(f"{KEY}.samplers", f"unknown sampler {name!r}: known {list(STAGES)}")
        if len(set(names)) != len(names):
            raise ConfigError(f"{KEY}.samplers", f"lists a sampler twice: {names}")
        chosen = [name for name in names if name in SELECTORS]
        if len(chosen) > 1 and tuple(chosen) != CURRICULUM_THEN_PRIORITIZED:
            raise ConfigError(
                f"{KEY}.samplers",
                f"{chosen} each decide the draw order: pick one of them (the one allowed pair is "
                f"{list(CURRICULUM_THEN_PRIORITIZED)}, in that order: Kimi's curriculum, then prioritized sampling)",
            )
        ranks = [STAGES[name] for name in names]
        if ranks != sorted(ranks):
            expected = sorted(names, key=STAGES.get)
            raise ConfigError(
                f"{KEY}.samplers",
                f"{names} is out of order: stages run pool filter → selector → easy_pool → dynamic, i.e. {expected}",
            )
        self.domain_filters = check_domain_filters(self.domain_filters)
        self.filter_schedule = check_filter_schedule(self.filter_schedule)

    def threshold_at(self, batch: int) -> float:
        """``filter_threshold`` for batch ``batch`` (0-based): the last scheduled one started by then."""
        threshold = self.filter_threshold
        for start, value in self.filter_schedule:
            if start <= batch:
                threshold = value
        return threshold

    def needs_pass_rates(self, has_difficulty: bool) -> bool:
        """Whether the samplers read a pre-computed pass rate per prompt (the curriculum only without
        a difficulty label, and not when Kimi's pair may skip it: ``curriculum_optional``)."""
        optional = self.curriculum_optional and self.selector == "curriculum+prioritized"
        needs = {"difficulty_filter", "gaussian_curriculum"} | (
            {"curriculum"} if not has_difficulty and not optional else set()
        )
        return bool(needs & set(self.samplers))

    def needs_domains(self) -> bool:
        """Whether the offline filter reads a domain label per prompt (``domain_filters``)."""
        return bool(self.domain_filters) and "difficulty_filter" in self.samplers

    @property
    def selector(self) -> str:
        """``uniform``, one of ``SELECTORS``, or ``curriculum+prioritized`` for the pair."""
        chosen = [name for name in self.samplers if name in SELECTORS]
        return "+".join(chosen) if chosen else "uniform"


def check_filter_schedule(schedule) -> list:
    """``filter_schedule`` as ``[[batch, threshold], ...]``, batches ascending, thresholds in [0, 1]."""
    key = f"{KEY}.filter_schedule"
    out = []
    for item in list(schedule or []):
        if not isinstance(item, (list, tuple)) or len(item) != 2:
            raise ConfigError(key, f"a list of [batch, threshold] pairs, got {item!r}")
        start, threshold = item
        if isinstance(start, bool) or not isinstance(start, int) or start < 0:
            raise ConfigError(key, f"a batch index is an integer >= 0, got {start!r}")
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0.0 <= threshold <= 1.0:
            raise ConfigError(key, f"a threshold lies in [0, 1], got {threshold!r}")
        if out and start <= out[-1][0]:
            raise ConfigError(key, f"batches must ascend, got {start} after {out[-1][0]}")
        out.append([start, float(threshold)])
    return out


def check_domain_filters(rules) -> dict:
    """``domain_filters`` as ``{domain: {"threshold": float, "inclusive": bool}}``; ConfigError
    naming the first bad key (``reasonrl.sampling.domain_filters.<domain>[.<field>]``)."""
    base = f"{KEY}.domain_filters"
    checked = {}
    for domain, rule in dict(rules).items():
        key = f"{base}.{domain}"
        if not isinstance(domain, str) or not domain:
            raise ConfigError(base, f"domain labels must be non-empty strings, got {domain!r}")
        if not isinstance(rule, Mapping):
            raise ConfigError(key, f"must be a mapping {{threshold: [0, 1], inclusive: bool}}, got {rule!r}")
        unknown = sorted(set(rule) - set(DOMAIN_RULE_KEYS), key=str)
        if unknown:
            raise ConfigError(f"{key}.{unknown[0]}", f"unknown key: a rule has exactly {list(DOMAIN_RULE_KEYS)}")
        for field in DOMAIN_RULE_KEYS:
            if field not in rule:
                raise ConfigError(f"{key}.{field}", f"is required: a rule has exactly {list(DOMAIN_RULE_KEYS)}")
        threshold, inclusive = rule["threshold"], rule["inclusive"]
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0.0 <= threshold <= 1.0:
            raise ConfigError(f"{key}.threshold", f"= {threshold!r} is out of range: allowed [0.0, 1.0]")
        if not isinstance(inclusive, bool):
            raise ConfigError(f"{key}.inclusive", f"expected bool, got {type(inclusive).__name__} {inclusive!r}")
        checked[domain] = {"threshold": float(threshold), "inclusive": inclusive}
    return checked


SAMPLING_GROUP = ConfigGroup(
    "sampling",
    SamplingConfig,
    "dynamic sampling with replacement, easy pool, curriculum, prioritized, Gaussian curriculum, difficulty filter",
)


def settings_from(config) -> SamplingConfig:
    """The validated ``reasonrl.sampling`` section of a run config (defaults when absent)."""
    return group_settings(config, SAMPLING_GROUP)
