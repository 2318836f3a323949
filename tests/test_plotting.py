"""Metrics written by verl's own file logger are merged across launches and plotted."""

from __future__ import annotations

import pytest

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


def test_plot_refuses_a_missing_folder_or_one_without_metrics(tmp_path, capsys, monkeypatch):
    from reasonrl.cli.main import main
    from reasonrl.errors import DEBUG_ENV

    monkeypatch.delenv(DEBUG_ENV, raising=False)
    missing = tmp_path / "nonexistent"
    assert main(["plot", str(missing)]) == 2
    err = capsys.readouterr().err
    assert err == f"reasonrl plot: {missing}: no such folder\n", err
    assert main(["plot", str(tmp_path)]) == 2
    assert f"reasonrl plot: {tmp_path / 'metrics'}: no metrics records" in capsys.readouterr().err
    (tmp_path / "metrics").mkdir()
    (tmp_path / "metrics" / "launch.jsonl").write_text('{"step": 1, "data": {"critic/score/mean": 0.1}}\n')
    assert main(["plot", str(tmp_path), "--out", str(tmp_path / "no_dir" / "c.png")]) == 2
    assert f"{tmp_path / 'no_dir' / 'c.png'}: its folder" in capsys.readouterr().err


def test_a_damaged_metrics_record_is_named_by_line_and_a_cut_last_one_is_left_out(tmp_path):
    from reasonrl.errors import UserError
    from reasonrl.plotting import read_metrics_file

    path = tmp_path / "launch.jsonl"
    good = '{"step": 1, "data": {"critic/score/mean": 0.1}}\n'
    path.write_text(good + '{"step": 2, "data": {"critic/sc')  # a record being written
    assert list(read_metrics_file(path)) == [1]
    path.write_text(good + "not json\n" + good)
    with pytest.raises(UserError) as error:
        read_metrics_file(path)
    assert error.value.subject == f"{path}:2"
    path.write_text(good + '{"data": {}}\n')
    with pytest.raises(UserError, match="missing 'step'"):
        read_metrics_file(path)
