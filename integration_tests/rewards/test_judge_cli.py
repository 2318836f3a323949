"""``reasonrl judge`` from a checkout the sandbox user cannot traverse to, via the console script.

The condition of issue 42: a checkout under a ``mktemp -d`` folder (0700) in the host's
``/tmp``, installed editable, run as root through ``<venv>/bin/reasonrl`` from another
directory. The editable finder maps ``reasonrl.plugins`` onto the checkout's ``plugins/``,
so neither the checkout root nor the cwd is on ``sys.path``: the judge's sandbox must bind
exactly the runner's files (``zygote.py``, the venv, the interpreter) under a fresh ``/tmp``
and the sandbox user must still reach them through the 0700 folders above them.

The copy's venv is ``python -m venv --without-pip`` whose site-packages gets a ``.pth`` line
pointing at this interpreter's site-packages (the dependencies), then the copy is installed
editable into it without dependencies (this interpreter's pip, ``--python`` the copy's).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sysconfig
import tempfile
import time
from pathlib import Path

import pytest

from reasonrl.testing.plugin_alone import install

REPO = Path(__file__).resolve().parents[2]
SOURCES = ("reasonrl", "plugins", "patches", "hydra_configs", "setup.py", "pyproject.toml", "README.md")

pytestmark = pytest.mark.integration


def _copy_checkout(checkout: Path) -> None:
    checkout.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "*.pyc")
    for name in SOURCES:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, checkout / name, ignore=ignore)
        else:
            shutil.copy2(source, checkout / name)


def _install_editable(checkout: Path, venv: Path) -> Path:
    """A venv for the copy over this environment's packages (its reasonrl too, as before: the
    copy's own editable finder comes first); returns the copy's console script."""
    started = time.monotonic()
    python = install(checkout, venv, hide_host_reasonrl=False)
    print(f"editable install of the copy: {time.monotonic() - started:.1f} s")
    return python.parent / "reasonrl"


def _write_jsonl(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _reasonrl_install(site_packages: Path) -> dict[str, bytes]:
    """This environment's own install of reasonrl: its finder, .pth and dist-info, by content."""
    files = {}
    for entry in site_packages.iterdir():
        if "reasonrl" in entry.name:
            for path in [entry] if entry.is_file() else sorted(p for p in entry.rglob("*") if p.is_file()):
                files[str(path)] = path.read_bytes()
    return files


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
def test_console_script_judges_a_checkout_under_a_private_tmp_folder():
    host_install = _reasonrl_install(Path(sysconfig.get_paths()["purelib"]))
    assert host_install
    root = Path(tempfile.mkdtemp(prefix="tmp.", dir="/tmp"))  # what `mktemp -d` makes: 0700
    try:
        private = root / "private"  # a second untraversable level, for good measure
        private.mkdir(mode=0o700)
        checkout = private / "checkout"
        _copy_checkout(checkout)
        console_script = _install_editable(checkout, checkout / ".venv")
        assert oct(root.stat().st_mode & 0o777) == "0o700" and oct(private.stat().st_mode & 0o777) == "0o700"

        data = root / "data"
        data.mkdir()
        problems = _write_jsonl(
            data / "problems.jsonl",
            [
                {"problem_id": "sum", "tests": {"inputs": ["1 2\n", "5 5\n"], "outputs": ["3\n", "10\n"]}},
                {"problem_id": "inc", "tests": {"assertions": ["assert inc(1) == 2"]}},
            ],
        )
        solutions = _write_jsonl(
            data / "solutions.jsonl",
            [
                {"problem_id": "sum", "solution_id": "right", "code": "a, b = map(int, input().split())\nprint(a + b)"},
                {"problem_id": "inc", "solution_id": "wrong", "code": "def inc(x):\n    return x"},
            ],
        )
        out = data / "verdicts.jsonl"
        environment = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
        judged = subprocess.run(
            [str(console_script), "judge", "--problems", problems, "--solutions", solutions, "--out", out],
            capture_output=True,
            text=True,
            cwd="/",
            env=environment,
            timeout=300,
        )
        assert judged.returncode == 0, judged.stdout + judged.stderr
        verdicts = {r["solution_id"]: r for r in map(json.loads, out.read_text().splitlines())}
        assert verdicts["right"]["verdicts"] == ["passed", "passed"], verdicts["right"]
        assert verdicts["wrong"]["verdicts"] == ["wrong_answer"], verdicts["wrong"]
        # the copy's judge ran (its package came from the copy) and the checkout root is not on sys.path
        where = subprocess.run(
            [
                str(checkout / ".venv" / "bin" / "python"),
                "-c",
                "import json, sys, reasonrl.plugins.rewards.judge as j; print(json.dumps([j.__file__, sys.path]))",
            ],
            capture_output=True,
            text=True,
            cwd="/",
            env=environment,
        )
        judge_file, path = json.loads(where.stdout)
        assert judge_file.startswith(str(checkout) + "/"), where.stderr
        assert str(checkout) not in path and all(not p.startswith(str(checkout) + "/plugins") for p in path)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    # this environment's own editable install is untouched
    assert _reasonrl_install(Path(sysconfig.get_paths()["purelib"])) == host_install
