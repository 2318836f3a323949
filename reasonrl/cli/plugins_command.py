"""``reasonrl plugins``: what is installed, what each plugin registers where, patches, errors."""

from __future__ import annotations

import argparse
import json
from typing import Any

from reasonrl.contracts import CliCommand


def upstream_versions() -> dict[str, str | None]:
    """Each upstream package's installed version (and the distribution, when named otherwise)."""
    from reasonrl.compat import DISTRIBUTIONS, installed_distribution

    found: dict[str, str | None] = {}
    for package in DISTRIBUTIONS:
        hit = installed_distribution(package)
        found[package] = None if hit is None else hit[1] + ("" if hit[0] == package else f" ({hit[0]})")
    return found


VERL_BRIDGE = "reasonrl.bridges.verl"


def verl_bridge_installed() -> bool:
    """reasonrl's entry point in verl's plugin group is installed (verl imports it in every process)."""
    from importlib.metadata import entry_points

    return any(point.value == VERL_BRIDGE for point in entry_points(group="verl.plugins"))


def entry_point_value(name: str) -> str:
    """What plugin ``name``'s entry point in ``reasonrl.plugins`` targets ('' if none does)."""
    from importlib.metadata import entry_points

    from reasonrl.hookspecs import ENTRY_POINT_GROUP

    return next((point.value for point in entry_points(group=ENTRY_POINT_GROUP, name=name)), "")


def collect_report(load_verl: bool = False) -> dict[str, Any]:
    """Everything ``reasonrl plugins`` shows, as plain data (also the ``--json`` output).

    ``load_verl`` imports verl here (~10 s on 2 cores), so that its bridge runs in this process
    and the verl registrations show ``registered``/``failed``; otherwise they show ``declared``
    (the bridge applies them in each process that imports verl)."""
    from reasonrl.bridges import STATUS, declared_registrations
    from reasonrl.compat import report_rows
    from reasonrl.config import config_groups
    from reasonrl.manager import call_each, disabled_plugins, get_plugin_manager, load_errors
    from reasonrl.patching import assess_patch, declared_patches, patch_reason, patch_status

    if load_verl:
        try:
            import verl  # noqa: F401  (runs the verl bridge, as in every verl process)
        except Exception as exc:  # verl missing or broken: still list the rest
            from reasonrl.manager import LoadError, report

            report(LoadError("verl", "import verl", f"{type(exc).__name__}: {exc}"))
    manager = get_plugin_manager()
    plugins: dict[str, dict[str, Any]] = {}
    for name, plugin in manager.list_name_plugin():
        if plugin is None:  # blocked by a switch (REASONRL_PLUGINS / REASONRL_DISABLE_PLUGINS): "disabled" below
            continue
        plugins[name] = {
            "module": getattr(plugin, "__name__", repr(plugin)),
            "summary": "",
            "reports": [],
            "registrations": [],
            "config_groups": [],
            "megatron_layer_specs": [],
            "cli_commands": [],
            "benchmarks": [],
            "trainer_callbacks": [],
            "patches": [],
        }
    for name, info in call_each("reasonrl_plugin_info"):
        plugins[name].update(summary=info.summary, reports=list(info.reports), requires=list(info.requires))
    for upstream in ("verl", "vllm"):
        done = {(p, r.kind, r.name): "registered" for p, r in STATUS[upstream].applied}
        done.update({(p, r.kind, r.name): "failed" for p, r in STATUS[upstream].failed})
        skipped = {(p, r.kind, r.name): why for p, r, why in STATUS[upstream].skipped}
        for name, registration in declared_registrations(upstream):
            key = (name, registration.kind, registration.name)
            reason = skipped.get(key) if STATUS[upstream].ran else registration.skip_reason()
            state = done.get(key) or ("not-applicable" if reason else "declared")
            plugins[name]["registrations"].append(
                {
                    "upstream": upstream,
                    "kind": registration.kind,
                    "name": registration.name,
                    "state": state,
                    "reason": reason or "",
                    "description": registration.description,
                }
            )
    groups = config_groups()
    for name, declared in call_each("reasonrl_config_groups"):
        plugins[name]["config_groups"] = [f"reasonrl.{group.name}" for group in declared]
    for name, specs in call_each("reasonrl_megatron_layer_specs"):
        plugins[name]["megatron_layer_specs"] = sorted(specs)
    for name, commands in call_each("reasonrl_cli_commands"):
        plugins[name]["cli_commands"] = [command.name for command in commands]
    for name, benchmarks in call_each("reasonrl_benchmarks"):
        plugins[name]["benchmarks"] = [f"reasonrl bench {benchmark.name}" for benchmark in benchmarks]
    for name, callbacks in call_each("reasonrl_trainer_callbacks"):
        plugins[name]["trainer_callbacks"] = [callback.name for callback in callbacks]
    patches = []
    for name, patch in declared_patches():
        plugins[name]["patches"].append(patch.name)
        status, reason = patch_status(patch.name), patch_reason(patch.name)
        if status == "pending":  # not tried in this process (vLLM patches run in vLLM's processes): what it would do
            status, reason = assess_patch(patch)
        patches.append(
            {
                "name": patch.name,
                "plugin": name,
                "package": patch.package,
                "versions": patch.versions,
                "installed": patch.installed_version(),
                "status": status,
                "reason": reason,
                "trigger": patch.trigger,
                "changes": patch.changes,
                "upstream_issue": patch.upstream_issue,
                "upstream_problem": patch.upstream_problem,
                "works_around": patch.works_around(),
            }
        )
    return {
        "upstream": upstream_versions(),
        "verl_bridge_ran": STATUS["verl"].ran,
        "verl_bridge_installed": verl_bridge_installed(),
        "plugins": plugins,
        "disabled": [
            {"plugin": name, "entry_point": entry_point_value(name), "reason": switch.reason}
            for name, switch in sorted(disabled_plugins(manager).items())
        ],
        "config_groups": sorted(groups),
        "patches": patches,
        "upstream_internals": report_rows(),
        "side_environments": side_environments(),
        "errors": [{"plugin": e.plugin, "where": e.where, "error": e.error} for e in load_errors()],
    }


