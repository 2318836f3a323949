"""The core's benchmarks: ``reasonrl bench cli`` (``latency_bench.py``), ``reasonrl bench overhead``
(``overhead.py``)."""

from benchmarks.core import latency_bench, overhead

BENCHMARKS = [latency_bench.BENCHMARK, overhead.BENCHMARK]
