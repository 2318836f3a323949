"""Reading a judge's verdict from its text; never raises (LongCat §3.3, Kimi k1.5 §2.3.5).

The verdict is the judge's **last** ``<verdict>...</verdict>`` after its own reasoning (after the
``<think>`` block its reply opens with, when it thinks in tags; a ``</think>`` it quotes later
from the answer does not count): a judge may quote or discuss tags earlier, and its final word is
what counts. Contents map through the template's yes / no words; anything else,
or no tag, is unparsed (``None``): the caller scores it with a configurable value and counts it.
"""

from __future__ import annotations

import re

from reasonrl.plugins.model_rewards.templates import VerdictTemplate

_VERDICT = re.compile(r"<\s*verdict\s*>(.*?)<\s*/\s*verdict\s*>", re.IGNORECASE | re.DOTALL)


def parse_verdict(text: str | None, template: VerdictTemplate) -> float | None:
    """1.0 (yes), 0.0 (no) or None (unparsed) from the judge's ``text``.

    Example:
        >>> parse_verdict("equal after simplifying. <verdict>yes</verdict>", template)  # doctest: +SKIP
        1.0
    """
    if not isinstance(text, str):
        return None
    tail = text.lstrip()
    if tail.startswith("<think>"):  # the judge's own thinking: its first </think> closes it
        tail = tail.partition("</think>")[2]
    found = _VERDICT.findall(tail)
    if not found:
        return None
    word = re.sub(r"[^a-z]", "", found[-1].lower())
    if word in template.yes_words:
        return 1.0
    if word in template.no_words:
        return 0.0
    return None
