"""The start-up record of a launch (reasonrl.startup_clock): marks made before the run folder is
known are kept, every process of the run appends to one file, and the parts add up to the
whole start-up."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from omegaconf import OmegaConf

from reasonrl import startup_clock


@pytest.fixture
def clean_clock(monkeypatch):
    monkeypatch.setattr(startup_clock, "_pending", [])
    monkeypatch.setattr(startup_clock, "_record", None)
    monkeypatch.delenv(startup_clock.RECORD_ENV, raising=False)


def test_the_drivers_early_marks_wait_for_the_record_and_ray_processes_find_it(tmp_path, clean_clock):
    startup_clock.mark("config composed and checked", at=startup_clock.process_started() + 2.0)
    config = OmegaConf.create({"ray_kwargs": {"ray_init": {}}})
    path = startup_clock.start_record(tmp_path / "startup" / "launch.jsonl", config)
    assert config.ray_kwargs.ray_init.runtime_env.env_vars[startup_clock.RECORD_ENV] == str(path)
    startup_clock.mark("import verl", at=startup_clock.process_started() + 5.0)
    # a process of the run (verl's TaskRunner) appends through the environment Ray gives it
    env = {**os.environ, startup_clock.RECORD_ENV: str(path)}
    at = startup_clock.process_started() + 9.5
    code = f"from reasonrl import startup_clock; startup_clock.mark({startup_clock.FIRST_STEP!r}, at={at})"
    subprocess.run([sys.executable, "-c", code], env=env, check=True)

    entries = [json.loads(line) for line in path.read_text().splitlines()]
    assert [e["part"] for e in entries] == [
        startup_clock.LAUNCHED,
        "config composed and checked",
        "import verl",
        startup_clock.FIRST_STEP,
    ]
    assert len({e["pid"] for e in entries}) == 2
    parts = startup_clock.read_parts(path)
    assert [(p.name, round(p.seconds, 6)) for p in parts] == [
        ("config composed and checked", 2.0),
        ("import verl", 3.0),
        (startup_clock.FIRST_STEP, 4.5),
    ]
    assert startup_clock.until_first_step(parts) == pytest.approx(9.5)
    line = startup_clock.summary_line(path)
    assert "10 s to the first step" in line and "first step begins 4 s" in line


def test_a_launch_that_never_reached_its_first_step_has_no_total(tmp_path, clean_clock):
    config = OmegaConf.create({"ray_kwargs": {"ray_init": {}}})
    path = startup_clock.start_record(tmp_path / "launch.jsonl", config)
    startup_clock.mark("Ray started")
    assert startup_clock.until_first_step(startup_clock.read_parts(path)) is None
    assert startup_clock.summary_line(path) is None


def test_an_unwritable_record_is_reported_and_does_not_stop_the_run(tmp_path, clean_clock, capsys):
    config = OmegaConf.create({"ray_kwargs": {"ray_init": {}}})
    startup_clock.start_record(tmp_path / "gone" / "launch.jsonl", config)
    (tmp_path / "gone" / "launch.jsonl").unlink()
    (tmp_path / "gone").rmdir()
    startup_clock.mark("Ray started")
    assert "start-up record" in capsys.readouterr().err


def test_ray_init_is_marked_only_inside_the_block(tmp_path, clean_clock, monkeypatch):
    import ray

    calls = []
    monkeypatch.setattr(ray, "init", lambda *a, **k: calls.append(a))
    config = OmegaConf.create({"ray_kwargs": {"ray_init": {}}})
    path = startup_clock.start_record(tmp_path / "launch.jsonl", config)
    with startup_clock.marks_ray_start():
        ray.init("address")
    ray.init("again")
    assert calls == [("address",), ("again",)]
    assert [p.name for p in startup_clock.read_parts(path)] == ["Ray started"]
