"""The verl internal the objectives plugin reaches into, behind its version guard (offered through
the plugin's ``reasonrl_reaches`` hook)."""

from __future__ import annotations

from reasonrl.compat import Reach
from reasonrl.compat.verl import VERL_0_9

POLICY_LOSS_CONFIG = Reach(
    name="verl.policy-loss-config",
    package="verl",
    versions=VERL_0_9,
    touches="PolicyLossConfig._mutable_fields",
    used_by="objectives plugin (the ε_pos_high schedule writes eps_pos_high each step)",
    public_hook="a public way to declare a config subclass's mutable fields",
)


def policy_loss_mutable_fields() -> frozenset:
    """``PolicyLossConfig``'s fields that may change after construction."""
    POLICY_LOSS_CONFIG.require()
    from verl.workers.config import PolicyLossConfig

    return frozenset(PolicyLossConfig._mutable_fields)


REACHES = (POLICY_LOSS_CONFIG,)
