from __future__ import annotations

import pytest

from integration_tests.mtp.mimo_checkpoints import smoke_mimo


@pytest.fixture(scope="session")
def mimo_checkpoint(tmp_path_factory):
    """(model folder, held-out sequences): built once for the MTP tests (the runs only read it:
    verl loads it, each run saves to its own folder)."""
    root = tmp_path_factory.mktemp("smoke_mimo")
    return smoke_mimo(root), root / "held_out.jsonl"
