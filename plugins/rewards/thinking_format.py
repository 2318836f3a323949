"""Llama-Nemotron's reasoning toggle (Llama-Nemotron §4): the system prompt says
"detailed thinking on" or "detailed thinking off", and a format reward checks the response.

- on:  the reasoning sits in exactly one ``<think>…</think>`` block at the start of the
  response, followed by a non-empty answer;
- off: no ``<think>`` or ``</think>`` tag anywhere.

``with_thinking_prompt`` is the prompt-side transform: it inserts (or replaces) the system
message by a per-sample or per-dataset setting.
"""

from __future__ import annotations

import re

THINKING_ON = "detailed thinking on"
THINKING_OFF = "detailed thinking off"
_THINK_BLOCK = re.compile(r"\s*<think>(?P<thinking>.*?)</think>(?P<answer>.*)", re.DOTALL)


def thinking_mode_in_text(text: str) -> str | None:
    """``"on"``/``"off"`` if ``text`` (a system message, a rendered prompt) sets the toggle, else None."""
    text = text.lower()
    if THINKING_ON in text:
        return "on"
    if THINKING_OFF in text:
        return "off"
    return None


def thinking_mode(messages: list[dict]) -> str | None:
    """``"on"``/``"off"`` from the system message of a chat prompt, None when it sets neither."""
    for message in messages:
        if message.get("role") == "system":
            mode = thinking_mode_in_text(str(message.get("content", "")))
            if mode is not None:
                return mode
    return None


def format_ok(response: str, mode: str) -> bool:
    """Does ``response`` follow the format that ``mode`` ("on"/"off") asks for?"""
    if mode == "off":
        return "<think>" not in response and "</think>" not in response
    if mode != "on":
        raise ValueError(f"thinking mode must be 'on' or 'off', got {mode!r}")
    match = _THINK_BLOCK.fullmatch(response)
    if not match:
        return False
    thinking, answer = match["thinking"], match["answer"]
    return (
        bool(thinking.strip())
        and bool(answer.strip())
        and "<think>" not in thinking + answer
        and "</think>" not in answer
    )


def with_thinking_prompt(messages: list[dict], thinking: bool | str) -> list[dict]:
    """The chat prompt with the toggle as its system message (an existing toggle is replaced,
    other system text is kept after it). ``thinking``: True/"on" or False/"off"."""
    if isinstance(thinking, str):
        if thinking not in ("on", "off"):
            raise ValueError(f"thinking must be 'on', 'off' or a bool, got {thinking!r}")
        thinking = thinking == "on"
    toggle = THINKING_ON if thinking else THINKING_OFF
    rest = [dict(m) for m in messages]
    if rest and rest[0].get("role") == "system":
        kept = re.sub(
            r"detailed thinking (on|off)\s*", "", str(rest[0].get("content", "")), flags=re.IGNORECASE
        ).strip()
        rest[0]["content"] = toggle + ("\n" + kept if kept else "")
        return rest
    return [{"role": "system", "content": toggle}, *rest]
