"""Remote ACP end to end: the real `steerable-bridge acp --listen 127.0.0.1:0`, driven by the
Python SDK's Streamable HTTP and WebSocket clients (`acp.http`, `acp.ws`) and by raw HTTP.

Each test starts the command on a scripted model, finds the port on its start-up line, and
checks what a remote client would notice: the handshake, a session, a prompt whose text
arrives as streamed updates, cancel, a turn cancelled when its client goes away, and bad
input (not JSON, a wrong Host, no token off loopback, a body over `--max-body`) answered
with its own error while the server goes on serving.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from acp import PROTOCOL_VERSION, connect_to_agent, text_block
from acp import schema as acp
from acp.client.connection import ClientSideConnection
from acp.http.client import create_http_stream
from acp.ws.client import create_websocket_stream
from httpx_sse import aconnect_sse
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from tests.transports.acp.remote_server import WAIT_S, server

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

HELLO = {"text": "hello from far away", "chunk_size": 5}
HANG = {"text": "thinking", "hang": True}


class Recorder:
    """The client side: records every session update; no fs, no terminals."""

    def __init__(self) -> None:
        self.updates: list[acp.SessionNotification] = []
        self.arrived = asyncio.Event()

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(acp.SessionNotification(session_id=session_id, update=update))
        self.arrived.set()

    def text(self) -> str:
        return "".join(
            u.update.content.text
            for u in self.updates
            if isinstance(u.update, acp.AgentMessageChunk)
            and isinstance(u.update.content, acp.TextContentBlock)
        )

    async def request_permission(self, **kwargs: Any) -> Any:
        raise AssertionError("no permission is asked in these tests")

    def on_connect(self, conn: Any) -> None:
        pass


@asynccontextmanager
async def client(url: str, *, ws: bool = False) -> AsyncIterator[tuple[Any, Recorder]]:
    """An SDK client connection over HTTP (or WebSocket), initialized."""
    recorder = Recorder()
    if ws:
        transport = await create_websocket_stream(url.replace("http://", "ws://"))
    else:
        transport = create_http_stream(url, client=httpx.AsyncClient(timeout=None))
    conn: ClientSideConnection = connect_to_agent(recorder, transport)  # type: ignore[arg-type]
    try:
        async with asyncio.timeout(WAIT_S):
            answer = await conn.initialize(protocol_version=PROTOCOL_VERSION)
        assert answer.protocol_version == PROTOCOL_VERSION
        yield conn, recorder
    finally:
        await conn.close()


async def prompt_and_read(url: str, *, ws: bool) -> None:
    async with client(url, ws=ws) as (conn, recorder):
        async with asyncio.timeout(WAIT_S):
            session = await conn.new_session(cwd=str(Path.cwd()), mcp_servers=[])
            done = await conn.prompt(session_id=session.session_id, prompt=[text_block("hi")])
        assert done.stop_reason == "end_turn"
        assert recorder.text() == HELLO["text"]
        chunks = [u for u in recorder.updates if isinstance(u.update, acp.AgentMessageChunk)]
        assert len(chunks) > 1  # streamed, not one block at the end
        assert {u.session_id for u in recorder.updates} == {session.session_id}


async def cancel_a_turn(url: str, *, ws: bool) -> None:
    async with client(url, ws=ws) as (conn, recorder):
        async with asyncio.timeout(WAIT_S):
            session = await conn.new_session(cwd=str(Path.cwd()), mcp_servers=[])
            turn = asyncio.ensure_future(
                conn.prompt(session_id=session.session_id, prompt=[text_block("hi")])
            )
            while "thinking" not in recorder.text():
                recorder.arrived.clear()
                await recorder.arrived.wait()
            await conn.cancel(session_id=session.session_id)
            done = await turn
        assert done.stop_reason == "cancelled"


@pytest.mark.parametrize("ws", [False, True], ids=["http", "websocket"])
def test_a_prompt_streams_its_reply_and_cancel_ends_a_turn(tmp_path: Path, ws: bool) -> None:
    with server(tmp_path, [HELLO, HANG]) as url:
        asyncio.run(prompt_and_read(url, ws=ws))
        asyncio.run(cancel_a_turn(url, ws=ws))


async def leave_mid_turn_then_load(url: str) -> None:
    """A client that goes away mid-turn: its turn is cancelled, and a new connection that
    loads the session sees the turn ended (it can prompt again at once)."""
    async with client(url, ws=True) as (conn, recorder):
        async with asyncio.timeout(WAIT_S):
            session = await conn.new_session(cwd=str(Path.cwd()), mcp_servers=[])
            left = asyncio.ensure_future(
                conn.prompt(session_id=session.session_id, prompt=[text_block("hi")])
            )
            while "thinking" not in recorder.text():
                recorder.arrived.clear()
                await recorder.arrived.wait()
    left.cancel()
    async with client(url) as (conn, recorder):
        async with asyncio.timeout(WAIT_S):
            await conn.load_session(
                session_id=session.session_id, cwd=str(Path.cwd()), mcp_servers=[]
            )
            done = await conn.prompt(session_id=session.session_id, prompt=[text_block("again")])
        assert done.stop_reason == "end_turn"
        assert HELLO["text"] in recorder.text()


def test_a_client_that_disconnects_has_its_turn_cancelled(tmp_path: Path) -> None:
    with server(tmp_path, [HANG, HELLO]) as url:
        asyncio.run(leave_mid_turn_then_load(url))


def _initialize(http: httpx.Client, url: str, **headers: str) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}
    return http.post(url, json=body, headers=headers)


async def bad_frames_on_a_socket(url: str) -> None:
    """Over a WebSocket: not JSON → a -32700 frame and the socket stays open; a message over
    --max-body → the socket closes with 1009 (message too big)."""
    async with ws_connect(url) as socket, asyncio.timeout(WAIT_S):
        await socket.send("{not json")
        answer = json.loads(await socket.recv())
        assert answer["error"]["code"] == -32700
        await socket.send(
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "initialize",
                    "params": {"protocolVersion": 1},
                }
            )
        )
        assert json.loads(await socket.recv())["id"] == 1
        await socket.send("x" * 4096)
        with pytest.raises(ConnectionClosed) as closed:
            await socket.recv()
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009


def test_bad_input_gets_its_own_error_and_the_server_keeps_serving(tmp_path: Path) -> None:
    limited = server(tmp_path, [HELLO], "--max-body", "2048")
    with limited as url, httpx.Client(timeout=WAIT_S) as http:
        first = _initialize(http, url)
        assert first.status_code == 200
        connection = first.headers["acp-connection-id"]
        assert first.json()["result"]["protocolVersion"] == 1

        broken = http.post(
            url,
            content=b'{"jsonrpc": "2.0", "id": 1, "method": ',
            headers={"content-type": "application/json", "acp-connection-id": connection},
        )
        assert broken.status_code == 400
        assert broken.json()["error"]["code"] == -32700

        huge = http.post(
            url,
            content=json.dumps({"jsonrpc": "2.0", "method": "x", "params": {"a": "b" * 4096}}),
            headers={"content-type": "application/json", "acp-connection-id": connection},
        )
        assert huge.status_code == 413
        assert huge.json()["error"]["code"] == "body_too_large"

        rebound = _initialize(http, url, host="evil.example:80")
        assert rebound.status_code == 421
        assert rebound.json()["error"]["code"] == "host_not_allowed"

        foreign = _initialize(http, url, origin="http://evil.example")
        assert foreign.status_code == 403
        assert foreign.json()["error"]["code"] == "origin_not_allowed"

        batch = http.post(
            url,
            content=b'[{"jsonrpc": "2.0", "method": "x"}]',
            headers={"content-type": "application/json", "acp-connection-id": connection},
        )
        assert batch.status_code == 501
        assert batch.json()["error"]["code"] == "batch_not_supported"

        plain = http.post(url, content=b"{}", headers={"content-type": "text/plain"})
        assert plain.status_code == 415

        unknown = http.get(url, headers={"accept": "text/event-stream", "acp-connection-id": "x"})
        assert unknown.status_code == 404

        with pytest.raises(InvalidStatus) as refused:
            asyncio.run(
                create_websocket_stream(url.replace("http", "ws"), headers={"Host": "evil"})
            )
        assert refused.value.response.status_code == 421
        assert b"host_not_allowed" in refused.value.response.body

        asyncio.run(bad_frames_on_a_socket(url.replace("http", "ws")))
        asyncio.run(prompt_and_read(url, ws=False))  # and it still serves


def test_a_token_is_needed_off_loopback_and_checked(tmp_path: Path) -> None:
    refused = subprocess.run(
        [sys.executable, "-m", "steerable_bridge.cli", "acp", "--listen", "0.0.0.0:0"],
        capture_output=True,
        text=True,
        timeout=WAIT_S,
        env={**os.environ, "STEERABLE_TOKEN": ""},
    )
    assert refused.returncode == 2
    assert "--token" in refused.stderr

    guarded = server(tmp_path, [HELLO], "--token", "s3cret")
    with guarded as url, httpx.Client(timeout=WAIT_S) as http:
        missing = _initialize(http, url)
        assert missing.status_code == 401
        assert missing.json()["error"]["code"] == "token_required"
        wrong = _initialize(http, url, authorization="Bearer nope")
        assert wrong.status_code == 401
        right = _initialize(http, url, authorization="Bearer s3cret")
        assert right.status_code == 200


async def one_stream_client(url: str) -> None:
    """A client as the RFD's latest revision describes it: one connection-scoped GET stream
    for everything, POSTs answered 202, DELETE ending the connection (and its stream)."""
    async with httpx.AsyncClient(timeout=WAIT_S) as http, asyncio.timeout(WAIT_S):
        init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}
        first = await http.post(url, json=init)
        assert first.status_code == 200
        connection = {"acp-connection-id": first.headers["acp-connection-id"]}
        async with aconnect_sse(http, "GET", url, headers=connection) as events:
            received = events.aiter_sse()
            new = {"cwd": str(Path.cwd()), "mcpServers": []}
            posted = await http.post(
                url,
                json={"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": new},
                headers=connection,
            )
            assert posted.status_code == 202 and posted.content == b""
            session_id = json.loads((await anext(received)).data)["result"]["sessionId"]
            prompt = {"sessionId": session_id, "prompt": [{"type": "text", "text": "hi"}]}
            posted = await http.post(
                url,
                json={"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": prompt},
                headers={**connection, "acp-session-id": session_id},
            )
            assert posted.status_code == 202
            text = ""
            async for event in received:
                message = json.loads(event.data)
                if message.get("id") == 2:
                    assert message["result"]["stopReason"] == "end_turn"
                    break
                update = message["params"]["update"]
                if update["sessionUpdate"] == "agent_message_chunk":
                    text += update["content"]["text"]
            assert text == HELLO["text"]
            ended = await http.delete(url, headers=connection)
            assert ended.status_code == 202
            assert [event async for event in received] == []  # the stream closed
        gone = await http.post(url, json=init | {"id": 3}, headers=connection)
        assert gone.status_code == 200  # a connection id is not needed to start over
        stale = await http.delete(url, headers=connection)
        assert stale.status_code == 404


def test_a_client_with_one_stream_gets_every_message_on_it(tmp_path: Path) -> None:
    with server(tmp_path, [HELLO]) as url:
        asyncio.run(one_stream_client(url))


TOOLS = Path(__file__).with_name("acp_tools.py")
WRITE = {
    "tool_calls": [
        {"id": "w1", "name": "write_note", "arguments": {"path": "n.txt", "text": "far"}}
    ]
}


class Approver(Recorder):
    """A client that allows every tool call once, recording what it was asked."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[str] = []

    async def request_permission(
        self, options: Any, session_id: str, tool_call: Any, **kwargs: Any
    ) -> Any:
        self.asked.append(tool_call.tool_call_id)
        allow = next(o for o in options if o.kind == "allow_once")
        return acp.RequestPermissionResponse(
            outcome=acp.AllowedOutcome(option_id=allow.option_id, outcome="selected")
        )


