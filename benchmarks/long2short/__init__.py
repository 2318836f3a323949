"""``reasonrl bench long2short`` (``compare.py``: the methods side by side on the long-CoT toy, ``toy.py``)."""

from benchmarks.long2short.compare import BENCHMARK

__all__ = ["BENCHMARK"]
