"""Knobs at ``reasonrl.rollout``, validated before any work.

The option files (``+reasonrl/rollout=<option>``, in ``hydra_configs/reasonrl/rollout/``) set
them together with verl's own keys they map onto.
"""

from __future__ import annotations

from dataclasses import dataclass

from reasonrl.config import ConfigError, group_settings, knob
from reasonrl.contracts import ConfigGroup

KEY = "reasonrl.rollout"
#: The per-response field the request transform records vLLM's stop reason under (verl keeps it in
#: ``extra_fields``).
STOP_REASON_FIELD = "reasonrl_stop_reason"
#: vLLM's finish reason for a generation stopped by repetition detection.
REPETITION = "repetition"
#: Partial rollout: the per-iteration budget, a batch field on training batches only (validation
#: requests run unbudgeted).
BUDGET_FIELD = "reasonrl_token_budget"
#: Partial rollout: per-row JSON list of a held group's response records (``PartialTrajectory``),
#: ``""`` on rows of new prompts.
CARRIED_FIELD = "reasonrl_carried"
#: Partial rollout: each response's record (segments, versions, unfinished) in its extra fields.
PARTIAL_FIELD = "reasonrl_partial"


@dataclass
class RolloutConfig:
    """``reasonrl.rollout``: repeat detection, partial rollout and staleness knobs.

    Repeat detection (Kimi k1.5 §2.6.2) is vLLM's own (``SamplingParams.repetition_detection``): a
    generation whose tail is one token pattern of ``repetition_min_pattern``–``repetition_max_pattern``
    tokens repeated ``repetition_min_count`` times stops there with finish reason ``repetition``."""

    repetition_max_pattern: int = knob(0, help="longest repeated pattern in tokens; 0: repeat detection off", low=0)
    repetition_min_pattern: int = knob(1, help="shortest repeated pattern in tokens (<= repetition_max_pattern)", low=1)
    repetition_min_count: int = knob(8, help="consecutive repetitions of the pattern that stop a generation", low=2)
    repetition_penalty: float = knob(
        0.0,
        help="subtracted from the reward of a generation stopped for repetition (Kimi: 'an extra penalty'; "
        "its size is not given: assumption)",
        low=0.0,
    )
    token_budget: int | None = knob(
        None,
        help="Kimi §2.6.2 partial rollout: output tokens a trajectory may generate per iteration (>= 1); "
        "an unfinished one continues in a later iteration; null: off",
    )
    earlier_segments_in_loss: bool = knob(
        False,
        help="whether tokens generated in earlier iterations (older policies) count in the loss "
        "(Kimi: they can be excluded; only the current segment is on-policy)",
    )
    seamless: bool = knob(
        False,
        help="MiMo §3.4.1 seamless rollout: prompts launched on demand from the live valid rate, the step "
        "stopped by FIFO early termination (requests still in flight aborted)",
    )
    staleness: int | None = knob(
        None,
        help="LongCat §3.1.1 DORA: policy versions a finished sample may lag the trainer (>= 0); without `dora`: "
        "runs the seamless schedule and keeps its surplus finished groups for later steps; null: off",
    )
    reuse_ratio: float = knob(
        0.0,
        help="share of a batch that over-sampled finished samples kept from earlier steps may fill (within "
        "the staleness bound)",
        low=0.0,
        high=1.0,
    )

    dora: bool = knob(
        False,
        help="LongCat §3.1.1 DORA: generation replicas apart from the trainer (trainer mode reasonrl_separate_async), "
        "updated a group at a time so that several policy versions generate at once; a finished group trains "
        "while its oldest version is at most `staleness` behind",
    )
    dora_update_group: int = knob(
        1,
        help="DORA: replicas updated per weight sync (the oldest first; any that would lag `staleness` or more "
        "versions are updated too); the number of replicas: all at once, as verl does",
        low=1,
    )

    @property
    def repetition_detection(self) -> bool:
        return self.repetition_max_pattern > 0

    def check(self) -> None:
        if self.token_budget is not None and int(self.token_budget) < 1:
            raise ConfigError(
                f"{KEY}.token_budget", f"must be >= 1 token per iteration (or null: off), got {self.token_budget}"
            )
        if self.staleness is not None and int(self.staleness) < 0:
            raise ConfigError(f"{KEY}.staleness", f"must be >= 0 policy versions (or null: off), got {self.staleness}")
        if self.dora and (self.staleness is None or int(self.staleness) < 1):
            raise ConfigError(
                f"{KEY}.staleness",
                f"DORA needs its bound, >= 1 policy version (samples generated during a step train after it; "
                f"2: two versions generate at once), got {self.staleness}",
            )
        if self.dora and (self.seamless or self.token_budget is not None):
            raise ConfigError(
                f"{KEY}.dora",
                "runs verl's separate_async streaming: not with seamless rollout or token_budget (synchronous "
                "schedules); pick one",
            )
        if self.token_budget is not None and self.staleness is not None:
            raise ConfigError(
                f"{KEY}.staleness",
                "cannot run with token_budget (partial rollout): DORA generates each response with one policy "
                "version, partial rollout continues it under newer ones; pick one",
            )
        if self.seamless and self.token_budget is not None:
            raise ConfigError(
                f"{KEY}.seamless",
                "cannot run with token_budget (partial rollout): both decide when a group leaves the step; pick one",
            )
        if self.repetition_detection and self.repetition_min_pattern > self.repetition_max_pattern:
            raise ConfigError(
                f"{KEY}.repetition_min_pattern",
                f"({self.repetition_min_pattern}) must be <= repetition_max_pattern ({self.repetition_max_pattern})",
            )


ROLLOUT_GROUP = ConfigGroup(
    "rollout",
    RolloutConfig,
    "rollout: repeat detection, partial rollout with a token budget, staleness-bounded streaming",
)


def settings_from(config) -> RolloutConfig:
    """The validated ``reasonrl.rollout`` section of a run config (defaults when absent)."""
    return group_settings(config, ROLLOUT_GROUP)
