"""The merging commands' YAML files read with named errors (``reasonrl merge``, ``reasonrl domain-parallel``)."""

from __future__ import annotations

from pathlib import Path

from reasonrl.errors import UserError


def read_yaml(path: Path) -> dict:
    """The mapping ``path`` holds; else :class:`UserError` naming the file (``path:line`` for a
    YAML syntax error)."""
    import yaml

    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise UserError(path, "no such file") from None
    except (OSError, UnicodeDecodeError) as error:
        raise UserError(path, f"cannot read: {getattr(error, 'strerror', None) or error}") from None
    try:
        values = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        problem = getattr(error, "problem", None) or str(error)
        column = f" (column {mark.column + 1})" if mark is not None else ""
        raise UserError(where, f"invalid YAML: {problem}{column}") from None
    if values is None:
        return {}
    if not isinstance(values, dict):
        raise UserError(path, f"expected a mapping of keys, got a YAML {type(values).__name__}")
    return values
