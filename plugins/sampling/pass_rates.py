"""Offline pass rates (Llama-Nemotron §5.1, MiMo §3.2): per prompt, the share of its
logged responses that passed, from rollout or verdict records. Framework-free.

A record names its prompt (``key_field``) and carries a score: a number (passed when
>= ``success_at``), a boolean, or a list of per-test results (passed when all pass: the
judge's verdict lines).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Iterable, Mapping


def lookup(record: Mapping[str, Any], dotted: str) -> Any:
    """``record["a"]["b"]`` for ``"a.b"``; KeyError naming the path when absent."""
    value: Any = record
    for part in dotted.split("."):
        if not isinstance(value, Mapping) or part not in value:
            raise KeyError(dotted)
        value = value[part]
    return value


def passed(score: Any, success_at: float) -> bool:
    if isinstance(score, bool):
        return score
    if isinstance(score, (list, tuple)):
        return bool(score) and all(
            passed(item, success_at) if not isinstance(item, str) else item == "passed" for item in score
        )
    return float(score) >= success_at


def tally(
    records: Iterable[Mapping[str, Any]], key_field: str, score_field: str, success_at: float = 1.0
) -> dict[Any, tuple[int, int]]:
    """prompt key → (responses passed, responses logged)."""
    counts: dict[Any, list[int]] = defaultdict(lambda: [0, 0])
    for number, record in enumerate(records, 1):
        try:
            key, score = lookup(record, key_field), lookup(record, score_field)
        except KeyError as missing:
            raise KeyError(f"record {number} has no field {missing.args[0]!r} (fields: {sorted(record)})") from None
        entry = counts[key if not isinstance(key, list) else tuple(key)]
        entry[0] += passed(score, success_at)
        entry[1] += 1
    return {key: (hits, total) for key, (hits, total) in counts.items()}


def pass_rate_column(
    dataset_keys: list, counts: Mapping[Any, tuple[int, int]], min_samples: int = 1, missing: float | None = None
) -> list[float]:
    """One pass rate per dataset row. A row with fewer than ``min_samples`` logged responses gets
    ``missing``; ``missing=None`` makes that an error (listing a few such rows)."""
    column, short = [], []
    for row, key in enumerate(dataset_keys):
        hits, total = counts.get(key, (0, 0))
        if total < min_samples:
            short.append((row, key, total))
            column.append(missing)
        else:
            column.append(hits / total)
    if short and missing is None:
        raise ValueError(
            f"{len(short)} of {len(dataset_keys)} rows have fewer than {min_samples} logged "
            f"responses, e.g. (row, key, responses) {short[:3]}; pass --missing <value> to fill them"
        )
    return column
