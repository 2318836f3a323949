"""Instruction-following reward: does the response obey the verifiable constraints its prompt set
(length, keywords, format, case, ...)? (Llama-Nemotron §6.1: RLOO with an instruction-following
verifier.)

The checks are IFEval's own (Google's instruction classes, as packaged by ``if-verifiable``); this
module only adds what a reward needs: the score kind, and refusing what cannot be checked instead
of skipping it (``if-verifiable`` silently skips an unknown id, and a check whose NLTK data is
missing raises mid-run):

    r = 1[every constraint holds]            (binary_*; the prompt-level accuracy)
      = #constraints that hold / #constraints (partial_*; the instruction-level accuracy)

``strict`` checks the response as written (after ``</think>``); ``loose`` also accepts it with
its first / last line or markdown asterisks removed (IFEval's loose variants).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

REWARD_KINDS = ("binary_strict", "binary_loose", "partial_strict", "partial_loose")
#: text a probe of each check runs on (two sentences, a comma, mixed case)
_PROBE = "Hello world. This is a probe, with some words."


class ConstraintError(ValueError):
    """A constraint id that does not exist or cannot be checked here (named)."""


@dataclass(frozen=True)
class ConstraintScore:
    score: float
    followed: tuple[bool, ...]  # per constraint, in the prompt's order (strict or loose, as scored)


@functools.lru_cache(maxsize=1)
def instruction_registry() -> dict[str, Any]:
    import langdetect
    from if_verifiable.ifeval.instructions_registry import INSTRUCTION_DICT

    # the language and case checks call langdetect, which samples: seeded, a response scores the
    # same every time it is checked
    langdetect.DetectorFactory.seed = 0
    return dict(INSTRUCTION_DICT)


@functools.lru_cache(maxsize=1)
def unavailable() -> dict[str, str]:
    """Checks that exist but cannot run on this machine, with why (probed once per process)."""
    reasons = {}
    for instruction_id, checker_class in instruction_registry().items():
        checker = checker_class(instruction_id)
        try:
            checker.build_description()
            if "prompt" in (checker.get_instruction_args() or {}):
                continue  # needs the prompt to build; checked when used
            checker.check_following(_PROBE)
        except LookupError as error:  # NLTK data (the punkt sentence splitter) not installed
            reasons[instruction_id] = f"needs NLTK data that is not installed: {str(error).strip().splitlines()[0]}"
        except Exception:  # noqa: BLE001 - a probe's odd default arguments, not a missing resource
            continue
    return reasons


def check_ids(instruction_ids: list[str]) -> None:
    """Raise :class:`ConstraintError` naming each id that is unknown or cannot run here."""
    known = instruction_registry()
    problems = [f"{i!r} is not an IFEval instruction" for i in instruction_ids if i not in known]
    problems += [f"{i!r} {unavailable()[i]}" for i in instruction_ids if i in unavailable()]
    if problems:
        raise ConstraintError("; ".join(problems))


def constraint_reward(
    response: str,
    instruction_ids: list[str],
    kwargs_list: list[dict[str, Any]],
    prompt: str = "",
    kind: str = "binary_strict",
) -> ConstraintScore:
    """Score ``response`` against its prompt's constraints.

    Args:
        response: the policy's text (any ``<think>`` block is not checked).
        instruction_ids: IFEval ids, e.g. ``["keywords:existence", "change_case:english_lowercase"]``.
        kwargs_list: one dict of arguments per id (``{"keywords": ["river"]}``; ``{}`` for none).
        prompt: the prompt, for the checks that read it (``combination:repeat_prompt``).
        kind: one of ``REWARD_KINDS``.

    Returns:
        The score and which constraints held.

    Example:
        >>> constraint_reward("a calm river.", ["keywords:existence", "change_case:english_lowercase"],
        ...                   [{"keywords": ["river"]}, {}]).score
        1.0
    """
    from if_verifiable.common import evaluate_instructions

    if kind not in REWARD_KINDS:
        raise ValueError(f"kind must be one of {REWARD_KINDS}, got {kind!r}")
    if not instruction_ids or len(kwargs_list) != len(instruction_ids):
        raise ConstraintError(f"{len(instruction_ids)} constraint ids with {len(kwargs_list)} argument dicts")
    check_ids(list(instruction_ids))
    results, scores = evaluate_instructions(
        response, list(instruction_ids), list(kwargs_list), prompt, instruction_registry()
    )
    loose = kind.endswith("loose")
    followed = tuple(r.loose_pass if loose else r.strict_pass for r in results)
    if len(followed) < len(instruction_ids):  # an empty answer (or only thinking): nothing held
        followed = (False,) * len(instruction_ids)
    return ConstraintScore(float(getattr(scores, kind)), followed)
