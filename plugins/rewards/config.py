"""Knobs at ``reasonrl.rewards`` (MiMo §3.2–3.3.1, Kimi k1.5 §2.3.3, LongCat §3.2.2, Llama-Nemotron §4), validated before any work.

The option files ``+reasonrl/rewards=<report>`` (``hydra_configs/reasonrl/rewards/``) set
them per report and point verl at the plugin's reward manager (``reward.reward_manager.name
= reasonrl``) and, where needed, at trainer mode ``reasonrl_sync`` and the ``masked_grpo``
advantage estimator.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from reasonrl.config import ConfigError, group_settings, knob
from reasonrl.contracts import ConfigGroup
from reasonrl.plugins.rewards.difficulty import SCHEMES

BACKENDS = ("local", "sandbox_fusion")


@dataclass
class RewardsConfig:
    """``reasonrl.rewards``: code judge, code/math/format rewards, length penalty, masking."""

    # code judge
    judge_backend: str = knob(
        "local", help="where code runs: bubblewrap sandboxes here (local) or a SandboxFusion server", choices=BACKENDS
    )
    sandbox_fusion_url: Optional[str] = knob(None, help="SandboxFusion /run_code URL (judge_backend=sandbox_fusion)")
    judge_workers: Optional[int] = knob(
        None, help="sandboxed runners per reward worker process (default: cores / reward.num_workers)", low=1
    )
    time_limit_s: float = knob(2.0, help="CPU seconds per test (wall clock: 2× + 0.5 s)", low=0.01)
    memory_limit_mb: int = knob(1024, help="address-space limit per run, MiB", low=64)
    max_processes: int = knob(32, help="processes/threads a run may have", low=1)
    float_tolerance: Optional[float] = knob(
        None, help="stdout tokens that parse as numbers match within tol·max(1,|expected|)", low=0.0
    )
    # math reward: Math-Verify in worker processes with a hard per-answer bound
    math_timeout_s: float = knob(
        5.0,
        help="seconds one math answer may take to grade; past it the answer scores 0 (math_timeout)",
        low=0.1,
        high=600.0,
    )
    math_workers: Optional[int] = knob(
        None,
        help="Math-Verify worker processes per reward worker process (default: cores / reward.num_workers, at most 4)",
        low=1,
    )
    math_memory_limit_mb: int = knob(2048, help="address-space limit of each Math-Verify worker process, MiB", low=512)
    # test-difficulty-driven code reward (MiMo §3.3.1)
    code_scheme: str = knob(
        "strict", help="code reward: strict / soft (MiMo §3.3.1) or all_or_nothing (baseline)", choices=SCHEMES
    )
    # Llama-Nemotron reasoning toggle
    thinking_format_weight: float = knob(
        0.0,
        help="weight of the thinking-toggle format reward (1 if the format matches the system prompt's toggle)",
        low=0.0,
    )
    # Kimi k1.5 §2.3.3 length penalty
    length_penalty_weight: float = knob(
        0.0, help="weight of the group-relative length reward added to the task reward (0: off)", low=0.0
    )
    length_penalty_warmup_steps: int = knob(0, help="training steps without the length penalty (Kimi: warm-up)", low=0)
    # LongCat incomplete-signal masking
    mask_incomplete: bool = knob(
        False, help="leave judge errors and non-repetitive truncated responses out of the loss and of group statistics"
    )
    repetition_window: int = knob(256, help="tokens at the end of a response checked for a repetition loop", low=8)
    repetition_min_repeats: int = knob(4, help="a loop repeats one chunk at least this many times in the window", low=2)

    def check(self) -> None:
        if self.judge_backend == "sandbox_fusion" and not self.sandbox_fusion_url:
            raise ConfigError(
                "reasonrl.rewards.sandbox_fusion_url",
                "is required with judge_backend=sandbox_fusion: the server's /run_code URL",
            )
        if self.sandbox_fusion_url and not self.sandbox_fusion_url.startswith(("http://", "https://")):
            raise ConfigError(
                "reasonrl.rewards.sandbox_fusion_url", f"must be an http(s) URL, got {self.sandbox_fusion_url!r}"
            )

    def verifier_settings(self, reward_workers: int = 1):
        """The math verifier's settings for one reward worker process of ``reward_workers``."""
        import os

        from reasonrl.plugins.rewards.math_verifier import VerifierSettings

        workers = self.math_workers or max(1, min(4, (os.cpu_count() or 1) // max(1, reward_workers)))
        return VerifierSettings(workers=workers, timeout_s=self.math_timeout_s, memory_mb=self.math_memory_limit_mb)

    @property
    def needs_group_callback(self) -> bool:
        return self.length_penalty_weight > 0 or self.mask_incomplete


REWARDS_GROUP = ConfigGroup(
    "rewards",
    RewardsConfig,
    "code judge + test-difficulty reward, Math-Verify, thinking toggle, Kimi length penalty, incomplete-signal masking",
)


def settings_from(config) -> RewardsConfig:
    """The validated ``reasonrl.rewards`` section of a run config (defaults when absent)."""
    return group_settings(config, REWARDS_GROUP)
