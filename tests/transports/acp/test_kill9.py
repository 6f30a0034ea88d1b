"""Commands die with their agent: `steerable-bridge acp` killed with SIGKILL mid-command
leaves nothing running, 50 times out of 50.

Each trial starts a real agent on a scripted model with `--approve all`, asks it to run a
command that starts two `sleep`s in the background and then announces itself through a
FIFO, kills the agent with SIGKILL the moment the announcement arrives, and waits on pidfds
for every process of the command (found by a marker in its command line) to exit. Trials
run several at a time to keep the test short; every wait is bounded. Most trials run
unsandboxed (`--sandbox off`, where `deathwatch.py` is what kills the group); some run in
the bubblewrap sandbox when it works here.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(300),
    pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="needs Linux pidfds"),
]

TRIALS = 50
AT_ONCE = 5
WAIT_S = 30.0


def _sleepers(marker: str) -> list[int]:
    """Every process of the command: its shell, its sleeps (or forks about to become them)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                cmdline = handle.read()
        except OSError:
            continue
        if marker.encode() in cmdline:
            found.append(int(entry))
    return found


def _settled_sleepers(marker: str, at_least: int) -> list[int]:
    """`_sleepers`, read again (within WAIT_S) until `at_least` show: a child caught in the
    middle of its exec can have an empty command line for a moment on a loaded machine."""
    deadline = time.monotonic() + WAIT_S
    found = _sleepers(marker)
    while len(found) < at_least and time.monotonic() < deadline:
        time.sleep(0.01)
        found = _sleepers(marker)
    return found


def _send(process: subprocess.Popen[bytes], message: dict[str, object]) -> None:
    assert process.stdin is not None
    process.stdin.write(json.dumps(message).encode() + b"\n")
    process.stdin.flush()


def _answer(process: subprocess.Popen[bytes], request_id: int) -> dict[str, object]:
    assert process.stdout is not None
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        ready, _, _ = select.select([process.stdout], [], [], deadline - time.monotonic())
        if not ready:
            break
        line = process.stdout.readline()
        if not line:
            break
        message = json.loads(line)
        if message.get("id") == request_id and "method" not in message:
            return message  # type: ignore[no-any-return]
    raise AssertionError(f"no answer to request {request_id}")


def trial(root: Path, number: int, sandbox: str) -> list[int]:
    """One agent killed mid-command; the sleeps still running after the kill (should be [])."""
    home = root / f"trial-{number}"
    workspace = home / "ws"
    workspace.mkdir(parents=True)
    fifo = workspace / "started"
    os.mkfifo(fifo)
    marker = f"3600.{number:04d}{os.getpid() % 10000:04d}"
    command = f"sleep {marker} & sleep {marker} & echo go > started; wait"
    script = {
        "rounds": [
            {
                "tool_calls": [
                    {"id": "c1", "name": "run_command", "arguments": {"command": command}}
                ]
            },
            {"text": "done"},
        ]
    }
    (home / "script.json").write_text(json.dumps(script))
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEERABLE_")}
    announce = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    with (home / "stderr.log").open("wb") as stderr:
        agent = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "steerable_bridge.cli",
                "acp",
                "--model",
                f"scripted:{home / 'script.json'}",
                "--approve",
                "all",
                "--sandbox",
                sandbox,
                "--storage",
                "memory",
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            cwd=home,
            env=env,
        )
    pidfds: list[int] = []
    try:
        _send(
            agent,
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}},
        )
        _send(
            agent,
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "session/new",
                "params": {"cwd": str(workspace), "mcpServers": []},
            },
        )
        created = _answer(agent, 2)
        session = created["result"]["sessionId"]  # type: ignore[index]
        _send(
            agent,
            {
                "jsonrpc": "2.0",
                "id": 3,
                "method": "session/prompt",
                "params": {"sessionId": session, "prompt": [{"type": "text", "text": "go"}]},
            },
        )
        ready, _, _ = select.select([announce], [], [], WAIT_S)
        assert ready, "the command never started: " + (home / "stderr.log").read_text()[-2000:]
        sleepers = _settled_sleepers(marker, at_least=3)  # the shell and two sleeps
        assert len(sleepers) >= 3, sleepers
        pidfds = [os.pidfd_open(pid) for pid in sleepers]
        agent.send_signal(signal.SIGKILL)
        agent.wait(timeout=WAIT_S)
        pending = list(pidfds)
        deadline = time.monotonic() + WAIT_S
        while pending and time.monotonic() < deadline:
            exited, _, _ = select.select(pending, [], [], deadline - time.monotonic())
            pending = [fd for fd in pending if fd not in exited]
        return _sleepers(marker)
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.wait(timeout=WAIT_S)
        for pid in _sleepers(marker):  # leave the machine clean even when the test fails
            os.kill(pid, signal.SIGKILL)
        for fd in [announce, *pidfds]:
            os.close(fd)


def _bwrap_works() -> bool:
    import shutil

    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return False
    done = subprocess.run([bwrap, "--ro-bind", "/", "/", "true"], capture_output=True, check=False)
    return done.returncode == 0


def test_no_command_outlives_an_agent_killed_with_sigkill(tmp_path: Path) -> None:
    sandboxed = 10 if _bwrap_works() else 0
    plan = ["off"] * (TRIALS - sandboxed) + ["auto"] * sandboxed
    with ThreadPoolExecutor(AT_ONCE) as pool:
        survivors = list(pool.map(lambda n: trial(tmp_path, n, plan[n]), range(TRIALS)))
    assert [s for s in survivors if s] == []
    assert len(survivors) == TRIALS
