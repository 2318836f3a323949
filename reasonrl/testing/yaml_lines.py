"""Where a YAML file sets each leaf key, with the comment that governs it (for checks that a
value's comment says what it is based on). Block-style mappings only, as Hydra's config files
are written; flow values (``[a, b]``, ``{...}``) count as leaves.

A leaf's comment is the comment lines just above it; a leaf without one shares the comment of
the sibling run it belongs to (keys on consecutive lines under one comment), else its parent
key's comment.
"""

from __future__ import annotations

from pathlib import Path


def leaf_comments(path: Path) -> dict[str, str]:
    """``dotted.key -> governing comment text`` for every leaf the file sets."""
    out: dict[str, str] = {}
    stack: list[tuple[int, str, str]] = []  # (indent, key, comment) of the open mappings
    comments: list[str] = []
    run: tuple[int, str] | None = None  # (indent, comment) of the current sibling run
    for raw in Path(path).read_text().splitlines():
        stripped = raw.strip()
        if not stripped:
            comments, run = [], None
            continue
        if stripped.startswith("#"):
            comments.append(stripped.lstrip("# "))
            continue
        indent = len(raw) - len(raw.lstrip(" "))
        if stripped.startswith("- ") or ":" not in stripped:
            comments = []
            continue
        key, _, value = stripped.partition(":")
        key = key.strip()
        while stack and stack[-1][0] >= indent:
            stack.pop()
        own = " ".join(comments)
        if own:
            comment = own
        elif run is not None and run[0] == indent:
            comment = run[1]
        else:
            comment = stack[-1][2] if stack else ""
        run = (indent, comment)
        dotted = ".".join([*(name for _, name, _ in stack), key])
        if value.split(" #")[0].strip():
            out[dotted] = comment
        else:
            stack.append((indent, key, comment))
            run = None
        comments = []
    return out
