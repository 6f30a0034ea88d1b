"""The real processes under fuzz, and the oracle that judges every answer they give.

`AcpTarget` runs `steerable-bridge acp` (demo model, memory storage) behind raw pipes and
`AguiTarget` runs `steerable-bridge serve` on an OS-picked loopback port; both are context
managers that stop what they started. `AcpTarget.send_batch(frames)` writes the frames and
a ping request, reads until the ping is answered (every wait bounded) and returns the
problems found: a line that is not strict JSON (NaN, lone surrogates, invalid UTF-8), a
response with an id JSON-RPC forbids, an internal error (-32603), an answer to an id never
sent, a dead process. `AguiTarget.post(body, headers)` checks one request: never a 5xx,
every error a JSON `{"error": {"code", "message"}}` body, every 200 a stream of strict
JSON events ending in RUN_FINISHED or RUN_ERROR. Shared by tests/fuzz and bench/fuzz.py.
"""

from __future__ import annotations

import json
import math
import os
import selectors
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

from steerable_bridge.transports.acp.frames import MAX_FRAME_BYTES

ACP_CODES = {-32700, -32600, -32601, -32602, -32000, -32002} | set(range(-32019, -32009))
"""Error codes a healthy agent may answer with; -32603 (internal error) is a finding."""

TRACEBACK = "Traceback (most recent call last)"
"""What a logged traceback starts with (fuzzed ids and names may say "Traceback" alone)."""

MAX_DEPTH = 64
"""The agent's nesting bound (steerable_bridge.runtime.encoding.strict_json.MAX_DEPTH)."""

AGUI_STATUSES = {200, 400, 401, 403, 409, 413, 415, 421, 422}


