"""End-to-end: `session/request_permission` outcomes, modes, "always" memory and the timeout."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.transports.acp.harness import Recorder, running

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]


def _write(call_id: str, name: str = "note.txt") -> dict[str, Any]:
    return {
        "tool_calls": [
            {"id": call_id, "name": "write_note", "arguments": {"path": name, "text": "hi"}}
        ]
    }


DONE = {"text": "done"}


def _final(run: Any, call_id: str) -> Any:
    return [
        u
        for u in run.client.updates_of("tool_call_update")
        if u.tool_call_id == call_id and u.status in ("completed", "failed")
    ][-1]


async def test_allow_once_runs_the_edit_and_shows_the_diff(tmp_path: Path) -> None:
    async with running(tmp_path, [_write("w1"), DONE], client=Recorder("allow_once")) as run:
        await run.init()
        sid = await run.new()
        response = await run.prompt(sid, "write it")
    asked = run.client.permission_requests[0]
    assert asked.session_id == sid
    assert asked.tool_call.tool_call_id == "w1"
    assert asked.tool_call.title == "Write note.txt"
    assert asked.tool_call.kind == "edit"
    assert [o.kind for o in asked.options] == [
        "allow_once",
        "allow_always",
        "reject_once",
        "reject_always",
        "reject_once",  # "Reject and stop": the turn ends too
    ]
    assert asked.options[-1].option_id == "reject_stop"
    call = run.client.updates_of("tool_call")[0]
    assert call.title == "Write note.txt" and call.kind == "edit"
    assert [(loc.path, loc.line) for loc in call.locations] == [("note.txt", 1)]
    final = _final(run, "w1")
    assert final.status == "completed"
    diff = final.content[0]
    assert diff.type == "diff" and diff.new_text == "hi" and diff.old_text is None
    assert final.raw_output == {"written": str(tmp_path / "note.txt"), "bytes": 2}
    assert (tmp_path / "note.txt").read_text() == "hi"
    assert response.stop_reason == "end_turn"


async def test_allow_always_is_remembered_for_the_session(tmp_path: Path) -> None:
    rounds = [_write("w1"), DONE, _write("w2", "b.txt"), DONE]
    async with running(tmp_path, rounds, client=Recorder("allow_always")) as run:
        await run.init()
        sid = await run.new()
        await run.prompt(sid, "one")
        await run.prompt(sid, "two")
    assert len(run.client.permission_requests) == 1
    assert _final(run, "w2").status == "completed"
    assert (tmp_path / "b.txt").exists()


async def test_reject_once_and_reject_always(tmp_path: Path) -> None:
    rounds = [_write("w1"), DONE, _write("w2"), DONE, _write("w3"), DONE]
    answers = iter(["reject_once", "reject_always"])

    async def answer(tool_call: Any) -> str:
        return next(answers)

    async with running(tmp_path, rounds, client=Recorder(answer)) as run:
        await run.init()
        sid = await run.new()
        for text in ("one", "two", "three"):
            assert (await run.prompt(sid, text)).stop_reason == "end_turn"
    assert len(run.client.permission_requests) == 2  # the third call is refused without asking
    for call_id in ("w1", "w2", "w3"):
        assert _final(run, call_id).status == "failed"
    assert "always reject" in _final(run, "w3").content[0].content.text
    assert not (tmp_path / "note.txt").exists()


async def test_cancelled_outcome_without_session_cancel_means_not_allowed(tmp_path: Path) -> None:
    async with running(tmp_path, [_write("w1"), DONE], client=Recorder("cancelled")) as run:
        await run.init()
        sid = await run.new()
        response = await run.prompt(sid, "write")
    final = _final(run, "w1")
    assert response.stop_reason == "end_turn"
    assert final.status == "failed"
    assert "withdrawn" in final.content[0].content.text
    assert final.field_meta["steerable"]["error"]["code"] == "permission_denied"


async def test_a_client_that_never_answers_is_bounded_by_the_timeout(tmp_path: Path) -> None:
    args = ("--permission-timeout", "0.3")
    async with running(tmp_path, [_write("w1"), DONE], client=Recorder("hang"), args=args) as run:
        await run.init()
        sid = await run.new()
        response = await run.prompt(sid, "write")
    final = _final(run, "w1")
    assert response.stop_reason == "end_turn"
    assert final.status == "failed"
    assert final.field_meta["steerable"]["error"]["code"] == "permission_timeout"


async def test_modes_decide_what_is_asked(tmp_path: Path) -> None:
    slow = {"tool_calls": [{"id": "s1", "name": "slow_step", "arguments": {"seconds": 0}}]}
    rounds = [_write("w1"), DONE, _write("w2"), slow, DONE]
    async with running(tmp_path, rounds, client=Recorder("reject_once")) as run:
        await run.init()
        sid = await run.new()
        await run.conn.set_session_mode(session_id=sid, mode_id="read-only")
        await run.prompt(sid, "write")
        asked_read_only = len(run.client.permission_requests)
        await run.conn.set_session_mode(session_id=sid, mode_id="accept-edits")
        await run.prompt(sid, "write and run")
    assert asked_read_only == 0
    assert "read-only" in _final(run, "w1").content[0].content.text
    assert _final(run, "w2").status == "completed"  # edits allowed without asking
    assert [r.tool_call.tool_call_id for r in run.client.permission_requests] == ["s1"]
    assert _final(run, "s1").status == "failed"  # execute still asks; rejected
    modes = [u.current_mode_id for u in run.client.updates_of("current_mode_update")]
    assert modes == ["read-only", "accept-edits"]


async def test_approve_all_never_asks(tmp_path: Path) -> None:
    args = ("--approve", "all")
    async with running(tmp_path, [_write("w1"), DONE], client=Recorder("hang"), args=args) as run:
        await run.init()
        sid = await run.new()
        await run.prompt(sid, "write")
    assert run.client.permission_requests == []
    assert _final(run, "w1").status == "completed"
