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

The fixtures at the end start the real third-party agents and AG-UI servers of
`thirdparty.py` against the fake model servers of `fake_models.py`, one per test; the Python
ones install on first use into cached venvs (`venvs.py`), and whatever the machine lacks
(node, Python 3.12 for fast-agent, uv) skips their tests with a warning saying so.

Interop tests get their `timeout` marker applied to the test body only, so the one-off
install (bounded by its own timeout here) does not eat the first test's budget.
"""

from __future__ import annotations

import fcntl
import shutil
import subprocess
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.interop.fake_models import FakeModel, FakeModelServer, serve_fake_models
from tests.interop.thirdparty import (
    AgentLaunch,
    Unavailable,
    claude_agent,
    codex_agent,
    fast_agent,
    langgraph_server,
    pydantic_ai_server,
    skip_unavailable,
    steerable_agent,
)

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


# -- third-party agents and servers on fake models (tests/interop/thirdparty.py) -------------


@pytest.fixture
def fake_models() -> Iterator[FakeModelServer]:
    """The fake model servers (Chat Completions, Responses, Messages) on one local port."""
    with serve_fake_models(FakeModel()) as server:
        yield server


def _launch_or_skip(make: Callable[[], AgentLaunch]) -> AgentLaunch:
    try:
        return make()
    except Unavailable as err:
        skip_unavailable(str(err))


@pytest.fixture
def claude_acp(node: str, fake_models: FakeModelServer, tmp_path: Path) -> AgentLaunch:
    """Claude Code over ACP (claude-agent-acp) on the fake Messages API."""
    return _launch_or_skip(lambda: claude_agent(node, fake_models, tmp_path))


@pytest.fixture
def codex_acp(node: str, fake_models: FakeModelServer, tmp_path: Path) -> AgentLaunch:
    """codex over ACP (codex-acp) on the fake Responses API."""
    return _launch_or_skip(lambda: codex_agent(node, fake_models, tmp_path))


@pytest.fixture
def steerable_acp(fake_models: FakeModelServer, tmp_path: Path) -> AgentLaunch:
    """Our own `steerable-bridge acp` on the fake Chat Completions API."""
    return _launch_or_skip(lambda: steerable_agent(fake_models, tmp_path))


@pytest.fixture
def fast_agent_acp(fake_models: FakeModelServer, tmp_path: Path) -> AgentLaunch:
    """fast-agent over ACP (cached venv, Python >= 3.12) on the fake Chat Completions API."""
    return _launch_or_skip(lambda: fast_agent(fake_models, tmp_path))


@pytest.fixture
def pydantic_ai_agui(fake_models: FakeModelServer, tmp_path: Path) -> Iterator[str]:
    """A pydantic-ai agent's AG-UI endpoint (`.../agent`) on the fake Chat Completions API."""
    try:
        server = pydantic_ai_server(fake_models, tmp_path)
        url = server.__enter__()
    except Unavailable as err:
        skip_unavailable(str(err))
    try:
        yield url
    finally:
        server.__exit__(None, None, None)


@pytest.fixture
def langgraph_agui(fake_models: FakeModelServer, tmp_path: Path) -> Iterator[str]:
    """A LangGraph graph's AG-UI endpoint (`.../agent`) on the fake Chat Completions API."""
    try:
        server = langgraph_server(fake_models, tmp_path)
        url = server.__enter__()
    except Unavailable as err:
        skip_unavailable(str(err))
    try:
        yield url
    finally:
        server.__exit__(None, None, None)
