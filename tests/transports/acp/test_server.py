"""The stdio server byte by byte: malformed frames get answers, stdout holds only JSON-RPC.

These tests talk to `steerable-bridge acp` through raw pipes (no SDK), because the SDK
client would hide exactly what is checked here: frames that are not JSON, not objects, or
not JSON-RPC, methods the SDK has no route for, and what the process writes to stdout.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]


class Raw:
    def __init__(self, process: Process) -> None:
        assert process.stdin is not None and process.stdout is not None
        self.process = process
        self.stdout = BufferedByteReceiveStream(process.stdout)
        self.lines: list[bytes] = []

    async def send(self, frame: Any) -> None:
        data = frame if isinstance(frame, bytes) else json.dumps(frame).encode()
        assert self.process.stdin is not None
        await self.process.stdin.send(data + b"\n")

    async def read(self) -> dict[str, Any]:
        with anyio.fail_after(10):
            line = await self.stdout.receive_until(b"\n", 10_000_000)
        self.lines.append(line)
        message: dict[str, Any] = json.loads(line)
        return message

    async def answer(self, request_id: Any) -> dict[str, Any]:
        while True:
            message = await self.read()
            if message.get("id") == request_id and "method" not in message:
                return message


async def _spawn(tmp_path: Path) -> Process:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("STEERABLE_")},
        "STEERABLE_DEMO_PACE_MS": "0",
        "STEERABLE_STORAGE": "memory",
        "STEERABLE_LOG": "debug",
    }
    return await anyio.open_process(
        [sys.executable, "-m", "steerable_bridge.cli", "acp"],
        env=env,
        cwd=tmp_path,
        stderr=(tmp_path / "stderr.log").open("wb"),
    )


async def test_malformed_frames_are_answered_and_the_process_keeps_serving(
    tmp_path: Path,
) -> None:
    async with await _spawn(tmp_path) as process:
        raw = Raw(process)
        await raw.send(b"this is not json")
        parse = await raw.read()
        await raw.send([{"jsonrpc": "2.0", "id": 1, "method": "initialize"}])
        batch = await raw.read()
        await raw.send(42)
        scalar = await raw.read()
        await raw.send({"id": 2, "method": "initialize", "params": {"protocolVersion": 1}})
        no_version = await raw.read()
        await raw.send({"jsonrpc": "2.0", "id": 3, "method": "session/new", "params": {}})
        bad_params = await raw.answer(3)
        await raw.send({"jsonrpc": "2.0", "id": 4, "method": "no/such", "params": {}})
        unknown = await raw.answer(4)
        await raw.send({"jsonrpc": "2.0", "id": 5, "method": "session/prompt", "params": None})
        null_params = await raw.answer(5)
        await raw.send({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"id": 77}})
        await raw.send(
            {"jsonrpc": "2.0", "id": 6, "method": "initialize", "params": {"protocolVersion": 1}}
        )
        ok = await raw.answer(6)
        await process.stdin.aclose()  # type: ignore[union-attr]
        with anyio.fail_after(10):
            code = await process.wait()
    assert (parse["id"], parse["error"]["code"]) == (None, -32700)
    assert batch["error"]["code"] == scalar["error"]["code"] == -32600
    assert "batches are not supported" in batch["error"]["message"]
    assert no_version["id"] == 2 and no_version["error"]["code"] == -32600
    assert bad_params["error"]["code"] == -32602
    assert unknown["error"]["code"] == -32601
    assert null_params["error"]["code"] == -32602
    assert ok["result"]["protocolVersion"] == 1
    assert code == 0
    stderr = (tmp_path / "stderr.log").read_text()
    assert "Traceback" not in stderr
    assert "answered a frame that is not JSON" in stderr  # logs go to stderr, not stdout


async def test_stdout_carries_only_json_rpc_even_through_a_whole_turn(tmp_path: Path) -> None:
    async with await _spawn(tmp_path) as process:
        raw = Raw(process)
        await raw.send(
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}
        )
        await raw.answer(1)
        await raw.send(
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "session/new",
                "params": {"cwd": str(tmp_path), "mcpServers": []},
            }
        )
        session_id = (await raw.answer(2))["result"]["sessionId"]
        prompt = [{"type": "text", "text": "think, then use a tool"}]
        await raw.send(
            {
                "jsonrpc": "2.0",
                "id": 3,
                "method": "session/prompt",
                "params": {"sessionId": session_id, "prompt": prompt},
            }
        )
        while True:
            message = await raw.read()
            if message.get("method") == "session/request_permission":
                await raw.send(
                    {
                        "jsonrpc": "2.0",
                        "id": message["id"],
                        "result": {"outcome": {"outcome": "selected", "optionId": "allow_once"}},
                    }
                )
            if message.get("id") == 3 and "method" not in message:
                break
        await process.stdin.aclose()  # type: ignore[union-attr]
        with anyio.fail_after(10):
            await process.wait()
        rest = b""
        with anyio.fail_after(5):
            try:
                while True:
                    rest += await raw.stdout.receive()
            except (anyio.EndOfStream, anyio.IncompleteRead):
                pass
    assert message["result"]["stopReason"] == "end_turn"
    assert len(raw.lines) > 5
    for line in [*raw.lines, *rest.splitlines()]:
        frame = json.loads(line)
        assert frame["jsonrpc"] == "2.0"


async def test_stray_prints_and_child_output_never_reach_stdout(tmp_path: Path) -> None:
    from tests.transports.acp.harness import TOOLS_MODULE, write_script

    script = write_script(
        tmp_path,
        [{"tool_calls": [{"id": "n1", "name": "noisy", "arguments": {}}]}, {"text": "ok"}],
    )
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("STEERABLE_")},
        "STEERABLE_STORAGE": "memory",
    }
    command = [sys.executable, "-m", "steerable_bridge.cli", "acp", "--model", f"scripted:{script}"]
    async with await anyio.open_process(
        [*command, "--tools-module", TOOLS_MODULE],
        env=env,
        cwd=tmp_path,
        stderr=(tmp_path / "stderr.log").open("wb"),
    ) as process:
        raw = Raw(process)
        await raw.send(
            {"jsonrpc": "2.0", "id": 1, "method": "session/new",
             "params": {"cwd": str(tmp_path), "mcpServers": []}}
        )  # fmt: skip
        session_id = (await raw.answer(1))["result"]["sessionId"]
        prompt = [{"type": "text", "text": "make noise"}]
        await raw.send(
            {"jsonrpc": "2.0", "id": 2, "method": "session/prompt",
             "params": {"sessionId": session_id, "prompt": prompt}}
        )  # fmt: skip
        answer = await raw.answer(2)
        await process.stdin.aclose()  # type: ignore[union-attr]
        with anyio.fail_after(10):
            await process.wait()
    assert answer["result"]["stopReason"] == "end_turn"
    assert all(json.loads(line)["jsonrpc"] == "2.0" for line in raw.lines)
    stderr = (tmp_path / "stderr.log").read_text()
    assert "stray print from a tool" in stderr
    assert "stray output from a child process" in stderr


async def test_requests_read_before_stdin_closes_are_still_answered(tmp_path: Path) -> None:
    frames = tmp_path / "frames.jsonl"
    frames.write_text(
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                    "params": {"protocolVersion": 1}}) + "\n"
    )  # fmt: skip
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("STEERABLE_")},
        "STEERABLE_STORAGE": "memory",
    }
    with frames.open("rb") as stdin, (tmp_path / "out.jsonl").open("wb") as stdout:
        done = await anyio.run_process(
            [sys.executable, "-m", "steerable_bridge.cli", "acp"],
            stdin=stdin,
            stdout=stdout,
            env=env,
            check=False,
        )
    [line] = (tmp_path / "out.jsonl").read_text().splitlines()
    assert done.returncode == 0
    assert json.loads(line)["result"]["protocolVersion"] == 1
