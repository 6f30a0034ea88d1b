"""Real third-party ACP agents and AG-UI servers, wired to the local fake model servers.

How to use (e.g. from a bridge test in tests/interop):

    from tests.interop.fake_models import FakeModel, serve_fake_models
    from tests.interop.thirdparty import claude_agent, pydantic_ai_server

    def test_x(tmp_path, node):               # `node` (conftest) installs the npm packages
        with serve_fake_models(FakeModel()) as fake:
            launch = claude_agent(node, fake, tmp_path)   # or codex_agent / fast_agent
            # launch.command / launch.env / launch.workspace: spawn it yourself (e.g. as
            # `serve --acp-agent " ".join(launch.command)` with env=launch.env), or
            # `async with acp_driver.drive(launch) as agent: ...`
            with pydantic_ai_server(fake) as url:          # or langgraph_server
                ...                                        # url = http://127.0.0.1:P/agent

`steerable_agent` is our own `steerable-bridge acp` on the fake Chat Completions API (its
`run_command` tool asks permission). The conftest fixtures `fake_models`, `claude_acp`,
`codex_acp`, `fast_agent_acp`, `steerable_acp`,
`pydantic_ai_agui` and `langgraph_agui` do exactly this per test.

Each `*_agent` returns an `AgentLaunch`: the command line, an environment that points the
agent at the fake (and at nothing else: provider keys and config folders of the machine are
removed, HOME and every config dir moved under `tmp`), and a workspace folder to use as the
session cwd. Claude Code (`@zed-industries/claude-agent-acp`) gets `ANTHROPIC_BASE_URL` and a
fake key, `IS_SANDBOX` unset, nonessential traffic off; codex (`@zed-industries/codex-acp`)
gets a `CODEX_HOME` whose config.toml declares a `fake` model provider with the Responses
wire; fast-agent (PyPI `fast-agent-mcp`, Python >= 3.12, installed on first use into a cached
venv) runs `serve --transport acp` with a config file whose `generic` provider is the fake Chat
Completions API, and one MCP server (`servers/mcp_lookup.py`, its tool `lookup`): fast-agent
asks permission for MCP tools, not for its local shell. The AG-UI servers are the scripts
in `servers/`, run by their cached venv's Python on an OS-picked 127.0.0.1 port and ended
(process group) on exit. When something the machine lacks stops one from running,
`Unavailable` is raised (`skip_unavailable` turns it into a loud skip).
"""

from __future__ import annotations

import json
import os
import selectors
import shlex
import signal
import subprocess
import sys
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import pytest

from tests.interop.fake_models import FakeModelServer
from tests.interop.venvs import FAST_AGENT, LANGGRAPH, PYDANTIC_AI, Unavailable, ensure_venv

__all__ = [
    "AgentLaunch",
    "Unavailable",
    "claude_agent",
    "codex_agent",
    "fast_agent",
    "langgraph_server",
    "npm_version",
    "pydantic_ai_server",
    "read_line",
    "skip_unavailable",
    "steerable_agent",
]

HERE = Path(__file__).resolve().parent
MODULES = HERE / "node_modules"
SERVERS = HERE / "servers"
START_TIMEOUT_S = 60.0

_MACHINE_SETTINGS = (
    "ANTHROPIC_",
    "CLAUDE",
    "OPENAI_",
    "CODEX_",
    "FAST_AGENT",
    "STEERABLE_",
    "XDG_",
    "IS_SANDBOX",
    "VIRTUAL_ENV",
    "PYTHONPATH",
)


@dataclass(frozen=True)
class AgentLaunch:
    """How to start one third-party ACP agent against a fake model."""

    name: str
    version: str
    command: tuple[str, ...]
    env: Mapping[str, str]
    workspace: Path

    @property
    def command_line(self) -> str:
        """The command as one shell-quoted line, e.g. for `serve --acp-agent LINE`."""
        return shlex.join(self.command)


def skip_unavailable(reason: str) -> NoReturn:
    """Skip the test loudly: a warning in the summary as well as the skip."""
    warnings.warn(reason, stacklevel=2)
    pytest.skip(reason)


def npm_version(package: str) -> str:
    data = json.loads((MODULES / package / "package.json").read_text(encoding="utf-8"))
    return str(data["version"])


def _isolated_env(tmp: Path) -> dict[str, str]:
    """This machine's environment without provider settings, HOME and config under `tmp`."""
    home = tmp / "home"
    for sub in ("", ".config", ".local/share", ".cache"):
        (home / sub).mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(_MACHINE_SETTINGS)}
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_DATA_HOME=str(home / ".local/share"),
        XDG_CACHE_HOME=str(home / ".cache"),
        NO_COLOR="1",
    )
    return env


def _workspace(tmp: Path) -> Path:
    workspace = tmp / "workspace"
    workspace.mkdir(parents=True, exist_ok=True)
    return workspace


def _npm_entry(package: str, entry: str) -> Path:
    path = MODULES / package / entry
    if not path.exists():
        raise Unavailable(f"{package} is not in {MODULES}; the `node` fixture installs it")
    return path


def claude_agent(node: str, fake: FakeModelServer, tmp: Path) -> AgentLaunch:
    """Claude Code through `@zed-industries/claude-agent-acp`, on the fake Messages API."""
    package = "@zed-industries/claude-agent-acp"
    env = _isolated_env(tmp)
    env.update(
        ANTHROPIC_BASE_URL=fake.root,
        ANTHROPIC_API_KEY="sk-ant-fake-key",
        CLAUDE_CONFIG_DIR=str(tmp / "home" / ".claude"),
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        DISABLE_AUTOUPDATER="1",
        DISABLE_TELEMETRY="1",
        DISABLE_ERROR_REPORTING="1",
    )
    command = (node, str(_npm_entry(package, "dist/index.js")))
    return AgentLaunch("claude-agent-acp", npm_version(package), command, env, _workspace(tmp))


