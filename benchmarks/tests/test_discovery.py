"""``reasonrl bench`` finds the benchmarks in the source checkout, and says so plainly outside one."""

from __future__ import annotations

from reasonrl.cli.bench_command import BENCHMARKS_ENV, all_benchmarks, benchmarks_folder
from reasonrl.cli.main import main

BUILT_IN = {"cli", "overhead", "judge", "merge", "mtp", "objective", "puzzle-search", "rollout", "sampling"}


def test_the_checkout_lists_every_built_in_benchmark(monkeypatch):
    monkeypatch.delenv(BENCHMARKS_ENV, raising=False)
    assert benchmarks_folder() is not None
    assert BUILT_IN <= {b.name for b in all_benchmarks()}


def test_outside_a_checkout_bench_names_where_the_benchmarks_are(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv(BENCHMARKS_ENV, str(tmp_path / "benchmarks"))  # no such package: as from a wheel
    assert benchmarks_folder() is None
    assert main(["bench"]) == 2
    assert "run from a source checkout" in capsys.readouterr().err
    assert main(["bench", "rollout"]) == 2
    assert "run from a source checkout" in capsys.readouterr().err
