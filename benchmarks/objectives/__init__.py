"""``reasonrl bench objective`` (``bench.py``)."""

from benchmarks.objectives.bench import BENCHMARK

__all__ = ["BENCHMARK"]
