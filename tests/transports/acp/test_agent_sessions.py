"""End-to-end: session/load replay, resume, list, fork, delete, and logout."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from acp import RequestError

from steerable_bridge.transports.acp.sdk_private import raw_connection
from tests.transports.acp.harness import Recorder, running

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]

CONVERSATION: list[dict[str, Any]] = [
    {
        "reasoning": "I should plan and write.",
        "text": "On it.",
        "chunk_size": 3,
        "tool_calls": [
            {
                "id": "p1",
                "name": "update_plan",
                "arguments": {"entries": [{"content": "Write the note", "status": "pending"}]},
            },
            {"id": "w1", "name": "write_note", "arguments": {"path": "n.txt", "text": "v1"}},
        ],
        "usage": {"prompt_tokens": 11, "completion_tokens": 7},
    },
    {"text": "Written.", "usage": {"prompt_tokens": 30, "completion_tokens": 2}},
    {
        "tool_calls": [
            {"id": "w2", "name": "write_note", "arguments": {"path": "n.txt", "text": "v2"}}
        ]
    },
    {"text": "Refused, fine."},
]


def _dump(update: Any) -> dict[str, Any]:
    data: dict[str, Any] = update.model_dump(mode="json", by_alias=True, exclude_none=True)
    return data


def _folded(updates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Live updates as a load replays them: the consecutive chunks of one message as one
    chunk (text joined, the first one's seq and ts, `last_seq` the last one's)."""
    out: list[dict[str, Any]] = []
    for update in updates:
        last = out[-1] if out else None
        kind = update["sessionUpdate"]
        if (
            last is not None
            and kind in ("agent_message_chunk", "agent_thought_chunk")
            and last["sessionUpdate"] == kind
            and last.get("messageId") == update.get("messageId")
            and last["_meta"]["steerable"]["run_id"] == update["_meta"]["steerable"]["run_id"]
        ):
            last["content"] = {
                **last["content"],
                "text": last["content"]["text"] + update["content"]["text"],
            }
            last["_meta"] = {
                "steerable": {
                    **last["_meta"]["steerable"],
                    "last_seq": update["_meta"]["steerable"]["seq"],
                }
            }
            continue
        out.append(dict(update))
    return out


async def test_load_replays_the_whole_conversation_as_it_was_sent_live(tmp_path: Path) -> None:
    answers = iter(["allow_once", "reject_once"])

    async def answer(tool_call: Any) -> str:
        return next(answers)

    async with running(tmp_path, CONVERSATION, client=Recorder(answer), context_window=999) as run:
        await run.init()
        sid = await run.new()
        await run.prompt(sid, "Please write the note")
        await run.prompt(sid, "Now overwrite it")
        live = [_dump(n.update) for n in run.client.updates]
        run.client.updates.clear()
        load = await run.conn.load_session(cwd=str(tmp_path), session_id=sid, mcp_servers=[])
        replayed = [_dump(n.update) for n in run.client.updates]
        load_index, _ = run.response_index("session/load")
        updates_before_response = sum(
            1 for e in run.wire[:load_index] if e.message.get("method") == "session/update"
        )
    assert load.modes is not None and load.modes.current_mode_id == "default"
    users = [u for u in replayed if u["sessionUpdate"] == "user_message_chunk"]
    assert [u["content"]["text"] for u in users] == ["Please write the note", "Now overwrite it"]
    # notices (here: the compaction breaker opening) are live only: never replayed
    notices = [u for u in live if u.get("_meta", {}).get("steerable", {}).get("kind") == "notice"]
    assert notices and notices[0]["content"]["text"].startswith("Automatic compaction is paused")
    assert not any(
        u.get("_meta", {}).get("steerable", {}).get("kind") == "notice" for u in replayed
    )
    history = [u for u in live if u not in notices]
    assert [u for u in replayed if u["sessionUpdate"] != "user_message_chunk"] == _folded(history)
    assert len(replayed) < len(live)  # streamed in 3-character chunks, replayed whole
    kinds = {u["sessionUpdate"] for u in replayed}
    assert {
        "agent_thought_chunk",
        "agent_message_chunk",
        "tool_call",
        "tool_call_update",
        "plan",
        "usage_update",
        "session_info_update",
        "available_commands_update",
    } <= kinds
    finals = [
        (u["toolCallId"], u["status"])
        for u in replayed
        if u["sessionUpdate"] == "tool_call_update" and u.get("status") in ("completed", "failed")
    ]
    assert finals == [("p1", "completed"), ("w1", "completed"), ("w2", "failed")]
    assert updates_before_response == len(live) + len(replayed)  # replay precedes the answer


async def test_a_session_reloads_in_a_new_process_from_storage(tmp_path: Path) -> None:
    async with running(tmp_path, CONVERSATION[:2], client=Recorder("allow_always")) as run:
        await run.init()
        sid = await run.new()
        await run.prompt(sid, "Please write the note")
        live = [_dump(n.update) for n in run.client.updates]
    rounds = [CONVERSATION[2], {"text": "again"}]
    async with running(tmp_path, rounds, client=Recorder("reject_once")) as second:
        await second.init()
        await second.conn.load_session(cwd=str(tmp_path), session_id=sid, mcp_servers=[])
        replayed = [_dump(n.update) for n in second.client.updates]
        response = await second.prompt(sid, "and once more")
    assert [u for u in replayed if u["sessionUpdate"] != "user_message_chunk"] == _folded(live)
    assert len(replayed) < len(live)  # streamed in 3-character chunks, replayed whole
    assert response.stop_reason == "end_turn"
    assert second.client.permission_requests == []  # "always allow" came back with the session
    assert (tmp_path / "n.txt").read_text() == "v2"


