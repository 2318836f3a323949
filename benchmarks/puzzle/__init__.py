"""``reasonrl bench puzzle-search`` (``bench.py``) on Puzzle-like menus (``instances.py``)."""

from benchmarks.puzzle.bench import BENCHMARK

__all__ = ["BENCHMARK"]
