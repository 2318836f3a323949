"""docs/bad_input.md is the output of scripts/bad_input_table.py over all its cases (each case's
behaviour is tested where it is built; this keeps the table from drifting from the script)."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _script():
    spec = importlib.util.spec_from_file_location("bad_input_table", ROOT / "scripts" / "bad_input_table.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_the_table_lists_every_case_of_the_script_once_each_refused_with_exit_2_and_no_traceback():
    rows = [line for line in (ROOT / "docs" / "bad_input.md").read_text().splitlines() if line.startswith("| `")]
    named = [re.match(r"\| `([^`]+)`", row).group(1) for row in rows]
    assert named == [case.name for case in _script().CASES]
    for row in rows:
        cells = [cell.strip() for cell in row.strip("|").split(" | ")]
        assert cells[3] == "2" and cells[4] == "no", row
