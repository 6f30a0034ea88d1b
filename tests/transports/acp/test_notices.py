"""End-to-end: the v1.25 `notice` and compaction updates of the real `steerable-bridge acp`.

The SDK 0.12.1 client can neither advertise `session.notices` / `session.compaction` (its
`ClientSessionCapabilities` has no such fields) nor parse those updates (its
`SessionNotification` rejects them, so its `session_update` handler never sees them). So
`initialize` is sent as raw JSON through the SDK's connection and the updates are read off
the recorded wire; the conformance suite then grades and decodes that wire.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp import schema as acp
from acp.connection import StreamDirection

from steerable_bridge.conformance import check_acp_transcript
from steerable_bridge.conformance.decode_acp import decode_acp
from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.encoding import codec
from steerable_bridge.transports.acp.sdk_private import raw_connection
from tests.transports.acp.harness import AcpRun, running, wait_until

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60), pytest.mark.slow]

V125 = {"session": {"notices": {}, "compaction": {}}}
ROUNDS = [{"text": "first answer " * 40}, {"text": "second answer"}]
SUMMARY = [{"text": "SUMMARY of the first turn"}]


async def _initialize(run: AcpRun, capabilities: dict[str, Any]) -> None:
    """`initialize` as raw JSON: the SDK's models would drop the v1.25 capabilities."""
    params = {
        "protocolVersion": 1,
        "clientCapabilities": capabilities,
        "_meta": {"steerable": {"events": True}},
    }
    await raw_connection(run.conn).send_request("initialize", params)


def _transcript(run: AcpRun) -> list[dict[str, Any]]:
    return [
        {
            "sender": "client" if e.direction == StreamDirection.OUTGOING else "agent",
            "message": e.message,
        }
        for e in run.wire
    ]


def _updates(run: AcpRun, kind: str) -> list[dict[str, Any]]:
    return [
        e.message["params"]["update"]
        for e in run.wire
        if e.direction == StreamDirection.INCOMING
        and e.message.get("method") == "session/update"
        and e.message["params"]["update"]["sessionUpdate"] == kind
    ]


