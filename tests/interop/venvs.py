"""Cached virtual environments for the third-party Python agents and servers the interop tests run.

`ensure_venv(spec)` returns the `python` of a venv holding `spec.requirements`, installing it
on first use with `uv venv` + `uv pip install` (PyPI through uv's ordinary resolver) and
reusing it afterwards. Each venv lives under `~/.cache/steerable-bridge/interop/venvs/` (or
`$STEERABLE_INTEROP_CACHE`), in a folder named by a hash of its interpreter and requirements,
so changing a pin installs afresh and never into an old tree; a `.installed` marker is written
only after a complete install, and an exclusive `fcntl` lock beside it keeps two pytest runs
from installing at once. The interpreter is the first Python at least `spec.min_python` found
among this one, `python3.N` on PATH, pyenv's versions and `uv python find` — uv cannot
download interpreters here, so when none fits, or uv is missing, `Unavailable` says what to
install and the caller skips loudly. A failed install fails the test with uv's output.
"""

from __future__ import annotations

import fcntl
import glob
import hashlib
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

__all__ = ["FAST_AGENT", "LANGGRAPH", "PYDANTIC_AI", "Unavailable", "VenvSpec", "ensure_venv"]

INSTALL_TIMEOUT_S = 900.0


class Unavailable(Exception):
    """What the machine lacks to build the venv; the tests skip with this reason."""


@dataclass(frozen=True)
class VenvSpec:
    """A named set of pinned requirements and the oldest Python they support."""

    name: str
    min_python: tuple[int, int]
    requirements: tuple[str, ...]


FAST_AGENT = VenvSpec("fast-agent", (3, 12), ("fast-agent-mcp==0.10.48",))
PYDANTIC_AI = VenvSpec(
    "pydantic-ai", (3, 11), ("pydantic-ai-slim[ag-ui,openai]==2.68.0", "uvicorn==0.54.0")
)
LANGGRAPH = VenvSpec(
    "langgraph",
    (3, 11),
    (
        "ag-ui-langgraph[fastapi]==0.0.47",
        "langgraph==1.2.24",
        "langchain-openai==1.7.4",
        "uvicorn==0.54.0",
    ),
)


def cache_root() -> Path:
    base = os.environ.get("STEERABLE_INTEROP_CACHE")
    return Path(base) if base else Path.home() / ".cache" / "steerable-bridge" / "interop"


def _version_of(python: str) -> tuple[int, int] | None:
    """The (major, minor) of `python`, or None when it does not run (a pyenv shim, say)."""
    try:
        done = subprocess.run(
            [python, "-c", "import sys; print(*sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    parts = done.stdout.split()
    if done.returncode != 0 or len(parts) != 2:
        return None
    return int(parts[0]), int(parts[1])


def _candidates(uv: str, at_least: tuple[int, int]) -> list[str]:
    # The base interpreter behind this venv, not the venv's own `python`: every checkout has
    # its own .venv, and naming the cache by it would reinstall each venv in each clone.
    found = [os.path.realpath(sys.executable)]
    found += [p for m in range(15, at_least[1] - 1, -1) if (p := shutil.which(f"python3.{m}"))]
    pyenv = os.environ.get("PYENV_ROOT", str(Path.home() / ".pyenv"))
    found += sorted(glob.glob(f"{pyenv}/versions/3.*/bin/python3"), reverse=True)
    try:
        done = subprocess.run(
            [uv, "python", "find", f">={at_least[0]}.{at_least[1]}"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        if done.returncode == 0 and done.stdout.strip():
            found.append(done.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.TimeoutExpired):
        pass
    return found


def find_python(at_least: tuple[int, int], uv: str) -> str:
    """A Python interpreter of version `at_least` or newer; `Unavailable` when there is none."""
    for python in _candidates(uv, at_least):
        version = _version_of(python)
        if version is not None and version >= at_least:
            return python
    want = f"{at_least[0]}.{at_least[1]}"
    raise Unavailable(
        f"no Python >= {want} on this machine (looked at this interpreter, python3.N on PATH,"
        f" pyenv's versions and `uv python find`); install Python {want} or newer"
    )


def ensure_venv(spec: VenvSpec) -> Path:
    """The venv's python, installed on first use (see the module docstring)."""
    uv = shutil.which("uv")
    if uv is None:
        raise Unavailable(f"uv is not installed: cannot build the {spec.name} venv; install uv")
    python = os.path.realpath(find_python(spec.min_python, uv))
    key = hashlib.sha256("\n".join([python, *spec.requirements]).encode()).hexdigest()[:12]
    root = cache_root() / "venvs" / f"{spec.name}-{key}"
    venv_python = root / "bin" / "python"
    marker = root / ".installed"
    if marker.exists():
        return venv_python
    root.parent.mkdir(parents=True, exist_ok=True)
    with (root.parent / f"{root.name}.lock").open("a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if not marker.exists():
                _install(uv, python, root, spec)
                marker.write_text("\n".join(spec.requirements) + "\n")
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return venv_python


def _install(uv: str, python: str, root: Path, spec: VenvSpec) -> None:
    started = time.monotonic()
    steps = [
        [uv, "venv", "--quiet", "--clear", "--python", python, str(root)],
        [uv, "pip", "install", "--quiet", "--python", str(root / "bin" / "python"),
         *spec.requirements],
    ]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "UV_PROJECT"))}
    for step in steps:
        try:
            done = subprocess.run(
                step, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S, env=env
            )
        except subprocess.TimeoutExpired:
            pytest.fail(f"installing {spec.name} took over {INSTALL_TIMEOUT_S:.0f} s: {step}")
        if done.returncode != 0:
            pytest.fail(
                f"installing {spec.name} failed ({done.returncode}); run by hand to see why:\n"
                f"{' '.join(step)}\n{(done.stdout + done.stderr)[-3000:]}"
            )
    print(f"\ninterop: installed {spec.name} into {root} in {time.monotonic() - started:.1f} s")
