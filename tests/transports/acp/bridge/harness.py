"""`steerable-bridge serve --acp-agent "<python> -m steerable_bridge acp --model scripted:..."`
as a user runs it: our own agent as the child, a script for its model, AG-UI over HTTP.

`bridged(tmp, rounds, ...)` writes the script, starts serve on 127.0.0.1 port 0 and yields a
`Bridge` with the endpoint; `Bridge.run(body)` posts a RunAgentInput and returns its events;
`Bridge.stream(body)` yields them as they arrive (leave the loop to disconnect). The server
is stopped after the block (its child goes with it).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

SERVE = [sys.executable, "-m", "steerable_bridge", "serve"]


def env() -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("STEERABLE_")}
    return {**clean, "STEERABLE_DEMO_PACE_MS": "0"}


def child_command(script: Path, *, storage: str = "memory") -> str:
    return shlex.join(
        [
            sys.executable, "-m", "steerable_bridge", "acp",
            "--model", f"scripted:{script}", "--approve", "ask", "--storage", storage,
        ]
    )  # fmt: skip


def run_input(thread: str, run: str, text: str | None = None, **extra: Any) -> dict[str, Any]:
    messages = [{"id": f"u-{run}", "role": "user", "content": text}] if text else []
    return {
        "threadId": thread,
        "runId": run,
        "state": {},
        "messages": messages,
        "tools": [],
        "context": [],
        "forwardedProps": {},
        "protocolVersion": "1.0",
        **extra,
    }


def resume(call_id: str, *, approved: bool, stop: bool = False) -> list[dict[str, Any]]:
    payload: dict[str, Any] = {"approved": approved}
    if stop:
        payload["stop"] = True
    return [{"interruptId": f"approval-{call_id}", "status": "resolved", "payload": payload}]


def kinds(events: Sequence[dict[str, Any]]) -> list[str]:
    return [e["name"] if e["type"] == "CUSTOM" else e["type"] for e in events]


def text_of(events: Sequence[dict[str, Any]]) -> str:
    return "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")


def last(events: Sequence[dict[str, Any]], kind: str) -> dict[str, Any]:
    return next(e for e in reversed(events) if e["type"] == kind)


@dataclass
class Bridge:
    url: str
    process: subprocess.Popen[str]
    client: httpx.Client

    def run(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        return list(self.stream(body))

    def stream(self, body: dict[str, Any]) -> Iterator[dict[str, Any]]:
        with self.client.stream("POST", self.url, json=body) as reply:
            assert reply.status_code == 200, reply.read()
            for line in reply.iter_lines():
                if line.startswith("data: "):
                    yield json.loads(line[6:])

    def child_pid(self) -> int:
        """The pid of the ACP agent the server runs (its one child beside the deathwatch)."""
        path = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children")
        children = [pid for pid in path.read_text().split() if not _is_deathwatch(pid)]
        assert len(children) == 1, children
        return int(children[0])


def _is_deathwatch(pid: str) -> bool:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except FileNotFoundError:  # gone since the list was read
        return True
    return b"steerable-deathwatch" in argv


def write_script(folder: Path, rounds: list[dict[str, Any]], *, loop: bool = False) -> Path:
    script = folder / "script.json"
    script.write_text(json.dumps({"rounds": rounds, "loop": loop}), encoding="utf-8")
    return script


@contextmanager
def serving(
    args: Sequence[str], command: str, *, environ: dict[str, str] | None = None
) -> Iterator[Bridge]:
    process = subprocess.Popen(
        [*SERVE, "--port", "0", *args, "--acp-agent", command],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={**env(), **(environ or {})},
        text=True,
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        assert first.startswith("steerable-bridge: AG-UI endpoint POST http://"), first
        url = first.split()[-1]
        with httpx.Client(timeout=httpx.Timeout(60)) as client:
            for _ in range(400):  # bound before the line is printed, listening a moment later
                try:
                    client.get(url.removesuffix("/agent") + "/health")
                    break
                except httpx.TransportError:
                    time.sleep(0.05)
            yield Bridge(url=url, process=process, client=client)
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


@contextmanager
def bridged(
    folder: Path,
    rounds: list[dict[str, Any]],
    *,
    loop: bool = False,
    workspace: Path | None = None,
) -> Iterator[Bridge]:
    command = child_command(write_script(folder, rounds, loop=loop))
    args = ["--storage", "memory"]
    if workspace is not None:
        args += ["--workspace", str(workspace)]
    with serving(args, command) as bridge:
        yield bridge
