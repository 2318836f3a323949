"""Metrics written by verl's own file logger are merged across launches and plotted."""

from __future__ import annotations

from reasonrl.plotting import load_metrics, plot_run


def _log(path, steps):
    import os

    from verl.utils.tracking import FileLogger

    os.environ["VERL_FILE_LOGGER_PATH"] = str(path)
    try:
        logger = FileLogger("p", "e")
        for step, reward, length in steps:
            logger.log({"critic/score/mean": reward, "response_length/mean": length}, step)
        logger.finish()
    finally:
        del os.environ["VERL_FILE_LOGGER_PATH"]


def test_resumed_run_is_merged_and_plotted(tmp_path):
    import os
    import time

    (tmp_path / "metrics").mkdir()
    _log(tmp_path / "metrics" / "launch1.jsonl", [(1, 0.1, 5.0), (2, 0.2, 4.0), (3, 0.9, 1.0)])
    time.sleep(0.01)
    _log(tmp_path / "metrics" / "launch2.jsonl", [(3, 0.3, 4.0), (4, 0.4, 3.0)])  # resumed from step 2
    os.utime(tmp_path / "metrics" / "launch2.jsonl")
    metrics = load_metrics(tmp_path)
    assert list(metrics) == [1, 2, 3, 4]
    assert metrics[3]["critic/score/mean"] == 0.3, "the later launch wins for a repeated step"
    png = plot_run(tmp_path)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000


def test_moving_average_covers_full_windows_only():
    from reasonrl.plotting import moving_average

    assert moving_average([1.0, 2.0, 3.0, 4.0], 2) == [1.5, 2.5, 3.5]
    assert moving_average([1.0], 2) == []
