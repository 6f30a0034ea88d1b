"""Bootstrap the Node side of the interop tests, so `uv run pytest` works on a fresh clone.

The `node` fixture (session scope) returns the path of the `node` executable after making
sure `tests/interop/node_modules` matches `package-lock.json`: when the folder is missing,
or npm's record of the last install (`node_modules/.package-lock.json`) is older than the
lock file, it runs `npm ci` once, under an exclusive `fcntl` lock on a file beside the lock
file so two pytest runs in the same checkout never install over each other (the second one
waits, then finds the install done). Only a missing `node` or `npm` skips the tests, with a
warning naming what to install; a failed `npm ci` fails them with npm's output, because a
green run must mean the clients really ran. Install scripts are not run: no package here
needs one (CopilotKit's only one is a telemetry ping). The lock file holds hand-added entries
(version, os, cpu only) for five platform builds of `@openclaw/fs-safe` 0.12.0 (an acpx
dependency) that were never published: without them `npm ci` refuses the lock as out of
sync; a later `npm install` drops them, so add them back after updating the lock.

Interop tests get their `timeout` marker applied to the test body only, so the one-off
install (bounded by its own timeout here) does not eat the first test's budget.
"""

from __future__ import annotations

import fcntl
import shutil
import subprocess
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
LOCK_FILE = HERE / "package-lock.json"
MODULES = HERE / "node_modules"
INSTALL_RECORD = MODULES / ".package-lock.json"
INSTALL_TIMEOUT_S = 900.0


def _up_to_date() -> bool:
    """True when npm's record of the last install is at least as new as the lock file."""
    try:
        return INSTALL_RECORD.stat().st_mtime >= LOCK_FILE.stat().st_mtime
    except FileNotFoundError:
        return False


def _install(npm: str) -> None:
    """Run `npm ci` under the checkout's install lock unless another run already did."""
    with (HERE / ".npm-ci.lock").open("a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if _up_to_date():
                return
            started = time.monotonic()
            try:
                done = subprocess.run(
                    [npm, "ci", "--no-audit", "--no-fund", "--prefer-offline", "--ignore-scripts"],
                    cwd=HERE,
                    capture_output=True,
                    text=True,
                    timeout=INSTALL_TIMEOUT_S,
                    check=False,
                )
            except subprocess.TimeoutExpired:
                pytest.fail(
                    f"`npm ci` in {HERE} took over {INSTALL_TIMEOUT_S:.0f} s; "
                    "check the network or the npm registry setting, then run it by hand"
                )
            if done.returncode != 0:
                pytest.fail(
                    f"`npm ci` in {HERE} failed ({done.returncode}); run it by hand to see why:\n"
                    f"{(done.stdout + done.stderr)[-3000:]}"
                )
            print(
                f"\ninterop: npm ci installed {HERE.name}/node_modules in "
                f"{time.monotonic() - started:.1f} s"
            )
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@pytest.fixture(scope="session")
def node() -> Iterator[str]:
    """The `node` executable, with tests/interop/node_modules installed from the lock file."""
    node_path, npm = shutil.which("node"), shutil.which("npm")
    if node_path is None or npm is None:
        missing = " and ".join(name for name, p in (("node", node_path), ("npm", npm)) if p is None)
        reason = (
            f"{missing} not installed: the TypeScript interop tests cannot run "
            "(install Node.js 20 or newer to run them)"
        )
        warnings.warn(reason, stacklevel=1)
        pytest.skip(reason)
    if not _up_to_date():
        _install(npm)
    yield node_path


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Time only the body of interop tests: the fixture's one-off install has its own bound."""
    for item in items:
        if HERE not in Path(item.path).parents:
            continue
        marker = item.get_closest_marker("timeout")
        args, kwargs = (marker.args, dict(marker.kwargs)) if marker is not None else ((), {})
        kwargs.setdefault("func_only", True)
        item.add_marker(pytest.mark.timeout(*args, **kwargs), append=False)