async def test_compact_streams_its_summary_to_a_client_that_asked(tmp_path: Path) -> None:
    summary = [{"text": "SUMMARY of the first turn", "chunk_size": 6}]
    async with running(tmp_path, ROUNDS, summary_rounds=summary) as run:
        await _initialize(run, V125)
        sid = await run.new()
        await run.prompt(sid, "first question")
        live = len(run.wire)
        compacted = await run.prompt(sid, "/compact")
        during = len(run.wire)
        await run.prompt(sid, "second question")
        await run.conn.load_session(cwd=str(tmp_path), session_id=sid, mcp_servers=[])
    assert compacted.stop_reason == "end_turn"
    logged = list(map(codec.event_from_jsonable, run.client.events))
    folds = [e for e in logged if isinstance(e, ev.Compaction)]
    assert len(folds) == 2 and folds[0] == folds[1]  # live, and replayed on the event channel
    fold = folds[0]
    assert fold.trigger == "manual" and fold.compaction_id
    # live: opened, the summary piece by piece as the model wrote it, then completed
    compaction = [
        (u["sessionUpdate"], u.get("status"), u.get("content", {}).get("text"))
        for e in run.wire[live:during]
        if e.direction == StreamDirection.INCOMING and e.message.get("method") == "session/update"
        for u in [e.message["params"]["update"]]
        if u["sessionUpdate"].startswith("compaction")
    ]
    assert compaction == [
        ("compaction_update", "in_progress", None),
        ("compaction_summary_chunk", None, "SUMMAR"),
        ("compaction_summary_chunk", None, "Y of t"),
        ("compaction_summary_chunk", None, "he fir"),
        ("compaction_summary_chunk", None, "st tur"),
        ("compaction_summary_chunk", None, "n"),
        ("compaction_update", "completed", None),
    ]
    assert "".join(text for _, _, text in compaction if text) == fold.summary
    updates = _updates(run, "compaction_update")
    assert {u["compactionId"] for u in updates} == {fold.compaction_id}
    completed = [u for u in updates if u["status"] == "completed"]
    assert [u["summary"] for u in completed] == [[{"type": "text", "text": fold.summary}]] * 2
    # session/load replays it (a compaction is history) with its summary as one chunk
    chunks = _updates(run, "compaction_summary_chunk")
    assert [c["content"]["text"] for c in chunks[5:]] == [fold.summary]
    # no "Compacted 1 turn" agent message: the client shows the compaction itself
    texts = [u.content.text for u in run.client.updates_of("agent_message_chunk")]
    assert not any(t.startswith("Compacted") for t in texts)
    transcript = _transcript(run)
    assert check_acp_transcript(transcript) == []
    streamed = [e for e in logged if e.kind.startswith("compaction")]
    decoded = [e for e in decode_acp(transcript, channel=False) if e.kind.startswith("compaction")]
    assert decoded == streamed[: len(streamed) // 2]  # exactly what was logged (load: deduped)


async def test_a_cancel_mid_summary_sends_cancelled_and_leaves_the_session_as_it_was(
    tmp_path: Path,
) -> None:
    hanging = [{"text": "HALF a summ", "chunk_size": 4, "hang": True}]
    async with running(tmp_path, ROUNDS, summary_rounds=hanging) as run:
        await _initialize(run, V125)
        sid = await run.new()
        await run.prompt(sid, "first question")
        results: list[acp.PromptResponse] = []

        async def compact() -> None:
            results.append(await run.prompt(sid, "/compact"))

        async with anyio.create_task_group() as tg:
            tg.start_soon(compact)  # its summary streams, then the model hangs
            await wait_until(lambda: len(_updates(run, "compaction_summary_chunk")) == 3)
            await run.conn.cancel(session_id=sid)
        await run.prompt(sid, "second question")
        await run.conn.load_session(cwd=str(tmp_path), session_id=sid, mcp_servers=[])
    assert results[0].stop_reason == "cancelled"
    logged = list(map(codec.event_from_jsonable, run.client.events))
    assert not any(isinstance(e, ev.Compaction) for e in logged)  # never applied
    (dropped, _replayed) = [e for e in logged if isinstance(e, ev.CompactionDropped)]
    assert dropped.reason == "cancelled"
    statuses = [(u["compactionId"], u["status"]) for u in _updates(run, "compaction_update")]
    # live, then replayed by session/load: opened, then cancelled with why
    assert statuses == [(dropped.compaction_id, "in_progress"),
                        (dropped.compaction_id, "cancelled")] * 2  # fmt: skip
    assert _updates(run, "compaction_update")[1]["error"] == dropped.detail
    # the next turn's model saw the whole conversation, not half a summary
    requests = [e for e in logged if isinstance(e, ev.ModelRequestEvent)]  # live, then replayed
    texts = [m.text for m in requests[: len(requests) // 2][-1].request.messages]
    assert texts[0] == "first question" and "HALF" not in " ".join(texts)
    assert check_acp_transcript(_transcript(run)) == []


async def test_a_client_without_the_capability_gets_the_headline_instead(
    tmp_path: Path,
) -> None:
    async with running(tmp_path, ROUNDS, summary_rounds=SUMMARY) as run:
        await _initialize(run, {})
        sid = await run.new()
        await run.prompt(sid, "first question")
        await run.prompt(sid, "/compact")
    assert _updates(run, "compaction_update") == _updates(run, "compaction_summary_chunk") == []
    texts = [u.content.text for u in run.client.updates_of("agent_message_chunk")]
    assert any(t.startswith("Compacted 1 turn") for t in texts)
    assert check_acp_transcript(_transcript(run)) == []


def _broken_server() -> acp.McpServerStdio:
    return acp.McpServerStdio(
        name="broken", command=sys.executable, args=["-c", "raise SystemExit(3)"], env=[]
    )


@pytest.mark.parametrize("notices", [True, False])
async def test_a_failed_mcp_server_is_a_notice_only_for_a_client_that_asked(
    tmp_path: Path, notices: bool
) -> None:
    async with running(tmp_path, [], args=("--sandbox", "off")) as run:
        await _initialize(run, V125 if notices else {})
        await run.conn.new_session(cwd=str(tmp_path), mcp_servers=[_broken_server()])
        # it goes out after the session/new response
        await wait_until(lambda: _updates(run, "notice" if notices else "agent_message_chunk"))
    shown = _updates(run, "notice")
    texts = [u.content.text for u in run.client.updates_of("agent_message_chunk")]
    if notices:
        (notice,) = shown
        assert notice["severity"] == "warning"
        assert notice["title"] == "An MCP server failed to start"
        assert "broken" in notice["description"]
        assert not any("broken" in t for t in texts)
        assert check_acp_transcript(_transcript(run)) == []
    else:
        assert shown == []
        assert any("broken" in t and "failed to start" in t for t in texts)
        # the fallback is an agent message outside a prompt, which the rules flag: the
        # reason a client should advertise session.notices
        findings = check_acp_transcript(_transcript(run))
        assert [f.rule_id for f in findings] == ["acp.update-outside-prompt"]


async def test_a_sandbox_fallback_is_a_notice_once_per_session_and_never_replayed(
    tmp_path: Path,
) -> None:
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "bwrap").write_text("#!/bin/sh\nexit 1\n")  # there, but it cannot sandbox here
    (fake / "bwrap").chmod(0o755)
    path = f"{fake}{os.pathsep}{os.environ.get('PATH', '')}"
    rounds = [{"text": "one"}, {"text": "two"}]
    async with running(tmp_path, rounds, args=("--sandbox", "auto"), env={"PATH": path}) as run:
        await _initialize(run, V125)
        sid = await run.new()
        await run.prompt(sid, "first")
        await run.prompt(sid, "second")
        await run.conn.load_session(cwd=str(tmp_path), session_id=sid, mcp_servers=[])
    (notice,) = _updates(run, "notice")  # the first turn only, and not in the replay
    assert notice["severity"] == "warning"
    assert notice["title"] == "Commands run without a sandbox"
    assert "UNSANDBOXED" in notice["description"]
    assert notice["_meta"]["steerable"]["kind"] == "notice"
    logged = [e for e in map(codec.event_from_jsonable, run.client.events) if e.kind == "notice"]
    assert len(logged) == 2 and logged[0] == logged[1]  # logged; the lossless channel replays it
    transcript = _transcript(run)
    assert check_acp_transcript(transcript) == []
    assert [e for e in decode_acp(transcript, channel=False) if e.kind == "notice"] == logged[:1]
