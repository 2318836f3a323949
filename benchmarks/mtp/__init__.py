"""``reasonrl bench mtp`` (``bench.py``)."""

from benchmarks.mtp.bench import BENCHMARK

__all__ = ["BENCHMARK"]
