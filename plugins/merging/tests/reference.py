"""An independent implementation of the merge rules, written entry by entry from the equations
(numpy, float64, explicit loops) — not from the plugin's code."""

from __future__ import annotations

import math

import numpy as np


def fuse_reference(base, experts, *, normalize, keep_masks, drop_rate, erase, scale):
    """LongCat §3.4 fusion of one tensor. ``keep_masks``: per expert, a boolean array of the kept
    entries (None: nothing dropped)."""
    base = np.asarray(base, dtype=np.float64)
    taus = [np.asarray(e, dtype=np.float64) - base for e in experts]
    if normalize:
        norms = [math.sqrt(sum(float(x) ** 2 for x in tau.ravel())) for tau in taus]
        mean_norm = sum(norms) / len(norms)
        taus = [tau * (mean_norm / n) if n > 0 else np.zeros_like(tau) for tau, n in zip(taus, norms)]
    if keep_masks is not None:
        taus = [np.where(mask, tau / (1.0 - drop_rate), 0.0) for tau, mask in zip(taus, keep_masks)]
    out = base.copy().ravel()
    flat = [tau.ravel() for tau in taus]
    for j in range(out.size):
        total = sum(t[j] for t in flat)
        majority = int(total > 0) - int(total < 0)
        kept = []
        for t in flat:
            value = t[j]
            if value == 0:
                continue
            sign = int(value > 0) - int(value < 0)
            if erase and sign != majority:
                continue
            kept.append(value)
        merged = sum(kept) / len(kept) if kept else 0.0
        out[j] = out[j] + scale * merged
    return out.reshape(base.shape)


def average_reference(models, weights):
    total = sum(w * np.asarray(m, dtype=np.float64) for w, m in zip(weights, models))
    return total / sum(weights)


def task_arithmetic_reference(base, experts, scale):
    base = np.asarray(base, dtype=np.float64)
    return base + scale * sum(np.asarray(e, dtype=np.float64) - base for e in experts)
