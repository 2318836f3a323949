"""``reasonrl bench model-rewards`` (``bench.py``: verdicts per second from a served judge, with and without the cache)."""

from benchmarks.model_rewards.bench import BENCHMARK

__all__ = ["BENCHMARK"]
