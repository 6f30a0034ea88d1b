"""Reading the JSON body of `POST /agent`: `read_json(request, max_body)`, never a 500.

The rules, in order: the content type must be `application/json` (415 — a browser sends
`text/plain` cross-site without a CORS preflight, so accepting it would let any page run
the agent); a `Content-Length` must be a number (400); a body over `max_body` bytes gets
413, declared or not, and the rest of it is read and dropped (up to `DRAIN_BYTES`, within
`DRAIN_S`) before the answer, so the client sees the 413 instead of a connection reset; the
body must be strict JSON (`runtime/encoding/strict_json.py`: UTF-8, at most `MAX_DEPTH` deep, no
NaN / Infinity, no lone surrogates), else 422. Each refusal is a `BodyError` carrying its
status, stable code and a message naming the remedy; `app.py` renders it.
"""

from __future__ import annotations

from typing import Any

import anyio
from starlette.requests import ClientDisconnect, Request

from steerable_bridge.runtime.encoding.strict_json import JsonRefused, loads_strict
from steerable_bridge.runtime.errors import CodedError

__all__ = ["DRAIN_BYTES", "DRAIN_S", "BodyError", "read_json"]

DRAIN_BYTES = 16 * 1024 * 1024
"""At most this much of an over-limit body is read and dropped before answering 413."""

DRAIN_S = 5.0
"""At most this long is spent draining an over-limit body."""


class BodyError(CodedError):
    """A body refused before it reached the agent."""

    def __init__(self, status: int, code: str, message: str, **extra: Any) -> None:
        super().__init__(code, message)
        self.status = status
        self.extra = extra


def _json_content_type(value: str) -> bool:
    media = value.split(";", 1)[0].strip().lower()
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )


async def read_json(request: Request, max_body: int) -> Any:
    """The body of `request` as strict JSON, or `BodyError` (see the module docstring)."""
    if not _json_content_type(request.headers.get("content-type", "")):
        raise BodyError(
            415,
            "unsupported_media_type",
            "send the RunAgentInput as 'Content-Type: application/json'",
        )
    declared = request.headers.get("content-length")
    if declared is not None and not declared.strip().isdigit():
        raise BodyError(400, "invalid_content_length", "Content-Length must be a number of bytes")
    too_big = BodyError(
        413,
        "body_too_large",
        f"the request body is over {max_body} bytes; send less history or start the server"
        " with a larger --max-body",
    )
    if declared is not None and int(declared) > max_body:
        await _drain(request, int(declared))
        raise too_big
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > max_body:
            await _drain(request, None)
            raise too_big
        chunks.append(chunk)
    try:
        return loads_strict(b"".join(chunks))
    except JsonRefused as err:
        raise BodyError(
            422, "invalid_json", f"the body is not usable JSON: {err.message}", reason=err.code
        ) from None


async def _drain(request: Request, declared: int | None) -> None:
    """Read and drop the rest of the body, so the answer is not lost to a reset."""
    if declared is not None and declared > DRAIN_BYTES:
        return  # too much to read: the server closes the connection after answering
    dropped = 0
    with anyio.move_on_after(DRAIN_S):
        try:
            async for chunk in request.stream():
                dropped += len(chunk)
                if dropped > DRAIN_BYTES:
                    return
        except (RuntimeError, ClientDisconnect):  # already read to its end, or client gone
            return