def _refuse(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _answerable_id(value: Any) -> bool:
    if isinstance(value, bool) or value is None:
        return False
    return isinstance(value, str | int) or (isinstance(value, float) and math.isfinite(value))


def depth(value: Any) -> int:
    """Nesting depth of a parsed JSON value (a scalar is 0)."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, level + 1)
            stack.extend(
                (child, level + 1) for child in (item.values() if isinstance(item, dict) else item)
            )
    return deepest


def strict_loads(line: bytes) -> Any:
    """What a strict client parser accepts: UTF-8, no NaN / Infinity, no lone surrogates."""
    text = line.decode("utf-8")
    value = json.loads(text, parse_constant=_refuse)
    json.dumps(value, ensure_ascii=False, allow_nan=False).encode("utf-8")
    return value


def _env(extra: dict[str, str]) -> dict[str, str]:
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith("STEERABLE_")},
        "STEERABLE_DEMO_PACE_MS": "0",
        "STEERABLE_STORAGE": "memory",
        **extra,
    }


class AcpTarget:
    """`steerable-bridge acp` behind raw pipes (see the module docstring)."""

    def __init__(self, *, timeout_s: float = 20.0) -> None:
        self.timeout_s = timeout_s
        self.outstanding: Counter[Any] = Counter()
        self.pings = 0
        self.lines = 0
        self.answers: list[Any] = []
        """Every strict-JSON message read during the last batch, but the ping's answer."""
        self._dir = tempfile.TemporaryDirectory(prefix="acp-fuzz-")
        self.stderr_path = Path(self._dir.name) / "stderr.log"
        self._buffer = b""

    def __enter__(self) -> AcpTarget:
        self._stderr = self.stderr_path.open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "steerable_bridge.cli", "acp"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            cwd=self._dir.name,
            env=_env({}),
        )
        assert self.process.stdout is not None
        os.set_blocking(self.process.stdout.fileno(), False)
        self._selector = selectors.DefaultSelector()
        self._selector.register(self.process.stdout, selectors.EVENT_READ)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=10)
        self._selector.close()
        self._stderr.close()
        self._dir.cleanup()

    def stderr(self) -> str:
        self._stderr.flush()
        return self.stderr_path.read_text(errors="replace")

    def send_batch(self, frames: list[bytes]) -> list[str]:
        """Write `frames`, then a ping; the problems seen until the ping's answer (the
        answers themselves are kept in `answers`)."""
        self.answers = []
        self.pings += 1
        ping = f"ping-{self.pings}"
        payload = bytearray()
        for frame in frames:
            line = frame.replace(b"\n", b" ")
            payload += line + b"\n"
            self._note_sent(line)
        payload += json.dumps({"jsonrpc": "2.0", "id": ping, "method": "_fuzz/ping"}).encode()
        payload += b"\n"
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(bytes(payload))
            self.process.stdin.flush()
        except BrokenPipeError:
            return [f"the agent died (exit {self.process.wait(timeout=10)})"]
        return self._read_until(ping)

    def unanswered(self) -> dict[Any, int]:
        """Requests still unanswered after pinging for up to `timeout_s` (should be none)."""
        deadline = time.monotonic() + self.timeout_s
        while +self.outstanding and time.monotonic() < deadline:
            self.send_batch([])
        return dict(+self.outstanding)

    def _note_sent(self, frame: bytes) -> None:
        """Count a request the agent must answer with its own id (what the gate lets by)."""
        if len(frame) > MAX_FRAME_BYTES:
            return
        try:
            message = json.loads(frame.decode("utf-8"), parse_constant=_refuse)
        except (ValueError, UnicodeError, RecursionError):
            return
        if not (
            isinstance(message, dict)
            and "method" in message
            and _answerable_id(message.get("id"))
            and depth(message) <= MAX_DEPTH
        ):
            return
        self.outstanding[message["id"]] += 1

    def _read_until(self, ping: str) -> list[str]:
        problems: list[str] = []
        deadline = time.monotonic() + self.timeout_s
        while True:
            newline = self._buffer.find(b"\n")
            if newline < 0:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return [*problems, f"no answer to {ping} within {self.timeout_s} s"]
                if not self._selector.select(remaining):
                    continue
                assert self.process.stdout is not None
                chunk = self.process.stdout.read(1 << 20)
                if not chunk:
                    code = self.process.wait(timeout=10)
                    return [*problems, f"the agent died (exit {code})"]
                self._buffer += chunk
                continue
            line, self._buffer = self._buffer[:newline], self._buffer[newline + 1 :]
            self.lines += 1
            problems += self._judge(line)
            if b'"' + ping.encode() + b'"' in line:
                return problems
            try:
                self.answers.append(strict_loads(line))
            except (ValueError, UnicodeError):
                self.answers.append(None)

    def _judge(self, line: bytes) -> list[str]:
        try:
            message = strict_loads(line)
        except (ValueError, UnicodeError) as err:
            return [f"not strict JSON ({err}): {line[:200]!r}"]
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            return [f"not a JSON-RPC message: {line[:200]!r}"]
        if "method" in message:
            return []  # a request or notification of the agent's own
        request_id = message.get("id")
        if isinstance(request_id, bool) or not (
            request_id is None or isinstance(request_id, str | int | float)
        ):
            return [f"an answer with an invalid id: {line[:200]!r}"]
        if isinstance(request_id, float) and not math.isfinite(request_id):
            return [f"an answer with a non-finite id: {line[:200]!r}"]
        problems = []
        if request_id is not None and not str(request_id).startswith("ping-"):
            if self.outstanding[request_id] <= 0:
                problems.append(f"an answer to an id never sent: {line[:200]!r}")
            else:
                self.outstanding[request_id] -= 1
        error = message.get("error")
        if error is not None:
            code = error.get("code") if isinstance(error, dict) else None
            if code not in ACP_CODES:
                problems.append(f"unexpected error code {code}: {line[:300]!r}")
        return problems