async def test_resume_does_not_replay_and_the_session_continues(tmp_path: Path) -> None:
    async with running(tmp_path, [{"text": "first"}, {"text": "second"}]) as run:
        await run.init()
        sid = await run.new()
        await run.prompt(sid, "one")
        before = len(run.client.updates)
        resumed = await run.conn.resume_session(cwd=str(tmp_path), session_id=sid)
        after_resume = len(run.client.updates)
        await run.prompt(sid, "two")
        with pytest.raises(RequestError) as missing:
            await run.conn.resume_session(cwd=str(tmp_path), session_id="sess_nope")
    assert resumed.modes is not None
    assert after_resume == before
    texts = [u.content.text for u in run.client.updates_of("agent_message_chunk")]
    assert texts == ["first", "second"]
    assert missing.value.code == -32002


async def test_list_pages_by_cursor_and_filters_by_cwd(tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    async with running(tmp_path, [{"text": "hi"}]) as run:
        await run.init()
        titled = await run.new(other)
        await run.prompt(titled, "A titled session")
        ids = {await run.new() for _ in range(54)}
        first = await run.conn.list_sessions()
        second = await run.conn.list_sessions(cursor=first.next_cursor)
        filtered = await run.conn.list_sessions(cwd=str(other))
        with pytest.raises(RequestError) as bad_cursor:
            await run.conn.list_sessions(cursor="not-a-cursor")
        with pytest.raises(RequestError) as relative:
            await run.conn.list_sessions(cwd="rel")
    assert len(first.sessions) == 50 and first.next_cursor
    assert second.next_cursor is None
    listed = {s.session_id for s in first.sessions} | {s.session_id for s in second.sessions}
    assert listed == ids | {titled}
    assert [(s.session_id, s.title) for s in filtered.sessions] == [(titled, "A titled session")]
    assert filtered.sessions[0].cwd == str(other)
    assert filtered.sessions[0].updated_at and filtered.sessions[0].updated_at.endswith("Z")
    assert bad_cursor.value.code == relative.value.code == -32602


async def test_fork_copies_the_conversation_into_a_new_session(tmp_path: Path) -> None:
    async with running(tmp_path, [{"text": "original"}, {"text": "in the fork"}]) as run:
        await run.init()
        sid = await run.new()
        await run.prompt(sid, "start")
        fork = await run.conn.fork_session(cwd=str(tmp_path), session_id=sid)
        run.client.updates.clear()
        await run.conn.load_session(cwd=str(tmp_path), session_id=fork.session_id, mcp_servers=[])
        replay = [u.content.text for u in run.client.updates_of("agent_message_chunk")]
        await run.prompt(fork.session_id, "continue")
        listed = {s.session_id for s in (await run.conn.list_sessions()).sessions}
    assert fork.session_id != sid
    assert replay == ["original"]
    assert {sid, fork.session_id} <= listed
    assert all(n.session_id == fork.session_id for n in run.client.updates)


async def test_delete_and_logout_are_answered_deliberately(tmp_path: Path) -> None:
    async with running(tmp_path, []) as run:
        await run.init()
        sid = await run.new()
        deleted = await raw_connection(run.conn).send_request("session/delete", {"sessionId": sid})
        with pytest.raises(RequestError) as again:
            await raw_connection(run.conn).send_request("session/delete", {"sessionId": sid})
        with pytest.raises(RequestError) as logout:
            await raw_connection(run.conn).send_request("logout", {})
        listed = await run.conn.list_sessions()
        with pytest.raises(RequestError) as load:
            await run.conn.load_session(cwd=str(tmp_path), session_id=sid, mcp_servers=[])
    assert deleted == {}
    assert again.value.code == load.value.code == -32002
    assert logout.value.code == -32012 and "environment variables" in str(logout.value)
    assert listed.sessions == []


async def test_a_second_agent_on_the_same_store_is_told_which_process_runs_the_session(
    tmp_path: Path,
) -> None:
    shared = {"STEERABLE_STORAGE": str(tmp_path / "shared.db")}
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    hang = [{"text": "working on it", "hang": True}]
    async with (
        running(tmp_path / "a", hang, env=shared) as first,
        running(tmp_path / "b", [{"text": "unused"}], env=shared) as second,
    ):
        await first.init()
        await second.init()
        sid = await first.new(cwd=tmp_path)
        async with anyio.create_task_group() as tg:
            tg.start_soon(first.prompt, sid, "start a long turn")
            await first.settle(1, "agent_message_chunk")
            await second.conn.load_session(cwd=str(tmp_path), session_id=sid, mcp_servers=[])
            with pytest.raises(RequestError) as refused:
                await second.prompt(sid, "and one from here")
            await first.conn.cancel(session_id=sid)
        owner_pid = first.process.pid
    assert refused.value.data["code"] == "session_owned"
    assert f"process {owner_pid}" in str(refused.value), str(refused.value)
