"""Bridges from reasonrl's plugins into each upstream's own discovery mechanism.

A bridge runs inside the upstream's plugin loading (verl's ``verl.plugins`` entry points,
vLLM's ``vllm.general_plugins``), applies the patches triggered by that upstream, then
every :class:`~reasonrl.contracts.Registration` the plugins declare for it. Each
registration is applied at most once per process and each failure is printed loudly.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass, field

from reasonrl.contracts import Registration
from reasonrl.manager import LoadError, call_each, report
from reasonrl.patching import PatchStatus, apply_patches_for


@dataclass
class BridgeStatus:
    """What one bridge did in this process."""

    ran: bool = False
    applied: list[tuple[str, Registration]] = field(default_factory=list)
    failed: list[tuple[str, Registration]] = field(default_factory=list)
    skipped: list[tuple[str, Registration, str]] = field(default_factory=list)  # (plugin, registration, why)
    patches: dict[str, PatchStatus] = field(default_factory=dict)


STATUS: dict[str, BridgeStatus] = {"verl": BridgeStatus(), "vllm": BridgeStatus()}


def declared_registrations(upstream: str) -> list[tuple[str, Registration]]:
    """``(plugin name, registration)`` for every registration declared for ``upstream``."""
    hook = {"verl": "reasonrl_verl_registrations", "vllm": "reasonrl_vllm_registrations"}[upstream]
    declared = []
    for plugin, registrations in call_each(hook):
        for registration in registrations:
            if registration.upstream != upstream:
                report(
                    LoadError(
                        plugin,
                        hook,
                        f"{registration.kind}:{registration.name} declares upstream {registration.upstream!r}",
                    )
                )
                continue
            declared.append((plugin, registration))
    return declared


def run_bridge(upstream: str) -> BridgeStatus:
    """Apply ``upstream``'s patches and registrations once in this process."""
    status = STATUS[upstream]
    if status.ran:
        return status
    status.ran = True
    status.patches = apply_patches_for(upstream)
    for plugin, registration in declared_registrations(upstream):
        try:
            reason = registration.skip_reason()
            if reason is not None:
                status.skipped.append((plugin, registration, reason))
                continue
            registration.apply()
        except Exception as exc:
            status.failed.append((plugin, registration))
            where = f"{upstream} {registration.kind} {registration.name!r}"
            report(LoadError(plugin, where, f"{type(exc).__name__}: {exc}", traceback.format_exc()))
        else:
            status.applied.append((plugin, registration))
    return status
