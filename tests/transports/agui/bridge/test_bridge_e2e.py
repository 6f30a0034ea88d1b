"""`steerable-bridge acp --agui-url URL` as an editor uses it, in front of our own `serve`
(scripted model): text and reasoning, a tool call the editor approves, cancel, replay in a
new process, and the one clear prompt error a server that is down gets."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest
from acp import RequestError
from acp import schema as acp

from tests.commands.serve_child import started
from tests.refusing_port import refusing_port
from tests.transports.agui.bridge.harness import (
    EditorSide,
    bridge,
    bridge_env,
    prompt_blocks,
    write_script,
)

CHECK = [sys.executable, "-m", "steerable_bridge.cli", "check", "acp"]

pytestmark = [pytest.mark.slow, pytest.mark.anyio]


def _serve(tmp_path: Path, rounds: list[dict[str, object]]) -> object:
    script = write_script(tmp_path, rounds)
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    return started(["--model", f"scripted:{script}", "--workspace", str(workspace)])


@pytest.mark.timeout(90)
async def test_text_and_reasoning_reach_the_editor(tmp_path: Path) -> None:
    rounds = [{"reasoning": "Thinking it over.", "text": "Hello from the far side."}]
    editor = EditorSide()
    with _serve(tmp_path, rounds) as (base, _):  # type: ignore[attr-defined]
        async with bridge(f"{base}/agent", editor, tmp_path) as conn:
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            answer = await conn.prompt(session_id=session.session_id, prompt=prompt_blocks("hi"))
    assert answer.stop_reason == "end_turn"
    assert editor.text() == "Hello from the far side."
    assert editor.text(acp.AgentThoughtChunk) == "Thinking it over."


@pytest.mark.timeout(90)
async def test_an_interrupt_asks_the_editor_and_the_allowed_call_runs(tmp_path: Path) -> None:
    rounds = [
        {"tool_calls": [{"id": "c1", "name": "write_file",
                         "arguments": {"path": "note.txt", "content": "buy milk"}}]},
        {"text": "Written."},
    ]  # fmt: skip
    editor = EditorSide("allow_once")
    with _serve(tmp_path, rounds) as (base, _):  # type: ignore[attr-defined]
        async with bridge(f"{base}/agent", editor, tmp_path) as conn:
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            answer = await conn.prompt(
                session_id=session.session_id, prompt=prompt_blocks("note: buy milk")
            )
    assert answer.stop_reason == "end_turn"
    assert len(editor.permissions) == 1
    assert editor.permissions[0].tool_call_id == "c1"
    assert editor.permissions[0].title == "Write note.txt"  # our server's title came along
    assert (tmp_path / "ws" / "note.txt").read_text() == "buy milk"
    done = [
        u for u in editor.updates if isinstance(u, acp.ToolCallProgress) and u.status == "completed"
    ]
    assert [u.tool_call_id for u in done] == ["c1"]
    assert editor.text() == "Written."


@pytest.mark.timeout(90)
async def test_a_rejected_call_does_not_run(tmp_path: Path) -> None:
    rounds = [
        {"tool_calls": [{"id": "c1", "name": "write_file",
                         "arguments": {"path": "note.txt", "content": "x"}}]},
        {"text": "Understood, I did not write it."},
    ]  # fmt: skip
    editor = EditorSide("reject_once")
    with _serve(tmp_path, rounds) as (base, _):  # type: ignore[attr-defined]
        async with bridge(f"{base}/agent", editor, tmp_path) as conn:
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            answer = await conn.prompt(session_id=session.session_id, prompt=prompt_blocks("w"))
    assert answer.stop_reason == "end_turn"
    assert not (tmp_path / "ws" / "note.txt").exists()
    failed = [
        u for u in editor.updates if isinstance(u, acp.ToolCallProgress) and u.status == "failed"
    ]
    assert [u.tool_call_id for u in failed] == ["c1"]
    assert editor.text() == "Understood, I did not write it."


@pytest.mark.timeout(90)
async def test_cancel_aborts_the_stream_and_the_next_prompt_works(tmp_path: Path) -> None:
    rounds = [{"text": "Working on it", "hang": True}, {"text": "Fresh answer."}]
    editor = EditorSide()
    with _serve(tmp_path, rounds) as (base, _):  # type: ignore[attr-defined]
        async with bridge(f"{base}/agent", editor, tmp_path) as conn:
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            sid = session.session_id
            outcome: list[str] = []

            async def ask() -> None:
                reply = await conn.prompt(session_id=sid, prompt=prompt_blocks("long job"))
                outcome.append(reply.stop_reason)

            async with anyio.create_task_group() as tasks:
                tasks.start_soon(ask)
                with anyio.fail_after(30):
                    await editor.seen.wait()
                await conn.cancel(session_id=sid)
            editor.updates.clear()
            second = await conn.prompt(session_id=sid, prompt=prompt_blocks("again"))
    assert outcome == ["cancelled"]
    assert second.stop_reason == "end_turn"
    assert editor.text() == "Fresh answer."


@pytest.mark.timeout(120)
async def test_session_load_in_a_new_process_replays_the_conversation(tmp_path: Path) -> None:
    rounds = [{"text": "First answer."}, {"text": "Second answer."}]
    storage = str(tmp_path / "bridge.db")
    with _serve(tmp_path, rounds) as (base, _):  # type: ignore[attr-defined]
        first = EditorSide()
        async with bridge(f"{base}/agent", first, tmp_path, storage=storage) as conn:
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            sid = session.session_id
            await conn.prompt(session_id=sid, prompt=prompt_blocks("question one"))
        again = EditorSide()
        async with bridge(f"{base}/agent", again, tmp_path, storage=storage) as conn:
            listed = await conn.list_sessions()
            await conn.load_session(cwd=str(tmp_path), session_id=sid, mcp_servers=[])
            user = again.text(acp.UserMessageChunk)
            answer = again.text()
            again.updates.clear()
            later = await conn.prompt(session_id=sid, prompt=prompt_blocks("question two"))
    assert sid in [s.session_id for s in listed.sessions]
    assert user == "question one" and answer == "First answer."
    assert later.stop_reason == "end_turn" and again.text() == "Second answer."


@pytest.mark.timeout(60)
async def test_a_server_that_is_down_gets_one_clear_prompt_error(tmp_path: Path) -> None:
    editor = EditorSide()
    with refusing_port() as port:
        async with bridge(f"http://127.0.0.1:{port}/agent", editor, tmp_path) as conn:
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            with pytest.raises(RequestError) as failed:
                await conn.prompt(session_id=session.session_id, prompt=prompt_blocks("hello?"))
    assert failed.value.data["code"] == "agui_unreachable"
    assert "cannot reach the AG-UI server" in str(failed.value)
    assert "Traceback" not in str(failed.value)


@pytest.mark.timeout(240)
async def test_check_acp_finds_no_failure_in_the_bridged_agent(tmp_path: Path) -> None:
    script = tmp_path / "loop.json"
    script.write_text('{"rounds": [{"text": "A reply from the far side."}], "loop": true}')
    with started(["--model", f"scripted:{script}"]) as (base, _):
        agent = [sys.executable, "-m", "steerable_bridge.cli", "acp", "--storage", "memory"]
        done = await anyio.run_process(
            [*CHECK, "--prompt-timeout", "60", "--", *agent, "--agui-url", f"{base}/agent"],
            check=False,
            env=bridge_env(),
        )
    report = done.stdout.decode()
    assert done.returncode == 0, report
    assert ", 0 failed" in report and "FAIL " not in report