class AguiTarget:
    """`steerable-bridge serve` on a loopback port (see the module docstring)."""

    def __init__(self, *, extra_args: tuple[str, ...] = ()) -> None:
        self.extra_args = extra_args
        self._dir = tempfile.TemporaryDirectory(prefix="agui-fuzz-")
        self.stderr_path = Path(self._dir.name) / "stderr.log"
        self.last_error: dict[str, Any] | None = None

    def __enter__(self) -> AguiTarget:
        self._stderr = self.stderr_path.open("wb")
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "steerable_bridge.cli",
                "serve",
                "--port",
                "0",
                "--max-body",
                "65536",
                *self.extra_args,
            ],
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            cwd=self._dir.name,
            env=_env({}),
        )
        assert self.process.stdout is not None
        selector = selectors.DefaultSelector()
        selector.register(self.process.stdout, selectors.EVENT_READ)
        if not selector.select(60):
            raise RuntimeError("the server did not print its address within 60 s")
        selector.close()
        first = self.process.stdout.readline().decode()
        self.url = first.rsplit(" ", 1)[-1].strip()
        # uvicorn's access log goes to stdout: keep reading it, or the server blocks on it
        self._drain = threading.Thread(target=self._drain_stdout, daemon=True)
        self._drain.start()
        self.base = self.url.rsplit("/", 1)[0]
        self.client = httpx.Client(timeout=20.0)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.client.close()
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self._drain.join(timeout=10)
        self._stderr.close()
        self._dir.cleanup()

    def _drain_stdout(self) -> None:
        assert self.process.stdout is not None
        for _line in self.process.stdout:
            pass

    def stderr(self) -> str:
        self._stderr.flush()
        return self.stderr_path.read_text(errors="replace")

    def post(self, body: bytes | Iterable[bytes], headers: dict[str, str]) -> tuple[int, list[str]]:
        """POST `body` to /agent (bytes, or chunks sent without a length): the status and
        the problems seen; an error answer's `error` object is kept in `last_error`."""
        self.last_error = None
        if self.process.poll() is not None:
            return 0, [f"the server died (exit {self.process.returncode})"]
        try:
            with self.client.stream("POST", self.url, content=body, headers=headers) as response:
                raw = b"".join(response.iter_bytes())
        except httpx.HTTPError as err:
            return 0, [f"transport error {type(err).__name__}: {err}"]
        status = response.status_code
        problems = []
        if status not in AGUI_STATUSES:
            problems.append(f"status {status}: {raw[:300]!r}")
        if status == 200:
            problems += _judge_stream(raw)
        else:
            problems += _judge_error(response.headers.get("content-type", ""), raw, status)
            if not problems:
                self.last_error = json.loads(raw)["error"]
        return status, problems


def _judge_error(content_type: str, raw: bytes, status: int) -> list[str]:
    if not content_type.startswith("application/json"):
        return [f"{status} answered as {content_type!r}: {raw[:200]!r}"]
    try:
        body = strict_loads(raw)
    except (ValueError, UnicodeError) as err:
        return [f"{status} body not strict JSON ({err}): {raw[:200]!r}"]
    error = body.get("error") if isinstance(body, dict) else None
    if not (
        isinstance(error, dict)
        and isinstance(error.get("code"), str)
        and isinstance(error.get("message"), str)
    ):
        return [f"{status} body not the error shape: {raw[:200]!r}"]
    return []


def _judge_stream(raw: bytes) -> list[str]:
    events = []
    for block in raw.split(b"\n\n"):
        for line in block.split(b"\n"):
            if line.startswith(b"data:"):
                try:
                    events.append(strict_loads(line[5:].strip()))
                except (ValueError, UnicodeError) as err:
                    return [f"an event that is not strict JSON ({err}): {line[:200]!r}"]
    if not events:
        return ["a 200 stream with no events"]
    last = events[-1].get("type") if isinstance(events[-1], dict) else None
    if last not in ("RUN_FINISHED", "RUN_ERROR"):
        return [f"a stream ending in {last}, not RUN_FINISHED / RUN_ERROR"]
    return []
