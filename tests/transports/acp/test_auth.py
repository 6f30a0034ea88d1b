"""ACP auth: the stable `agent` and `terminal` methods only; a terminal login is picked up by
the running agent without a restart; keyless models never need `authenticate`."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp import RequestError
from acp import schema as acp

from tests.transports.acp.harness import running

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.timeout(90)]

REGISTRY_CAPS = acp.ClientCapabilities(
    fs=acp.FileSystemCapabilities(read_text_file=True, write_text_file=True),
    terminal=True,
    field_meta={"terminal_output": True, "terminal-auth": True},
)
"""What the ACP registry's checker sends (its `.github/workflows/client.py`)."""


def wire_auth_methods(run: Any) -> list[dict[str, Any]]:
    """`authMethods` of the first `initialize` answer, as the raw JSON on the wire."""
    index, _ = run.response_index("initialize")
    methods: list[dict[str, Any]] = run.wire[index].message["result"]["authMethods"]
    return methods


async def test_a_terminal_login_is_used_without_restarting_the_agent(tmp_path: Path) -> None:
    async with running(tmp_path, model="openai:some-model") as run:
        init = await run.conn.initialize(
            protocol_version=1,
            client_capabilities=acp.ClientCapabilities(auth=acp.AuthCapabilities(terminal=True)),
        )
        with pytest.raises(RequestError) as before:
            await run.new()
        terminal = next(m for m in wire_auth_methods(run) if m.get("type") == "terminal")
        flags = ["--provider", "openai", "--base-url", "https://llm.example/v1", "--key-stdin"]
        with anyio.fail_after(60):  # what the client runs in its terminal
            login = await anyio.run_process(
                [sys.executable, "-m", "steerable_bridge.cli", *terminal["args"], *flags],
                input=b"sk-from-login\n",
                env=os.environ.copy(),
                check=False,
            )
        assert login.returncode == 0, login.stderr
        await run.conn.authenticate(method_id="stored-credentials")
        sid = await run.new()
    assert before.value.code == -32000 and before.value.data["code"] == "auth_required"
    assert "steerable-bridge login" in str(before.value)
    assert [(m.id, type(m).__name__) for m in init.auth_methods] == [
        ("stored-credentials", "AuthMethodAgent"),
        ("login", "TerminalAuthMethod"),
    ]
    assert terminal["args"] == ["login"] and sid


async def test_keyless_models_need_no_authenticate(tmp_path: Path) -> None:
    async with running(tmp_path, [{"text": "hello"}]) as run:
        await run.conn.initialize(protocol_version=1, client_capabilities=REGISTRY_CAPS)
        sid = await run.new()  # no authenticate first
        reply = await run.prompt(sid, "hi")
        await run.conn.authenticate(method_id="stored-credentials")  # and it succeeds anyway
        with pytest.raises(RequestError) as unknown:
            await run.conn.authenticate(method_id="env:OPENAI_API_KEY")
    assert reply.stop_reason == "end_turn"
    assert unknown.value.code == -32602 and unknown.value.data["code"] == "unknown_auth_method"


async def test_what_the_registry_checks_auth_methods_agent_or_terminal_only(
    tmp_path: Path,
) -> None:
    async with running(tmp_path, model="demo:default") as run:
        await run.conn.initialize(protocol_version=1, client_capabilities=REGISTRY_CAPS)
        with_meta = wire_auth_methods(run)
    (tmp_path / "plain").mkdir()
    async with running(tmp_path / "plain", model="demo:default") as run:
        await run.conn.initialize(protocol_version=1, client_capabilities=acp.ClientCapabilities())
        plain = wire_auth_methods(run)
    for methods in (with_meta, plain):
        assert methods, "the registry rejects an agent with no authMethods"
        assert {m.get("type", "agent") for m in methods} <= {"agent", "terminal"}
        assert all(m["id"] and m["name"] for m in methods)
    assert [m.get("type", "agent") for m in with_meta] == ["agent", "terminal"]
    assert [m.get("type", "agent") for m in plain] == ["agent"]  # terminal only when offered
