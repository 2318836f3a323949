"""``reasonrl bench sampling`` (``bench.py``) on a simulated training run (``simulation.py``)."""

from benchmarks.sampling.bench import BENCHMARK

__all__ = ["BENCHMARK"]
