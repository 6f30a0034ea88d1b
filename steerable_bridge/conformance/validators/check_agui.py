"""`check agui URL`: POST one run to any AG-UI endpoint and grade the stream it sends back.

`check_agui_endpoint(url)` POSTs a RunAgentInput (a default one, or a given one) with httpx,
reads the response with a real SSE parser (`httpx-sse`), decodes each `data:` payload as a
JSON object and runs the conformance suite's AG-UI rules (`check_agui_stream`, each finding
named by its rule id) over the events as they arrived. The raw bytes are kept exactly as
received — a recording transport sits under the client — and `record=PATH` writes them out,
so a failing stream can be replayed or attached to a bug report. HTTP-level problems the
rules cannot see (status, content type, payloads that are not JSON, a stream that never
ends) become checks of their own. `CouldNotRun` means nothing could be checked: the
endpoint is unreachable, wants a token, or answered the POST with an error status.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import anyio
import httpx
from ag_ui.core import RunAgentInput
from httpx_sse import SSEError, aconnect_sse
from pydantic import ValidationError

from steerable_bridge.conformance.agui_rules import check_agui_stream
from steerable_bridge.conformance.validators.report import (
    Check,
    CouldNotRun,
    Report,
    checks_from_findings,
)

__all__ = ["CouldNotRun", "check_agui_endpoint", "default_run_input", "load_run_input"]

DEFAULT_PROMPT = "Say hello in one short sentence."


def default_run_input() -> dict[str, Any]:
    """A minimal valid RunAgentInput: one user message, fresh thread and run ids."""
    tag = secrets.token_hex(4)
    return {
        "threadId": f"steerable-check-{tag}",
        "runId": f"steerable-check-run-{tag}",
        "messages": [
            {"id": f"steerable-check-msg-{tag}", "role": "user", "content": DEFAULT_PROMPT}
        ],
        "state": {},
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }


def load_run_input(path: str | Path) -> dict[str, Any]:
    """Read a RunAgentInput JSON file; `CouldNotRun` names what is wrong with it."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        RunAgentInput.model_validate(data)
    except OSError as err:
        raise CouldNotRun(f"cannot read --input {path}: {err}") from None
    except (ValueError, ValidationError) as err:
        raise CouldNotRun(f"--input {path} is not a RunAgentInput: {str(err)[:300]}") from None
    if not isinstance(data, dict):
        raise CouldNotRun(f"--input {path} must hold a JSON object")
    return data


class _RecordingStream(httpx.AsyncByteStream):
    """Passes a response body through unchanged, keeping a copy of every byte."""

    def __init__(self, inner: httpx.AsyncByteStream, sink: bytearray) -> None:
        self._inner = inner
        self._sink = sink

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._inner:
            self._sink.extend(chunk)
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


