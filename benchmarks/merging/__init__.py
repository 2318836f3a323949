"""``reasonrl bench merge`` (``bench.py``)."""

from benchmarks.merging.bench import BENCHMARK

__all__ = ["BENCHMARK"]
