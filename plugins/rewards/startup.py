"""The rewards plugin's start-up check in ``reasonrl train``'s driver: a run that will judge code
locally proves the judge's sandbox starts here before Ray does (docs/judge.md, "start-up probe")."""

from __future__ import annotations

import os
from typing import Any

from reasonrl.config import config_value
from reasonrl.errors import UserError


def first_code_file(config: Any) -> str | None:
    """The first parquet of ``data.train_files`` / ``data.val_files`` with a code problem (a
    ``reward_model.ground_truth`` holding tests), else None."""
    import pyarrow.parquet as pq

    from reasonrl.plugins.rewards.scoring import code_spec

    for key in ("data.train_files", "data.val_files"):
        files = config_value(config, key)
        for path in [files] if isinstance(files, str) else list(files or []):
            path = os.path.expanduser(str(path))
            if not path.endswith(".parquet") or not os.path.isfile(path):
                continue
            if "reward_model" not in pq.read_schema(path).names:
                continue
            for record in pq.read_table(path, columns=["reward_model"]).column("reward_model").to_pylist():
                if code_spec((record or {}).get("ground_truth"), None) is not None:
                    return path
    return None


def probe_judge_for_code_data(config: Any, settings: Any) -> None:
    """Start the local judge once and run its probe program when the data holds code problems."""
    from reasonrl.plugins.rewards.judge import SandboxUnavailable
    from reasonrl.plugins.rewards.scoring import make_judge

    if settings.judge_backend != "local":
        return
    code_file = first_code_file(config)
    if code_file is None:
        return
    try:
        make_judge(settings, probe=True).close()
    except SandboxUnavailable as error:
        raise UserError("reasonrl.rewards.judge_backend", f"{code_file} holds code problems, but {error}") from error