def side_environments() -> dict[str, dict[str, Any]]:
    """``reasonrl_side_environments``' status of each environment beside this one."""
    from reasonrl.manager import call_each

    out = {}
    for plugin, declared in call_each("reasonrl_side_environments"):
        for name, status in declared.items():
            try:
                out[name] = {"plugin": plugin, **status()}
            except Exception as exc:  # a broken status is shown, not fatal
                out[name] = {"plugin": plugin, "state": f"status failed: {type(exc).__name__}: {exc}"}
    return out


def print_report(report: dict[str, Any]) -> None:
    print("Upstream packages:")
    for package, found in report["upstream"].items():
        print(f"  {package:<14} {found or 'not installed'}")
    if report["verl_bridge_ran"]:
        bridge = "ran in this process"
    elif report["verl_bridge_installed"]:
        bridge = "installed; runs in every process that imports verl (--check runs it here)"
    else:
        bridge = "NOT INSTALLED (reinstall reasonrl: verl will not see its registrations)"
    print(f"verl bridge (entry point verl.plugins:reasonrl): {bridge}")
    print(f"\nPlugins ({len(report['plugins'])}, entry-point group reasonrl.plugins):")
    for name, plugin in report["plugins"].items():
        print(f"  {name}  [{plugin['module']}]")
        if plugin["summary"]:
            print(f"      {plugin['summary']}")
        if plugin["reports"]:
            print(f"      implements: {', '.join(plugin['reports'])}")
        if plugin.get("requires"):
            print(f"      requires plugins: {', '.join(plugin['requires'])}")
        for reg in plugin["registrations"]:
            print(
                f"      {reg['upstream']:<5} {reg['kind']:<14} {reg['name']:<20} {reg['state']}"
                + (f" ({reg['reason']})" if reg["reason"] else "")
            )
        for label, key in (
            ("config", "config_groups"),
            ("megatron specs", "megatron_layer_specs"),
            ("commands", "cli_commands"),
            ("benchmarks", "benchmarks"),
            ("trainer callbacks", "trainer_callbacks"),
            ("patches", "patches"),
        ):
            if plugin[key]:
                print(f"      {label}: {', '.join(plugin[key])}")
    print(
        f"\nDisabled plugins ({len(report['disabled'])}: switched off by REASONRL_PLUGINS / REASONRL_DISABLE_PLUGINS, or requiring one that is):"
    )
    for disabled in report["disabled"]:
        print(f"  {disabled['plugin']}  [{disabled['entry_point']}]: {disabled['reason']}")
    if not report["disabled"]:
        print("  none")
    print(f"\nPatches ({len(report['patches'])}):")
    for patch in report["patches"]:
        print(
            f"  {patch['name']}: {patch['package']}{patch['versions']} (installed {patch['installed']}) -> {patch['status']}"
            + (f" ({patch['reason']})" if patch["reason"] and patch["status"] != "would-apply" else "")
            + f"; works around {patch['works_around']}"
        )
        print(f"      {patch['changes']}")
    if not report["patches"]:
        print("  none")
    rows = report["upstream_internals"]
    print(
        f"\nUpstream internals reached ({len(rows)}, reasonrl/compat; outside a range a run that needs one stops at start-up):"
    )
    for row in rows:
        print(
            f"  {row['name']:<36} {row['package'] + row['versions']:<30} installed {row['installed'] or '-':<12} {row['state']}"
        )
    print(f"\nSide environments ({len(report['side_environments'])}):")
    for name, env in report["side_environments"].items():
        details = ", ".join(f"{k} {v}" for k, v in (env.get("versions") or {}).items())
        print(
            f"  {name} ({env['plugin']}): {env['state']}  [{env.get('venv', '')}]" + (f"  {details}" if details else "")
        )
        for key in ("hint", "missing", "untested"):
            if env.get(key):
                print(f"      {key}: {env[key]}")
    print(f"\nLoad errors ({len(report['errors'])}):")
    for error in report["errors"]:
        print(f"  {error['plugin']} ({error['where']}): {error['error']}")
    if not report["errors"]:
        print("  none")


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument(
        "--check",
        action="store_true",
        help="import verl here so its bridge runs: registrations show registered/failed, verl's patches applied (~10 s)",
    )


def _run(args: argparse.Namespace) -> int:
    report = collect_report(load_verl=args.check)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print_report(report)
    return 1 if report["errors"] or not report["verl_bridge_installed"] else 0


COMMAND = CliCommand(
    name="plugins",
    help="list discovered plugins, what each registers with verl/vLLM/Megatron, patches, upstream versions and load errors",
    configure=_configure,
    run=_run,
)