CODEX_CONFIG = """\
model = "fake-model"
model_provider = "fake"
approval_policy = "untrusted"
sandbox_mode = "danger-full-access"

[model_providers.fake]
name = "fake"
base_url = "{url}"
env_key = "FAKE_MODEL_API_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0

[projects."{workspace}"]
trust_level = "trusted"
"""


def codex_agent(node: str, fake: FakeModelServer, tmp: Path) -> AgentLaunch:
    """codex through `@zed-industries/codex-acp`, on the fake Responses API."""
    package = "@zed-industries/codex-acp"
    env = _isolated_env(tmp)
    workspace = _workspace(tmp)
    codex_home = tmp / "home" / ".codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    (codex_home / "config.toml").write_text(
        CODEX_CONFIG.format(url=fake.url, workspace=workspace), encoding="utf-8"
    )
    env.update(CODEX_HOME=str(codex_home), FAKE_MODEL_API_KEY="sk-fake-key")
    command = (node, str(_npm_entry(package, "bin/codex-acp.js")))
    return AgentLaunch("codex-acp", npm_version(package), command, env, workspace)


FAST_AGENT_CONFIG = """\
default_model: generic.fake-model
generic:
  api_key: sk-fake-key
  base_url: {url}
logger:
  type: none
  progress_display: false
  show_chat: false
  show_tools: false
"""


def fast_agent(fake: FakeModelServer, tmp: Path) -> AgentLaunch:
    """fast-agent's ACP server with one MCP tool (`lookup`), on the fake Chat Completions."""
    python = ensure_venv(FAST_AGENT)
    env = _isolated_env(tmp)
    config = tmp / "fastagent.config.yaml"
    config.write_text(FAST_AGENT_CONFIG.format(url=fake.url), encoding="utf-8")
    home = tmp / "fast-agent-home"
    home.mkdir(parents=True, exist_ok=True)
    command = (
        str(python.parent / "fast-agent"),
        "serve",
        "--transport",
        "acp",
        "--config-path",
        str(config),
        "--model",
        "generic.fake-model",
        "--home",
        str(home),
        "--stdio",
        f"{python} {SERVERS / 'mcp_lookup.py'}",
    )
    version = FAST_AGENT.requirements[0].partition("==")[2]
    return AgentLaunch("fast-agent", version, command, env, _workspace(tmp))


def steerable_agent(fake: FakeModelServer, tmp: Path) -> AgentLaunch:
    """Our own `steerable-bridge acp` (this checkout's install) on the fake Chat Completions."""
    env = _isolated_env(tmp)
    env.update(STEERABLE_MODEL="openai:fake-model", STEERABLE_BASE_URL=fake.url)
    command = (sys.executable, "-m", "steerable_bridge.cli", "acp")
    return AgentLaunch("steerable-bridge", _own_version(), command, env, _workspace(tmp))


def _own_version() -> str:
    from importlib.metadata import version

    return version("steerable-bridge")


def read_line(process: subprocess.Popen[str], within: float) -> str:
    """The first stdout line of `process`, waiting at most `within` seconds."""
    assert process.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        if not selector.select(within):
            return ""
    return process.stdout.readline()


@contextmanager
def _agui_server(
    python: Path, script: str, fake: FakeModelServer, tmp: Path | None
) -> Iterator[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(_MACHINE_SETTINGS)}
    log = (tmp / f"{script}.log").open("w+") if tmp else subprocess.DEVNULL
    process = subprocess.Popen(
        [str(python), str(SERVERS / script), fake.url],
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
        env=env,
        cwd=SERVERS,
        start_new_session=True,
    )
    try:
        line = read_line(process, START_TIMEOUT_S)
        if not line.startswith("listening "):
            raise RuntimeError(
                f"{script} did not start within {START_TIMEOUT_S:.0f} s (said {line!r});"
                f" see {tmp / (script + '.log') if tmp else 'its stderr'}"
            )
        yield line.split()[1] + "/agent"
    finally:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(process.pid, sig)
            except ProcessLookupError:
                break
            try:
                process.wait(timeout=10)
                break
            except subprocess.TimeoutExpired:
                continue
        if process.stdout is not None:
            process.stdout.close()
        if tmp and not isinstance(log, int):
            log.close()


@contextmanager
def pydantic_ai_server(fake: FakeModelServer, tmp: Path | None = None) -> Iterator[str]:
    """A pydantic-ai agent behind its `AGUIAdapter`; yields its `POST /agent` URL."""
    with _agui_server(ensure_venv(PYDANTIC_AI), "pydantic_ai_agui.py", fake, tmp) as url:
        yield url


@contextmanager
def langgraph_server(fake: FakeModelServer, tmp: Path | None = None) -> Iterator[str]:
    """A LangGraph graph behind `ag-ui-langgraph`; yields its `POST /agent` URL."""
    with _agui_server(ensure_venv(LANGGRAPH), "langgraph_agui.py", fake, tmp) as url:
        yield url


def pinned(spec_name: str) -> str:
    """The pinned version of a venv's first requirement, for reports."""
    spec = {s.name: s for s in (FAST_AGENT, PYDANTIC_AI, LANGGRAPH)}[spec_name]
    return spec.requirements[0].partition("==")[2]
