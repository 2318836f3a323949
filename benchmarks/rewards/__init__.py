"""``reasonrl bench judge`` (``bench.py``), with its multi-test workload against verl's prime_code
(``multitest_bench.py``)."""

from benchmarks.rewards.bench import BENCHMARK

__all__ = ["BENCHMARK"]