async def approve_a_write(url: str, workspace: Path, *, ws: bool) -> None:
    approver = Approver()
    if ws:
        transport = await create_websocket_stream(url.replace("http://", "ws://"))
    else:
        transport = create_http_stream(url, client=httpx.AsyncClient(timeout=None))
    conn = connect_to_agent(approver, transport)  # type: ignore[arg-type]
    try:
        async with asyncio.timeout(WAIT_S):
            await conn.initialize(protocol_version=PROTOCOL_VERSION)
            session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
            done = await conn.prompt(session_id=session.session_id, prompt=[text_block("write")])
    finally:
        await conn.close()
    assert done.stop_reason == "end_turn"
    assert approver.asked == ["w1"]
    assert (workspace / "n.txt").read_text() == "far"


@pytest.mark.parametrize("ws", [False, True], ids=["http", "websocket"])
def test_a_permission_request_reaches_the_remote_client_and_its_answer_comes_back(
    tmp_path: Path, ws: bool
) -> None:
    workspace = tmp_path / "work"
    workspace.mkdir()
    with server(tmp_path, [WRITE, {"text": "written"}], "--tools-module", str(TOOLS)) as url:
        asyncio.run(approve_a_write(url, workspace, ws=ws))


def test_the_server_stops_on_sigterm_with_a_stream_still_open(tmp_path: Path) -> None:
    with (
        httpx.Client(timeout=WAIT_S) as http,
        contextlib.ExitStack() as open_streams,
        server(tmp_path, [HELLO]) as url,  # leaving it (first) asserts the server stopped
    ):
        connection = _initialize(http, url).headers["acp-connection-id"]
        stream = http.stream(
            "GET", url, headers={"accept": "text/event-stream", "acp-connection-id": connection}
        )
        assert open_streams.enter_context(stream).status_code == 200
