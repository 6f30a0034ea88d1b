"""`acp --agui-url` in front of a server that is not ours (stateless, no steerable metadata,
snapshots and events the bridge does not know): the second prompt carries the first, a
non-SSE answer and a stalled stream each end the prompt with one clear error."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from acp import RequestError
from ag_ui.core import (
    BaseEvent,
    MessagesSnapshotEvent,
    RunFinishedEvent,
    RunStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
)
from starlette.responses import Response, StreamingResponse

from tests.transports.agui.bridge.harness import (
    EditorSide,
    bridge,
    foreign_server,
    prompt_blocks,
)

pytestmark = [pytest.mark.slow, pytest.mark.anyio]


def _reply(text: str) -> Any:
    def answer(body: dict[str, Any]) -> list[BaseEvent | str]:
        thread, run = body["threadId"], body["runId"]
        return [
            RunStartedEvent(thread_id=thread, run_id=run),
            MessagesSnapshotEvent(messages=body["messages"]),
            '{"type": "SOMETHING_NEW", "detail": 1}',
            TextMessageStartEvent(message_id="msg-1", role="assistant"),
            TextMessageContentEvent(message_id="msg-1", delta=text),
            TextMessageEndEvent(message_id="msg-1"),
            RunFinishedEvent(thread_id=thread, run_id=run),
        ]

    return answer


@pytest.mark.timeout(90)
async def test_the_second_prompt_sends_the_first_to_a_stateless_server(tmp_path: Path) -> None:
    editor = EditorSide()
    async with (
        foreign_server([_reply("Paris."), _reply("Rome.")]) as server,
        bridge(server.url, editor, tmp_path) as conn,
    ):
        session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
        sid = session.session_id
        await conn.prompt(session_id=sid, prompt=prompt_blocks("Capital of France?"))
        first = editor.text()
        editor.updates.clear()
        await conn.prompt(session_id=sid, prompt=prompt_blocks("And of Italy?"))
    assert (first, editor.text()) == ("Paris.", "Rome.")
    second = server.inputs[1]
    assert second["threadId"] == sid
    assert [(m["role"], m["content"]) for m in second["messages"]] == [
        ("user", "Capital of France?"),
        ("assistant", "Paris."),
        ("user", "And of Italy?"),
    ]


@pytest.mark.timeout(60)
async def test_a_non_sse_answer_is_one_clear_prompt_error(tmp_path: Path) -> None:
    editor = EditorSide()
    async with foreign_server([_reply("unused")]) as server:
        url = server.url.replace("/agent", "/json")
        async with bridge(url, editor, tmp_path) as conn:
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            with pytest.raises(RequestError) as failed:
                await conn.prompt(session_id=session.session_id, prompt=prompt_blocks("hi"))
    assert failed.value.data["code"] == "agui_bad_response"
    assert "not an event stream" in str(failed.value)


@pytest.mark.timeout(60)
async def test_a_stalled_stream_fails_after_the_idle_timeout(tmp_path: Path) -> None:
    never = anyio.Event()

    def stall(body: dict[str, Any]) -> Response:
        async def frames() -> Any:
            yield 'data: {"type":"RUN_STARTED","threadId":"t","runId":"r"}\n\n'
            with anyio.move_on_after(30):  # the bridge gives up first and disconnects
                await never.wait()

        return StreamingResponse(frames(), media_type="text/event-stream")

    editor = EditorSide()
    async with foreign_server([stall]) as server:
        async with bridge(server.url, editor, tmp_path, "--agui-idle-timeout", "1") as conn:
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            with pytest.raises(RequestError) as failed:
                await conn.prompt(session_id=session.session_id, prompt=prompt_blocks("hi"))
        never.set()
    assert failed.value.data["code"] == "agui_stalled"
    assert "--agui-idle-timeout" in str(failed.value)
