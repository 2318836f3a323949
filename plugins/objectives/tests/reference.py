"""Independent implementations written from the reports' equations (LongCat §3.2.1 Eq. 4, Kimi k1.5 §2.3.2) (not from the plugin's code),
element by element, as a reader of the reports would compute them."""

from __future__ import annotations

import math

import torch


def longcat_equation_4(
    log_prob, old_log_prob, rollout_log_prob, advantages, mask, eps_neg_low, eps_pos_high, eps_neg_high, tis_cap, t_max
):
    """The loss −J of LongCat equation 4, J = 1/(G·T_max) Σ_i Σ_t w·max(min(r·A, clip·A), ε_nh·A)
    [outer max only where A < 0], w = min(exp(old − rollout), C) without gradient; G = number
    of responses (rows), masked ones included."""
    rows, columns = log_prob.shape
    total = log_prob.new_zeros(())
    for i in range(rows):
        for t in range(columns):
            if not mask[i, t]:
                continue
            r = torch.exp(log_prob[i, t] - old_log_prob[i, t])
            a = advantages[i, t]
            clipped = torch.minimum(torch.maximum(r, r.new_tensor(1 - eps_neg_low)), r.new_tensor(1 + eps_pos_high))
            term = torch.minimum(r * a, clipped * a)
            if a < 0:
                term = torch.maximum(term, eps_neg_high * a)
            weight = min(math.exp(float(old_log_prob[i, t] - rollout_log_prob[i, t])), tis_cap)
            total = total + weight * term
    return -total / (rows * t_max)


def kimi_sample_losses(log_prob, old_log_prob, rewards, mask, tau):
    """Per-sample Kimi loss −(r_j − r̄)·log π(y_j) + τ/2·(log π(y_j) − log π_i(y_j))², the
    rows being the k samples of one prompt; returns their mean (mean_j)."""
    mean_reward = sum(rewards) / len(rewards)
    losses = []
    for j in range(log_prob.shape[0]):
        sequence_log_prob = sum(log_prob[j, t] for t in range(log_prob.shape[1]) if mask[j, t])
        sequence_old = sum(old_log_prob[j, t] for t in range(log_prob.shape[1]) if mask[j, t])
        losses.append(
            -(rewards[j] - mean_reward) * sequence_log_prob + tau / 2 * (sequence_log_prob - sequence_old) ** 2
        )
    return sum(losses) / len(losses)
