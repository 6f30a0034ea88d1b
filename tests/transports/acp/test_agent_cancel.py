"""End-to-end: cancelling a turn while it streams, runs a tool or waits for permission.

Each case checks the three promises editors rely on: the prompt answers `cancelled`, every
unfinished tool call gets a final failed `tool_call_update` marked cancelled, and no
`session/update` follows the prompt's response.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp import RequestError

from tests.transports.acp.harness import AcpRun, Recorder, running, wait_until

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]


async def _prompt_in_background(run: AcpRun, sid: str, results: list[Any]) -> None:
    try:
        results.append(await run.prompt(sid, "go"))
    except RequestError as error:
        results.append(error)


async def test_cancel_while_streaming(tmp_path: Path) -> None:
    rounds = [{"text": "partial answer", "hang": True}]
    async with running(tmp_path, rounds) as run:
        await run.init()
        sid = await run.new()
        results: list[Any] = []
        async with anyio.create_task_group() as tg:
            tg.start_soon(_prompt_in_background, run, sid, results)
            await wait_until(lambda: run.client.updates_of("agent_message_chunk"))
            await run.conn.cancel(session_id=sid)
        await run.assert_quiet_after_prompt()
    assert results[0].stop_reason == "cancelled"


async def test_cancel_during_a_tool(tmp_path: Path) -> None:
    slow = {"tool_calls": [{"id": "s1", "name": "slow_step", "arguments": {"seconds": 60}}]}
    async with running(tmp_path, [slow], client=Recorder("allow_once")) as run:
        await run.init()
        sid = await run.new()
        results: list[Any] = []
        async with anyio.create_task_group() as tg:
            tg.start_soon(_prompt_in_background, run, sid, results)
            await wait_until(
                lambda: any(u.content for u in run.client.updates_of("tool_call_update"))
            )
            await run.conn.cancel(session_id=sid)
        await run.assert_quiet_after_prompt()
    assert results[0].stop_reason == "cancelled"
    updates = run.client.updates_of("tool_call_update")
    assert [u.status for u in updates] == ["in_progress", None, "failed"]
    assert updates[1].content[0].content.text == "started"
    assert updates[-1].field_meta["steerable"]["status"] == "cancelled"


async def test_cancel_during_a_permission_wait_withdraws_it(tmp_path: Path) -> None:
    write = {
        "tool_calls": [
            {"id": "w1", "name": "write_note", "arguments": {"path": "x.txt", "text": "x"}}
        ]
    }
    async with running(tmp_path, [write], client=Recorder("hang")) as run:
        await run.init()
        sid = await run.new()
        results: list[Any] = []
        async with anyio.create_task_group() as tg:
            tg.start_soon(_prompt_in_background, run, sid, results)
            await wait_until(lambda: run.client.permission_requests)
            await run.conn.cancel(session_id=sid)
        await run.assert_quiet_after_prompt()
    assert results[0].stop_reason == "cancelled"
    final = run.client.updates_of("tool_call_update")[-1]
    assert final.tool_call_id == "w1" and final.status == "failed"
    assert final.field_meta["steerable"]["status"] == "cancelled"
    assert not (tmp_path / "x.txt").exists()


async def test_a_second_concurrent_prompt_is_rejected(tmp_path: Path) -> None:
    rounds = [{"text": "busy", "hang": True}, {"text": "next"}]
    async with running(tmp_path, rounds) as run:
        await run.init()
        sid = await run.new()
        results: list[Any] = []
        async with anyio.create_task_group() as tg:
            tg.start_soon(_prompt_in_background, run, sid, results)
            await wait_until(lambda: run.client.updates_of("agent_message_chunk"))
            with pytest.raises(RequestError) as error:
                await run.prompt(sid, "again")
            await run.conn.cancel(session_id=sid)
        after = await run.prompt(sid, "after")
    assert error.value.code == -32010
    assert "already running a prompt" in str(error.value)
    assert results[0].stop_reason == "cancelled"
    assert after.stop_reason == "end_turn"


async def test_cancel_request_cancels_the_prompt_without_a_traceback(tmp_path: Path) -> None:
    rounds = [{"text": "partial", "hang": True}]
    async with running(tmp_path, rounds) as run:
        await run.init()
        sid = await run.new()
        results: list[Any] = []
        async with anyio.create_task_group() as tg:
            tg.start_soon(_prompt_in_background, run, sid, results)
            await wait_until(lambda: run.client.updates_of("agent_message_chunk"))
            prompt_id = next(
                e.message["id"] for e in run.wire if e.message.get("method") == "session/prompt"
            )
            frame = {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"id": prompt_id}}
            run.process.stdin.write((json.dumps(frame) + "\n").encode())
            unknown = {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"id": 999}}
            run.process.stdin.write((json.dumps(unknown) + "\n").encode())
        await run.assert_quiet_after_prompt()
    assert results[0].stop_reason == "cancelled"
    assert results[0].usage is None  # text streamed, nothing counted: no zeros reported
    assert "Traceback" not in run.stderr()


async def test_close_cancels_the_running_turn_and_forgets_the_session(tmp_path: Path) -> None:
    rounds = [{"text": "partial", "hang": True}]
    async with running(tmp_path, rounds) as run:
        await run.init()
        sid = await run.new()
        results: list[Any] = []
        async with anyio.create_task_group() as tg:
            tg.start_soon(_prompt_in_background, run, sid, results)
            await wait_until(lambda: run.client.updates_of("agent_message_chunk"))
            await run.conn.close_session(session_id=sid)
        with pytest.raises(RequestError) as error:
            await run.prompt(sid, "still there?")
    assert results[0].stop_reason == "cancelled"
    assert error.value.code == -32002


async def test_steer_reaches_the_running_turn(tmp_path: Path) -> None:
    slow = {"tool_calls": [{"id": "s1", "name": "slow_step", "arguments": {"seconds": 0.5}}]}
    async with running(tmp_path, [slow, {"text": "steered"}], client=Recorder("allow_once")) as run:
        await run.init(steerable={"events": True})
        sid = await run.new()
        idle = await run.conn.ext_method("steerable/steer", {"sessionId": sid, "text": "x"})
        results: list[Any] = []
        async with anyio.create_task_group() as tg:
            tg.start_soon(_prompt_in_background, run, sid, results)
            await wait_until(lambda: run.client.updates_of("tool_call_update"))
            taken = await run.conn.ext_method(
                "steerable/steer", {"sessionId": sid, "text": "also check the tests"}
            )
        with pytest.raises(RequestError) as bad:
            await run.conn.ext_method("steerable/steer", {"sessionId": sid})
        with pytest.raises(RequestError) as unknown:
            await run.conn.ext_method("steerable/nothing", {})
    assert idle["taken"] is False and "no prompt is running" in idle["reason"]
    assert taken == {"taken": True, "reason": None}
    assert results[0].stop_reason == "end_turn"
    steer = run.client.updates_of("user_message_chunk")
    assert [u.content.text for u in steer] == ["also check the tests"]
    assert steer[0].field_meta["steerable"]["kind"] == "steer_applied"
    assert "steer_applied" in [e["kind"] for e in run.client.events]
    assert bad.value.code == -32602
    assert unknown.value.code == -32601


async def test_follow_up_is_advertised_and_taken_when_the_turn_would_end(tmp_path: Path) -> None:
    slow = {"tool_calls": [{"id": "s1", "name": "slow_step", "arguments": {"seconds": 0.5}}]}
    rounds = [slow, {"text": "first answer"}, {"text": "followed up"}]
    async with running(tmp_path, rounds, client=Recorder("allow_once")) as run:
        init = await run.init(steerable={"events": True})
        sid = await run.new()
        idle = await run.conn.ext_method("steerable/follow_up", {"sessionId": sid, "text": "x"})
        results: list[Any] = []
        async with anyio.create_task_group() as tg:
            tg.start_soon(_prompt_in_background, run, sid, results)
            await wait_until(lambda: run.client.updates_of("tool_call_update"))
            taken = await run.conn.ext_method(
                "steerable/follow_up", {"sessionId": sid, "text": "then summarise"}
            )
        with pytest.raises(RequestError) as bad:
            await run.conn.ext_method("steerable/follow_up", {"text": "no session"})
    advertised = init.agent_capabilities.field_meta["steerable"]  # type: ignore[union-attr,index]
    assert advertised["steer"]["method"] == "_steerable/steer"
    assert advertised["follow_up"]["method"] == "_steerable/follow_up"
    assert idle["taken"] is False and taken == {"taken": True, "reason": None}
    assert results[0].stop_reason == "end_turn"
    chunks = run.client.updates_of("user_message_chunk")
    assert [u.content.text for u in chunks] == ["then summarise"]
    assert chunks[0].field_meta["steerable"]["kind"] == "follow_up_applied"
    text = "".join(u.content.text for u in run.client.updates_of("agent_message_chunk"))
    assert "followed up" in text
    assert bad.value.code == -32602
