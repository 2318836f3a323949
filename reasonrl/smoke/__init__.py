"""The tiny world of the CPU smoke run: a character tokenizer, a small Qwen2-style causal LM
warm-started on two-digit addition, the task's verl parquet data and its rule-based reward.

Everything is built locally and deterministically (no downloads) and cached by content
hash; ``reasonrl smoke prepare`` builds it, the ``cpu_tiny`` preset points verl at it.
"""
