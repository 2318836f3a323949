"""The data card: what each stage dropped and why, as a table (``card.md``) beside ``card.json``."""

from __future__ import annotations


def card_markdown(card: dict) -> str:
    lines = [
        f"# Data card\n\nsource: `{card.get('source', '?')}`; rows read: {card.get('read', {}).get('rows', '?')}\n"
    ]
    lines += ["| stage | rows in | dropped | rows out | why (count) | seconds |", "|---|---:|---:|---:|---|---:|"]
    for entry in card.get("stages", []):
        reasons = ", ".join(f"{reason} {count}" for reason, count in entry["dropped"].items()) or "-"
        extra = ", ".join(f"{key} {value}" for key, value in entry.get("counters", {}).items())
        why = reasons + (f"; {extra}" if extra else "")
        dropped = entry["rows_in"] - entry["rows_out"]
        lines.append(
            f"| {entry['stage']} | {entry['rows_in']} | {dropped} | {entry['rows_out']} | {why} | {entry['seconds']} |"
        )
    if "output" in card:
        lines.append(f"\noutput: `{card['output']['path']}` ({card['output']['rows']} rows, verl's columns)")
    lines.append("\nEach dropped row, with its reason: `stages/NN_<stage>.drops.jsonl`.")
    return "\n".join(lines) + "\n"
