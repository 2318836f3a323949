"""Partial rollout, framework-free (Kimi k1.5 §2.6.2 "Partial Rollouts for Long CoT RL").

Each iteration a trajectory may generate at most ``token_budget`` output tokens. One that has
not finished keeps its tokens so far (checkpointed: a restart loses none) and is continued in a
later iteration — under the newer policy — from its prompt plus those tokens. Every segment
records the policy version that wrote it; only the current iteration's segment is on-policy, and
the earlier segments' tokens can be left out of the loss (``earlier_segments_in_loss``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable


@dataclass
class Segment:
    version: int  # the policy version (training step) that generated these tokens
    token_ids: list[int]


@dataclass
class PartialTrajectory:
    """One response across iterations: its prompt, the dataset row it came from, its segments so
    far, whether it still needs more tokens, and its engine log-probs when the run records them."""

    key: str
    row: int
    prompt_ids: list[int]
    segments: list[Segment] = field(default_factory=list)
    unfinished: bool = True
    logprobs: list[float] | None = None
    stop_reason: str | None = None  # the engine's, for the last segment (e.g. "repetition")

    @property
    def response_ids(self) -> list[int]:
        return [token for segment in self.segments for token in segment.token_ids]

    def continuation_request(self, token_budget: int, max_response_length: int) -> tuple[list[int], int]:
        """What to send the engine this iteration: the prompt followed by the tokens so far, and
        ``max_tokens`` = the budget, capped by what the response length still allows."""
        generated = len(self.response_ids)
        remaining = max_response_length - generated
        if remaining < 1:
            raise ValueError(f"trajectory {self.key} already holds {generated} >= {max_response_length} tokens")
        return self.prompt_ids + self.response_ids, min(int(token_budget), remaining)

    def extend(self, version: int, token_ids: Iterable[int]) -> None:
        self.segments.append(Segment(int(version), [int(t) for t in token_ids]))

    def to_record(self) -> dict[str, Any]:
        """JSON-able (a batch field, the TransferQueue's extra fields, the checkpoint)."""
        return {
            "key": self.key,
            "row": self.row,
            "prompt_ids": list(self.prompt_ids),
            "versions": [s.version for s in self.segments],
            "segments": [list(s.token_ids) for s in self.segments],
            "unfinished": bool(self.unfinished),
            "logprobs": None if self.logprobs is None else [float(x) for x in self.logprobs],
            "stop_reason": self.stop_reason,
        }

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> PartialTrajectory:
        segments = [Segment(int(v), [int(x) for x in ids]) for v, ids in zip(record["versions"], record["segments"])]
        logprobs = record.get("logprobs")
        return cls(
            str(record["key"]),
            int(record["row"]),
            [int(x) for x in record["prompt_ids"]],
            segments,
            bool(record.get("unfinished", True)),
            None if logprobs is None else [float(x) for x in logprobs],
            record.get("stop_reason"),
        )


def is_unfinished(new_tokens: int, token_budget: int, finished_by_engine: bool) -> bool:
    """A segment that used its whole budget without an end (EOS, stop, repetition) continues."""
    return not finished_by_engine and new_tokens >= token_budget


def segment_loss_mask(segment_lengths: list[int], earlier_segments_in_loss: bool) -> list[int]:
    """Per response token: 1 where it counts in the loss. The last segment (this iteration's,
    on-policy) always counts; earlier segments only if ``earlier_segments_in_loss``."""
    mask: list[int] = []
    for position, length in enumerate(segment_lengths):
        current = position == len(segment_lengths) - 1
        mask += [1 if (current or earlier_segments_in_loss) else 0] * int(length)
    return mask


@dataclass
class HeldGroup:
    """A prompt's group of responses held back from training because at least one is unfinished;
    the whole group goes out again next iteration (finished responses as they are, unfinished ones
    continued), so its rewards and advantages are computed over complete responses only."""

    key: str
    row: int
    responses: list[PartialTrajectory]

    @property
    def unfinished(self) -> int:
        return sum(r.unfinished for r in self.responses)


class PartialRolloutStore:
    """Held groups waiting for their next iteration, oldest first (checkpointed with the run)."""

    def __init__(self) -> None:
        self._waiting: dict[str, HeldGroup] = {}

    def __len__(self) -> int:
        return len(self._waiting)

    def put(self, group: HeldGroup) -> None:
        self._waiting.pop(group.key, None)
        self._waiting[group.key] = group  # re-inserted: goes to the back of the queue

    def take(self, count: int) -> list[HeldGroup]:
        """The ``count`` longest-waiting groups, removed from the store."""
        keys = list(self._waiting)[: max(0, int(count))]
        return [self._waiting.pop(key) for key in keys]

    def unfinished_responses(self) -> int:
        return sum(group.unfinished for group in self._waiting.values())

    def state_dict(self) -> dict[str, Any]:
        return {
            "groups": [
                {"key": g.key, "row": g.row, "responses": [r.to_record() for r in g.responses]}
                for g in self._waiting.values()
            ]
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._waiting = {}
        for item in state.get("groups", []):
            responses = [PartialTrajectory.from_record(record) for record in item["responses"]]
            self.put(HeldGroup(str(item["key"]), int(item["row"]), responses))
