"""`uvx steerable-bridge acp` on a fresh machine: build the wheel, run it the way the registry
entry says (`uv tool run --from WHEEL steerable-bridge <its uvx args>`) with an empty tool
directory and home, then do what the registry's CI does (initialize, auth methods `agent` /
`terminal` only) and what a user does next (a session and a demo prompt)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp import schema as acp
from acp import spawn_agent_process

from tests.registry.test_agent_json import ENTRY, ROOT
from tests.transports.acp.harness import Recorder

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.timeout(600)]

UV = shutil.which("uv")


def fresh_env(tmp: Path) -> dict[str, str]:
    """The test's environment minus its venv and model settings, with a new home, config,
    state and tool directory; uv's package cache is shared so no download is repeated."""
    cache = subprocess.run([UV or "uv", "cache", "dir"], capture_output=True, text=True, check=True)
    keep = {
        k: v
        for k, v in os.environ.items()
        if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")
        and not k.startswith(("STEERABLE_", "OPENAI_", "ANTHROPIC_", "UV_"))
    }
    for name in ("home", "config", "state", "tools", "bin"):
        (tmp / name).mkdir()
    return {
        **keep,
        "HOME": str(tmp / "home"),
        "XDG_CONFIG_HOME": str(tmp / "config"),
        "XDG_STATE_HOME": str(tmp / "state"),
        "UV_TOOL_DIR": str(tmp / "tools"),
        "UV_TOOL_BIN_DIR": str(tmp / "bin"),
        "UV_CACHE_DIR": cache.stdout.strip(),
        "UV_PYTHON": sys.executable,  # an interpreter uv need not download
        "TERM": "dumb",
    }


@pytest.mark.skipif(UV is None, reason="uv is not on PATH: install uv to run this test")
async def test_the_built_wheel_serves_acp_through_uv_tool_run(tmp_path: Path) -> None:
    assert UV is not None
    with anyio.fail_after(300):
        built = await anyio.run_process(
            [UV, "build", "--wheel", "-o", str(tmp_path / "dist"), str(ROOT)], check=False
        )
    assert built.returncode == 0, built.stderr.decode()
    (wheel,) = (tmp_path / "dist").glob("steerable_bridge-*.whl")
    uvx = json.loads((ENTRY / "agent.json").read_text())["distribution"]["uvx"]
    env = fresh_env(tmp_path)
    client = Recorder()
    command = ["tool", "run", "--from", str(wheel), "steerable-bridge", *uvx["args"]]
    caps = acp.ClientCapabilities(terminal=True, field_meta={"terminal-auth": True})
    with (tmp_path / "agent.stderr").open("wb") as stderr, anyio.fail_after(300):
        async with spawn_agent_process(
            client,
            UV,
            *command,
            env=env,
            cwd=tmp_path / "home",
            transport_kwargs={"stderr": stderr.fileno(), "shutdown_timeout": 5.0},
        ) as (conn, _process):
            init = await conn.initialize(protocol_version=1, client_capabilities=caps)
            session = await conn.new_session(cwd=str(tmp_path / "home"), mcp_servers=[])
            reply = await conn.prompt(
                session_id=session.session_id,
                prompt=[acp.TextContentBlock(type="text", text="hello")],
            )
    methods: list[Any] = init.auth_methods or []
    assert methods and {getattr(m, "type", "agent") for m in methods} == {"agent", "terminal"}
    assert init.agent_info is not None and init.agent_info.name == "steerable-bridge"
    assert reply.stop_reason == "end_turn"
    text = "".join(
        u.update.content.text
        for u in client.updates
        if u.update.session_update == "agent_message_chunk"
    )
    assert text.strip(), (tmp_path / "agent.stderr").read_text()
