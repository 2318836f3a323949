"""Make entry points visible to ``importlib.metadata`` without installing anything.

A ``<name>-<version>.dist-info`` folder with ``METADATA`` and ``entry_points.txt`` on
``sys.path`` (e.g. through ``PYTHONPATH`` of a subprocess) is a real distribution to the
entry-point machinery verl, vLLM and reasonrl use. Tests use it to put a third-party or a
deliberately broken plugin in front of the real discovery code.
"""

from __future__ import annotations

from pathlib import Path


def write_dist_info(site_dir: Path, name: str, entry_points: dict[str, dict[str, str]], version: str = "0.0.0") -> Path:
    """Write ``site_dir/<name>-<version>.dist-info`` declaring ``entry_points`` (group -> name -> target)."""
    dist_info = Path(site_dir) / f"{name.replace('-', '_')}-{version}.dist-info"
    dist_info.mkdir(parents=True, exist_ok=True)
    (dist_info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    lines = []
    for group, targets in entry_points.items():
        lines.append(f"[{group}]")
        lines += [f"{entry} = {target}" for entry, target in targets.items()]
        lines.append("")
    (dist_info / "entry_points.txt").write_text("\n".join(lines))
    return dist_info


def entry_points_from_pyproject(pyproject: Path) -> tuple[str, dict[str, dict[str, str]]]:
    """``(project name, entry points)`` as declared in a ``pyproject.toml``."""
    import tomllib

    project = tomllib.loads(Path(pyproject).read_text())["project"]
    return project["name"], {group: dict(targets) for group, targets in project.get("entry-points", {}).items()}
