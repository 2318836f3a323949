"""``reasonrl bench cli``: the core's benchmark (``latency_bench.py``)."""

from benchmarks.core.latency_bench import BENCHMARK

__all__ = ["BENCHMARK"]
