"""`steerable-bridge conformance` from a plain install of the wheel, as a user gets it.

Builds the wheel (`uv build --wheel`), installs it alone into a fresh virtual environment
(so no dev dependency such as hypothesis is there) and runs the command the README offers.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(600),
    pytest.mark.skipif(shutil.which("uv") is None, reason="needs uv to build and install"),
]


def _uv(*args: str, env: dict[str, str]) -> None:
    done = subprocess.run(
        ["uv", *args], cwd=ROOT, capture_output=True, text=True, env=env, timeout=300,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


def test_conformance_passes_from_the_installed_wheel(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env = {k: v for k, v in env.items() if not k.startswith("STEERABLE_")}
    venv = tmp_path / "venv"
    _uv("build", "--wheel", "--out-dir", str(tmp_path / "dist"), env=env)
    _uv("venv", "--quiet", str(venv), env=env)
    (wheel,) = (tmp_path / "dist").glob("steerable_bridge-*.whl")
    _uv("pip", "install", "--quiet", "--python", str(venv / "bin" / "python"), str(wheel), env=env)
    probe = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import hypothesis"], capture_output=True,
        timeout=60, check=False,
    )  # fmt: skip
    assert probe.returncode != 0, "the fresh environment should not have hypothesis"
    home = tmp_path / "home"
    done = subprocess.run(
        [str(venv / "bin" / "steerable-bridge"), "conformance"], cwd=tmp_path,
        capture_output=True, text=True, timeout=500, check=False,
        env={**env, "HOME": str(home), "XDG_STATE_HOME": str(home / "state"),
             "STEERABLE_DEMO_PACE_MS": "0"},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "FAIL" not in done.stdout and "fail:" not in done.stdout
    assert done.stdout.rstrip().endswith("conformance: PASS")
    assert "note: generated sessions were skipped: hypothesis is not installed" in done.stdout
