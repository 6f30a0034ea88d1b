"""`steerable-bridge serve` as a user runs it: a child process on port 0 that prints its URLs,
answers /health and the chat page, and streams a run; bad options exit 2 with the remedy."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import httpx
import pytest

COMMAND = [sys.executable, "-m", "steerable_bridge.cli", "serve"]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEERABLE_")}
    return {**env, "STEERABLE_DEMO_PACE_MS": "0"}


@pytest.mark.timeout(60)
def test_serve_prints_its_url_and_streams_a_run() -> None:
    process = subprocess.Popen(
        [*COMMAND, "--port", "0", "--storage", "memory"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=_env(),
        text=True,
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        assert first.startswith("steerable-bridge: AG-UI endpoint POST http://127.0.0.1:")
        endpoint = first.split()[-1]
        base = endpoint.removesuffix("/agent")
        assert base.rsplit(":", 1)[1] != "0"
        with httpx.Client(base_url=base, timeout=10) as client:
            for _ in range(200):  # bound before the line is printed, listening a moment later
                try:
                    health = client.get("/health")
                    break
                except httpx.TransportError:
                    time.sleep(0.05)
            assert health.json()["status"] == "ok"
            assert "<textarea" in client.get("/").text
            body = {
                "threadId": "cli-thread",
                "runId": "r1",
                "messages": [{"id": "u1", "role": "user", "content": "use a tool"}],
            }
            reply = client.post("/agent", json=body)
        frames = [json.loads(b[6:]) for b in reply.text.split("\n\n") if b.startswith("data: ")]
        kinds = [f["type"] for f in frames]
        assert kinds[0] == "RUN_STARTED" and kinds[-1] == "RUN_FINISHED"
        assert "TOOL_CALL_RESULT" in kinds
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.mark.parametrize(
    ("args", "message"),
    [(["--max-body", "0"], "--max-body"), (["--port", "70000"], "--port")],
)
def test_bad_options_exit_2_naming_the_option(args: list[str], message: str) -> None:
    done = subprocess.run(
        [*COMMAND, *args, "--storage", "memory"],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=30,
        check=False,
    )
    assert done.returncode == 2 and message in done.stderr


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.1"])
def test_a_non_loopback_bind_without_a_token_refuses_to_start(host: str) -> None:
    env = {k: v for k, v in _env().items() if k != "STEERABLE_TOKEN"}
    done = subprocess.run(
        [*COMMAND, "--host", host, "--port", "0", "--storage", "memory"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 2
    assert "--token" in done.stderr and "--insecure-no-token" in done.stderr
    assert done.stdout == ""  # never bound, never printed a URL


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_health_names_nothing_without_the_configured_token() -> None:
    process = subprocess.Popen(
        [*COMMAND, "--port", "0", "--storage", "memory", "--token", "s3cret"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=_env(),
        text=True,
    )
    try:
        assert process.stdout is not None
        base = process.stdout.readline().split()[-1].removesuffix("/agent")
        with httpx.Client(base_url=base, timeout=10) as client:
            for _ in range(200):  # bound before the line is printed, listening a moment later
                try:
                    anonymous = client.get("/health")
                    break
                except httpx.TransportError:
                    time.sleep(0.05)
            detailed = client.get("/health", headers={"Authorization": "Bearer s3cret"})
        assert anonymous.status_code == 200 and anonymous.text == "ok"
        assert detailed.json()["model"] and "tools" in detailed.json()
    finally:
        process.terminate()
        process.wait(timeout=10)
