"""Interop: the official TypeScript ACP client drives remote ACP over its own transports.

Runs `tests/interop/acp_remote_client.mjs` with node against the real `steerable-bridge acp
--listen 127.0.0.1:0`, once over `@agentclientprotocol/sdk`'s Streamable HTTP client and once
over its WebSocket client. The script validates every message with the SDK's schemas and
checks the streamed reply and cancel; this test checks what it reported. Without node the
test is skipped, loudly (the `node` fixture).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.transports.acp.remote_server import server

HERE = Path(__file__).resolve().parent
REPLY = "hello from far away"
ROUNDS = [{"text": REPLY, "chunk_size": 4}, {"text": "thinking", "hang": True}]


@pytest.mark.slow
@pytest.mark.timeout(90)
@pytest.mark.parametrize("transport", ["http", "ws"])
def test_the_typescript_client_drives_remote_acp(tmp_path: Path, node: str, transport: str) -> None:
    with server(tmp_path, ROUNDS) as url:
        done = subprocess.run(
            [node, "--experimental-websocket", str(HERE / "acp_remote_client.mjs")],
            cwd=HERE,
            env={**os.environ, "ACP_URL": url, "ACP_TRANSPORT": transport},
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["protocolVersion"] == 1
    assert report["loadSession"] is True
    assert report["stopReasons"] == ["end_turn", "cancelled"]
    assert report["reply"] == REPLY
    assert report["chunks"] > 1
    assert report["sessions"] == 1
