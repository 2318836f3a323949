"""Reward-aware preference optimization (RPO; Llama-Nemotron §6.2; defined in the Nemotron-4 340B report).

DPO asks the policy to prefer the chosen response by any margin; RPO asks its implicit reward
margin to match the reward model's gap, so a pair that barely differs in reward moves the
policy little and a clear win moves it more:

    a = β [log π(y_c|x) − log π_ref(y_c|x)] − β [log π(y_l|x) − log π_ref(y_l|x)]   (implicit margin)
    b = η [r*(x, y_c) − r*(x, y_l)]                                                  (reward gap)
    L = D[a ‖ b]

with D the Bernoulli KL ``D[a‖b] = σ(b) log(σ(b)/σ(a)) + (1 − σ(b)) log((1 − σ(b))/(1 − σ(a)))``
(``bernoulli_kl``, the report's choice) or ``(a − b)²`` (``squared``). Framework-free: sequence
log-probabilities in, per-pair losses out.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

DISTANCES = ("bernoulli_kl", "squared")


def rpo_loss(
    policy_chosen_logps: torch.Tensor,
    policy_rejected_logps: torch.Tensor,
    ref_chosen_logps: torch.Tensor,
    ref_rejected_logps: torch.Tensor,
    reward_chosen: torch.Tensor,
    reward_rejected: torch.Tensor,
    beta: float = 0.1,
    eta: float = 1.0,
    distance: str = "bernoulli_kl",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-pair RPO losses and the implicit margins ``a`` (all inputs shaped ``[pairs]``).

    Args:
        policy_*_logps / ref_*_logps: summed log-probabilities of each response under the policy
            (with gradient) and the frozen reference.
        reward_chosen / reward_rejected: the reward model's scores r*.
        beta: scale of the implicit reward; eta: scale of the reward gap.
        distance: ``bernoulli_kl`` or ``squared``.

    Returns:
        (loss per pair, implicit margin a per pair).

    Example:
        >>> z = torch.zeros(2)
        >>> loss, margin = rpo_loss(z, z, z, z, torch.tensor([1.0, 0.0]), torch.tensor([0.0, 0.0]))
        >>> bool(loss[0] > loss[1])  # a reward gap the policy does not yet show costs more
        True
    """
    if distance not in DISTANCES:
        raise ValueError(f"distance must be one of {DISTANCES}, got {distance!r}")
    margin = beta * ((policy_chosen_logps - ref_chosen_logps) - (policy_rejected_logps - ref_rejected_logps))
    target = eta * (reward_chosen - reward_rejected).to(margin.dtype)
    if distance == "squared":
        return (margin - target) ** 2, margin
    # in log-sigmoids: exact where σ saturates (log σ(−x) = log(1 − σ(x)))
    p = torch.sigmoid(target)
    loss = p * (F.logsigmoid(target) - F.logsigmoid(margin)) + (1 - p) * (F.logsigmoid(-target) - F.logsigmoid(-margin))
    return loss, margin
