"""The program in a model's response: the last fenced code block after the reasoning."""

from __future__ import annotations

import re

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+#-]*)[^\n]*\n(.*?)```", re.DOTALL)
_LANGUAGE_TAGS = {"python": "python", "py": "python", "python3": "python", "cpp": "cpp", "c++": "cpp", "cc": "cpp", "cxx": "cpp"}


def extract_code(response: str, default_language: str = "python") -> tuple[str, str] | None:
    """``(code, language)`` of the last fenced block after ``</think>`` (or anywhere when there is
    no think block); None if there is no block. Untagged blocks get ``default_language``."""
    head, separator, tail = response.rpartition("</think>")
    blocks = _FENCE.findall(tail if separator else response)
    if not blocks:
        return None
    tag, code = blocks[-1]
    language = _LANGUAGE_TAGS.get(tag.lower(), default_language if not tag else None)
    if language is None:
        return None
    return code, language
