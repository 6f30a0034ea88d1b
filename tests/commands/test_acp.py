"""`steerable-bridge acp`: the README's editor snippets launch it, and its options fail clearly."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest
from acp import schema as acp
from acp import spawn_agent_process

ROOT = Path(__file__).resolve().parents[2]


def _snippets() -> dict[str, dict[str, Any]]:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Use it from an editor (ACP)", 1)[1].split("\n## ", 1)[0]
    blocks = [json.loads(b) for b in re.findall(r"```json\n(.*?)```", section, re.S)]
    assert len(blocks) == 2, "the ACP section should hold the Zed and the JetBrains snippet"
    zed, jetbrains = (b["agent_servers"]["steerable-bridge"] for b in blocks)
    return {"zed": zed, "jetbrains": jetbrains}


def test_the_zed_and_jetbrains_snippets_launch_the_same_command() -> None:
    snippets = _snippets()
    assert snippets["zed"]["type"] == "custom"
    for server in snippets.values():
        assert (server["command"], server["args"]) == ("uvx", ["steerable-bridge", "acp"])
        assert isinstance(server["env"], dict)
    assert snippets["zed"]["command"] == snippets["jetbrains"]["command"]
    assert snippets["zed"]["args"] == snippets["jetbrains"]["args"]


class _Client:
    def __init__(self) -> None:
        self.text: list[str] = []

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        if isinstance(update, acp.AgentMessageChunk):
            self.text.append(update.content.text)

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        return acp.RequestPermissionResponse(outcome=acp.DeniedOutcome(outcome="cancelled"))


@pytest.mark.anyio
@pytest.mark.timeout(60)
async def test_the_readme_snippet_starts_a_working_agent(tmp_path: Path) -> None:
    server = _snippets()["zed"]
    if shutil.which(server["command"]) is None:
        reason = f"{server['command']} is not on PATH, so the README snippet cannot be launched"
        warnings.warn(reason, stacklevel=1)
        pytest.skip(reason)
    # the package from this checkout instead of PyPI: `uvx --from ROOT steerable-bridge acp`
    args = ["--from", str(ROOT), *server["args"]]
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("STEERABLE_")},
        **server["env"],
        "STEERABLE_DEMO_PACE_MS": "0",
        "STEERABLE_STORAGE": "memory",
    }
    client = _Client()
    with (tmp_path / "stderr.log").open("wb") as stderr:
        async with spawn_agent_process(
            client,
            shutil.which(server["command"]) or server["command"],
            *args,
            env=env,
            cwd=tmp_path,
            transport_kwargs={"stderr": stderr.fileno()},
        ) as (conn, _process):
            init = await conn.initialize(protocol_version=1)
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            block = acp.TextContentBlock(type="text", text="hello")
            answer = await conn.prompt(session_id=session.session_id, prompt=[block])
    assert init.agent_info is not None and init.agent_info.name == "steerable-bridge"
    assert answer.stop_reason == "end_turn"
    assert "".join(client.text)


def _acp(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "steerable_bridge.cli", "acp", "--storage", "memory", *args],
        capture_output=True,
        text=True,
        timeout=30,
        stdin=subprocess.DEVNULL,
    )


def test_a_bad_tools_module_is_a_one_line_configuration_error(tmp_path: Path) -> None:
    empty = tmp_path / "empty.py"
    empty.write_text("X = 1\n")
    missing = _acp("--tools-module", str(tmp_path / "missing.py"))
    no_tools = _acp("--tools-module", str(empty))
    bad_timeout = _acp("--permission-timeout", "0")
    assert missing.returncode == no_tools.returncode == bad_timeout.returncode == 2
    assert missing.stdout == no_tools.stdout == ""
    assert "must expose TOOLS" in no_tools.stderr
    assert "--permission-timeout" in bad_timeout.stderr


@pytest.mark.slow
@pytest.mark.timeout(30)
def test_a_storage_problem_is_reported_before_anything_is_answered(tmp_path: Path) -> None:
    """The editor gets no `initialize` answer to then fail every request after: the agent
    exits at once with one line on stderr (the editor shows it as the agent's failure)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEERABLE_")}
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": 1},
    }
    done = subprocess.run(
        [sys.executable, "-m", "steerable_bridge.cli", "acp", "--storage", str(tmp_path)],
        input=json.dumps(initialize) + "\n",
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
        check=False,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert len(done.stderr.splitlines()) == 1 and "is a directory" in done.stderr
