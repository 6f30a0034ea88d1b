"""The ACP client validator, driven by a scripted SDK client that behaves well or badly."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import sys
import xml.etree.ElementTree as ET
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from acp import connect_to_agent, spawn_agent_process, text_block
from acp.schema import ClientCapabilities, FileSystemCapabilities, Implementation

from steerable_bridge.conformance.validators.acp_client import ClientValidator
from steerable_bridge.conformance.validators.acp_client_run import serve_client_validator
from steerable_bridge.conformance.validators.client_session import ValidatorSettings
from steerable_bridge.conformance.validators.report import Report, report_from_json

from .scripted_client import ScriptedClient

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]

FAST = ValidatorSettings(person_timeout=5, cancel_timeout=5, request_timeout=5, probe_timeout=2)
EVERYTHING = ClientCapabilities(
    fs=FileSystemCapabilities(read_text_file=True, write_text_file=True), terminal=True
)


@asynccontextmanager
async def connected(
    client: ScriptedClient, validator: ClientValidator, caps: ClientCapabilities = EVERYTHING
) -> AsyncIterator[Any]:
    """The validator and the client joined by a socket pair, initialized."""
    left, right = socket.socketpair()
    agent_reader, agent_writer = await asyncio.open_connection(sock=left)
    client_reader, client_writer = await asyncio.open_connection(sock=right)
    server = asyncio.create_task(serve_client_validator(validator, agent_writer, agent_reader))
    conn = connect_to_agent(client, client_writer, client_reader)
    try:
        await conn.initialize(
            protocol_version=1,
            client_capabilities=caps,
            client_info=Implementation(name="scripted-client", version="1.0"),
        )
        yield conn
    finally:
        await client.close()
        await conn.close()
        server.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(server, 5)


async def validate(
    tmp_path: Path,
    client: ScriptedClient,
    *,
    caps: ClientCapabilities = EVERYTHING,
    settings: ValidatorSettings = FAST,
) -> tuple[Report, str]:
    validator = ClientValidator(settings, report_path=tmp_path / "report.json", junit=True)
    async with connected(client, validator, caps) as conn:
        session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
        response = await conn.prompt(session_id=session.session_id, prompt=[text_block("go")])
    assert validator.last_report is not None
    return validator.last_report, response.stop_reason


def saved(folder: Path) -> tuple[list[Path], Report, ET.Element]:
    """Scratch files left behind, the JSON report and the JUnit suite in `folder`."""
    leftovers = list(folder.glob(".steerable-validator-*"))
    report = report_from_json((folder / "report.json").read_text())
    suite = ET.parse(folder / "report.xml").getroot().find("testsuite")
    assert suite is not None
    return leftovers, report, suite


def statuses(report: Report) -> dict[str, str]:
    return {check.id: check.status for check in report.checks}


def evidence(report: Report, check_id: str) -> str:
    return next(c.evidence for c in report.checks if c.id == check_id)


async def test_a_careful_client_passes_every_check_it_can_take(tmp_path: Path) -> None:
    client = ScriptedClient()
    report, stop_reason = await validate(tmp_path, client)
    assert report.failed == (), report.to_text()
    got = statuses(report)
    for check_id in (
        "client.unknown_request",
        "client.initialize",
        "client.session_new",
        "client.prompt",
        "update.agent_message_chunk",
        "update.agent_thought_chunk",
        "update.plan",
        "update.tool_call",
        "update.tool_call_update.text",
        "update.tool_call_update.diff",
        "update.tool_call.terminal",
        "update.available_commands_update",
        "update.current_mode_update",
        "update.config_option_update",
        "update.session_info_update",
        "update.usage_update",
        "permission.outcome",
        "permission.option_offered",
        "fs.write_text_file",
        "fs.read_text_file",
        "fs.read_text_file.line_limit",
        "terminal.create",
        "terminal.output",
        "terminal.wait_for_exit",
        "terminal.kill",
        "terminal.release",
        "cancel.session_cancel",
        "cancel.permission_cancelled",
        "transcript.rules",
    ):
        assert got[check_id] == "pass", (check_id, report.to_text())
    assert got["client.session_load"] == "skipped"
    assert stop_reason == "cancelled"
    # The person sees every update kind, and the turn ends with the summary table.
    kinds = {type(u).__name__ for u in client.updates}
    assert {"AgentThoughtChunk", "ToolCallStart", "ToolCallProgress", "AgentPlanUpdate"} <= kinds
    texts = [u.content.text for u in client.updates if type(u).__name__ == "AgentMessageChunk"]
    assert any("| `permission.option_offered` | pass |" in t for t in texts)
    # The scratch file was cleaned up; the report is on disk as JSON and JUnit XML.
    leftovers, on_disk, suite = saved(tmp_path)
    assert leftovers == []
    assert statuses(on_disk) == got
    assert suite.get("failures") == "0"
    assert suite.get("tests") == str(len(report.checks))


async def test_selecting_an_option_that_was_not_offered_fails(tmp_path: Path) -> None:
    report, _ = await validate(tmp_path, ScriptedClient(unoffered_option="allow"))
    got = statuses(report)
    assert got["permission.outcome"] == "pass"
    assert got["permission.option_offered"] == "fail"
    assert "'allow', which was not offered" in evidence(report, "permission.option_offered")
    assert [c.id for c in report.failed] == ["permission.option_offered"]
    assert report.exit_code() == 1
    assert saved(tmp_path)[1].count("fail") == 1


async def test_an_outcome_outside_the_schema_fails(tmp_path: Path) -> None:
    client = ScriptedClient(raw_permission_answer={"outcome": {"outcome": "approved"}})
    report, _ = await validate(tmp_path, client)
    got = statuses(report)
    assert got["permission.outcome"] == "fail"
    assert "breaks the RequestPermissionResponse schema" in evidence(report, "permission.outcome")
    assert got["permission.option_offered"] == "skipped"


async def test_ignoring_line_and_limit_fails_the_partial_read(tmp_path: Path) -> None:
    report, _ = await validate(tmp_path, ScriptedClient(ignore_line_limit=True))
    assert statuses(report)["fs.read_text_file.line_limit"] == "fail"
    assert "expected 'line 2" in evidence(report, "fs.read_text_file.line_limit")
    assert statuses(report)["fs.read_text_file"] == "pass"


async def test_unadvertised_features_and_an_absent_person_are_skipped_with_reasons(
    tmp_path: Path,
) -> None:
    settings = ValidatorSettings(
        person_timeout=5, cancel_timeout=0.5, request_timeout=5, probe_timeout=1
    )
    report, stop_reason = await validate(
        tmp_path,
        ScriptedClient(press_stop=False),
        caps=ClientCapabilities(),
        settings=settings,
    )
    got = statuses(report)
    for check_id in ("fs.read_text_file", "fs.write_text_file", "terminal.create", "terminal.kill"):
        assert got[check_id] == "skipped"
        assert "did not advertise" in evidence(report, check_id)
    assert got["cancel.session_cancel"] == "skipped"
    assert evidence(report, "cancel.session_cancel") == "person did not act in time (0.5 s)"
    assert got["cancel.permission_cancelled"] == "skipped"
    assert stop_reason == "end_turn"


async def test_a_client_that_never_answers_unknown_requests_fails_that_check(
    tmp_path: Path,
) -> None:
    settings = ValidatorSettings(
        person_timeout=5, cancel_timeout=5, request_timeout=5, probe_timeout=0.3
    )
    report, _ = await validate(tmp_path, ScriptedClient(hang_on_unknown=True), settings=settings)
    got = statuses(report)
    assert got["client.unknown_request"] == "fail"
    assert "-32601" in evidence(report, "client.unknown_request")
    assert got["update.plan"] == "skipped"
    assert "uptake cannot be confirmed" in evidence(report, "update.plan")
    assert got["permission.option_offered"] == "pass"


async def test_load_replays_resume_does_not_and_bad_mode_ids_fail(tmp_path: Path) -> None:
    client = ScriptedClient()
    validator = ClientValidator(FAST)
    async with connected(client, validator) as conn:
        session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
        await conn.prompt(session_id=session.session_id, prompt=[text_block("go")])
        seen = len(client.updates)
        await conn.load_session(cwd=str(tmp_path), session_id=session.session_id, mcp_servers=[])
        replayed = client.updates[seen:]
        await conn.resume_session(cwd=str(tmp_path), session_id=session.session_id)
        assert len(client.updates) == seen + len(replayed)
        with pytest.raises(Exception, match="Invalid params"):
            await conn.set_session_mode(session_id=session.session_id, mode_id="turbo")
        await conn.set_config_option(
            config_id="validator_depth", session_id=session.session_id, value="full"
        )
        report = validator.report()
    assert type(replayed[0]).__name__ == "UserMessageChunk"
    assert len(replayed) > 20
    got = statuses(report)
    assert got["client.session_load"] == "pass"
    assert got["client.session_resume"] == "pass"
    assert got["client.set_mode"] == "fail"
    assert "'turbo', which was not offered" in evidence(report, "client.set_mode")
    assert got["client.set_config_option"] == "pass"


async def test_acp_validate_client_runs_over_stdio_as_a_process(tmp_path: Path) -> None:
    client = ScriptedClient()
    report_path = tmp_path / "report.json"
    command = [
        "-m",
        "steerable_bridge.cli",
        "acp",
        "--validate-client",
        "--junit",
        "--report",
        str(report_path),
        "--cancel-timeout",
        "5",
    ]
    async with spawn_agent_process(
        client, sys.executable, *command, transport_kwargs={"stderr": asyncio.subprocess.DEVNULL}
    ) as (conn, _process):
        await conn.initialize(protocol_version=1, client_capabilities=EVERYTHING)
        session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
        response = await conn.prompt(session_id=session.session_id, prompt=[text_block("go")])
        await client.close()
    assert response.stop_reason == "cancelled"
    report = saved(tmp_path)[1]
    assert report.failed == (), report.to_text()
    assert statuses(report)["terminal.kill"] == "pass"


async def test_a_client_that_leaves_before_prompting_still_gets_a_report(tmp_path: Path) -> None:
    command = ["-m", "steerable_bridge.cli", "acp", "--validate-client", "--junit", "--report"]
    async with spawn_agent_process(
        ScriptedClient(),
        sys.executable,
        *command,
        str(tmp_path / "report.json"),
        transport_kwargs={"stderr": asyncio.subprocess.DEVNULL},
    ) as (conn, process):
        await conn.initialize(protocol_version=1, client_capabilities=EVERYTHING)
        await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
    assert process.returncode == 0
    report = saved(tmp_path)[1]
    got = statuses(report)
    assert got["client.initialize"] == "pass"
    assert got["client.session_new"] == "pass"
    assert got["turn.completed"] == "skipped"
    assert evidence(report, "turn.completed") == "the client never sent session/prompt"