class _RecordingTransport(httpx.AsyncBaseTransport):
    """An httpx transport that records the raw response body of every request it sends."""

    def __init__(self, inner: httpx.AsyncBaseTransport, sink: bytearray) -> None:
        self._inner = inner
        self._sink = sink

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self._inner.handle_async_request(request)
        assert isinstance(response.stream, httpx.AsyncByteStream)
        return httpx.Response(
            status_code=response.status_code,
            headers=response.headers,
            stream=_RecordingStream(response.stream, self._sink),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._inner.aclose()


async def check_agui_endpoint(
    url: str,
    *,
    run_input: Mapping[str, Any] | None = None,
    token: str | None = None,
    record: str | Path | None = None,
    within: float = 60.0,
    transport: httpx.AsyncBaseTransport | None = None,
) -> Report:
    """POST one run to `url`, grade the stream, return the report (see module docstring).

    `within` bounds the whole exchange in seconds; `transport` replaces the network (tests).
    """
    body = dict(run_input) if run_input is not None else default_run_input()
    raw = bytearray()
    events: list[dict[str, Any]] = []
    checks: list[Check] = []
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    recording = _RecordingTransport(transport or httpx.AsyncHTTPTransport(), raw)
    try:
        async with httpx.AsyncClient(transport=recording, timeout=httpx.Timeout(within)) as client:
            with anyio.fail_after(within):
                await _read_stream(client, url, body, headers, events, checks)
    except TimeoutError:
        checks.append(
            Check(
                "agui.stream.complete",
                "fail",
                f"the stream did not end within {within:g} s ({len(events)} events so far)",
            )
        )
    except (httpx.RemoteProtocolError, httpx.ReadError) as err:
        checks.append(
            Check("agui.stream.complete", "fail", f"the connection broke mid-stream: {err}")
        )
    except (httpx.ConnectError, httpx.UnsupportedProtocol, httpx.InvalidURL) as err:
        raise CouldNotRun(f"cannot reach {url}: {err}; is the server running?") from None
    finally:
        if record is not None:
            target = anyio.Path(record)
            await target.parent.mkdir(parents=True, exist_ok=True)
            await target.write_bytes(bytes(raw))
    if not any(c.id == "agui.stream.complete" for c in checks):
        checks.append(
            Check("agui.stream.complete", "pass", f"the stream ended after {len(raw)} bytes")
        )
    if events:
        checks.extend(
            checks_from_findings(
                check_agui_stream(events, run_input=body),
                clean_id="agui.rules",
                clean_evidence=f"{len(events)} events keep every AG-UI stream rule",
            )
        )
    else:
        checks.append(Check("agui.rules", "fail", "the stream carried no events to check"))
    return Report("agui-endpoint-check", url, tuple(checks))


def _agent_url(url: str) -> str:
    """`url` with its path replaced by `/agent`, where `steerable-bridge serve` takes runs."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/agent", "", ""))


async def _read_stream(
    client: httpx.AsyncClient,
    url: str,
    body: dict[str, Any],
    headers: dict[str, str],
    events: list[dict[str, Any]],
    checks: list[Check],
) -> None:
    async with aconnect_sse(client, "POST", url, json=body, headers=headers) as source:
        response = source.response
        if response.status_code in (401, 403):
            raise CouldNotRun(
                f"HTTP {response.status_code} from {url}: the endpoint wants credentials;"
                " pass --token T"
            )
        if response.status_code in (404, 405) and not url.rstrip("/").endswith("/agent"):
            await response.aread()
            raise CouldNotRun(
                f"HTTP {response.status_code} from {url}: this URL takes no AG-UI runs (is it"
                f" the chat page?); point the check at the endpoint, e.g. {_agent_url(url)}"
            )
        if not 200 <= response.status_code < 300:
            text = (await response.aread()).decode("utf-8", errors="replace")
            raise CouldNotRun(
                f"HTTP {response.status_code} from {url}: {text[:300]}; check the URL and the input"
            )
        content_type = response.headers.get("content-type", "")
        is_sse = content_type.partition(";")[0].strip() == "text/event-stream"
        checks.append(
            Check(
                "agui.http.content_type",
                "pass" if is_sse else "fail",
                f"HTTP {response.status_code}, Content-Type {content_type!r}"
                + ("" if is_sse else " (must be text/event-stream)"),
            )
        )
        if not is_sse:
            await response.aread()
            return
        not_json: list[str] = []
        try:
            async for sse in source.aiter_sse():
                if not sse.data:
                    continue
                try:
                    event = json.loads(sse.data)
                except ValueError:
                    not_json.append(f"event {len(events) + len(not_json)}: {sse.data[:60]!r}")
                    continue
                if isinstance(event, dict):
                    events.append(event)
                else:
                    not_json.append(f"event {len(events) + len(not_json)}: not an object")
        except SSEError as err:
            not_json.append(str(err))
        checks.append(
            Check(
                "agui.sse.json",
                "fail" if not_json else "pass",
                "; ".join(not_json[:3])
                if not_json
                else f"{len(events)} SSE data payloads, each one JSON object",
            )
        )
