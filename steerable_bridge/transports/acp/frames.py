"""The gate every ACP frame passes before the SDK's connection sees it.

`check_frame(line)` turns one stdin line into either a JSON-RPC message the SDK can route
safely or a `FrameRefusal` (the error to answer, and the id to answer it with). It never raises.
JSON is parsed strictly (`runtime/encoding/strict_json.py`: UTF-8 only, bounded depth, no NaN /
Infinity, no lone surrogates — except in a response, which answers one of our requests and is
routed with U+FFFD in their place, logged; a request holding one is refused with its own id);
then the message's shape is checked per JSON-RPC 2.0: ids are
strings, numbers or null (never booleans, arrays or objects — the SDK hashes response ids
unchecked), `method` is a string, `params` an object or array (null reads as absent), a
response carries exactly one of `result` / `error` and an error is `{code: int, message:
str}`. A refusal that could
not read the frame's id carries `id: null`, as JSON-RPC requires, and so does a broken response
(its id names one of the agent's own requests). Used by `server.py`.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass
from typing import Any

from steerable_bridge.runtime.encoding.strict_json import JsonRefused, loads_strict, scrub, writable

__all__ = ["MAX_FRAME_BYTES", "FrameRefusal", "check_frame", "frame_too_large", "valid_id"]

log = logging.getLogger("steerable_bridge.acp")

MAX_FRAME_BYTES = 32 * 1024 * 1024
"""Largest frame read; a longer line is discarded up to its newline and refused."""


@dataclass(frozen=True, slots=True)
class FrameRefusal:
    """A frame answered with a JSON-RPC error instead of being routed."""

    id: str | int | float | None
    code: int
    message: str
    reason: str
    """Stable code in the error's `data.code`."""

    def answer(self) -> dict[str, Any]:
        error = {"code": self.code, "message": self.message, "data": {"code": self.reason}}
        return {"jsonrpc": "2.0", "id": self.id, "error": error}


def valid_id(value: Any) -> bool:
    """JSON-RPC 2.0 ids: a string, a finite number or null — not a boolean."""
    if value is None or isinstance(value, str):
        return True
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, float) and math.isfinite(value)


def frame_too_large(size: int) -> FrameRefusal:
    return FrameRefusal(
        None,
        -32600,
        f"invalid request: the frame is {size} bytes, over the limit of {MAX_FRAME_BYTES}"
        " bytes; send smaller messages (attach large content as resource links)",
        "frame_too_large",
    )


def check_frame(line: bytes) -> dict[str, Any] | FrameRefusal:
    """The message in `line`, or the refusal to answer it with (see the module docstring)."""
    try:
        message = loads_strict(line)
    except JsonRefused as err:
        if err.code == "lone_surrogate":
            return _lone_surrogate(line, err)
        if err.code != "out_of_range":
            return FrameRefusal(
                None,
                -32700,
                f"parse error: {err.message}; send one JSON-RPC object per line",
                err.code,
            )
        # Valid JSON with a number no double holds: read it again with that number as a
        # marker, so the frame is judged like any other and a request gets invalid params.
        message = json.loads(line.decode("utf-8"), parse_float=_float_or_overflow)
        problem = _shape_problem(message)
        if problem is None and "method" in message:
            return FrameRefusal(
                message.get("id"), -32602, f"invalid params: {err.message}", err.code
            )
        return _invalid(message, problem or f"invalid request: a response with {err.message}")
    problem = _shape_problem(message)
    if problem is None:
        return message  # type: ignore[no-any-return]
    return _invalid(message, problem)


def _lone_surrogate(line: bytes, err: JsonRefused) -> dict[str, Any] | FrameRefusal:
    """A frame that is valid JSON but holds a lone UTF-16 surrogate. A response answers a
    request of ours (a file's text, a terminal's output): refusing it would lose the answer,
    so it is routed with U+FFFD in place of each surrogate. A request is refused with its own
    id, so its sender gets the error instead of waiting for an answer."""
    message = json.loads(line.decode("utf-8"), parse_float=_float_or_overflow)
    problem = _shape_problem(message)
    if problem is not None:
        return _invalid(message, problem)
    if "method" not in message:
        repaired: dict[str, Any] = scrub(message)
        if writable(repaired):
            log.warning(
                "the client's answer to request %r held lone UTF-16 surrogates; each was"
                " replaced with U+FFFD",
                message.get("id"),
            )
            return repaired
        return _invalid(message, f"invalid request: a response with {err.message}")
    request_id = message.get("id")
    return FrameRefusal(request_id, -32602, f"invalid params: {err.message}", err.code)


def _invalid(message: Any, problem: str) -> FrameRefusal:
    # Only a request's own id is echoed: a broken response's id names a request of ours.
    is_request = isinstance(message, dict) and "method" in message
    request_id = message.get("id") if is_request else None
    return FrameRefusal(
        request_id if valid_id(request_id) else None, -32600, problem, "invalid_request"
    )


class _Overflow:
    """Where a number no double holds stood: never a valid id, method or params."""


def _float_or_overflow(text: str) -> float | _Overflow:
    value = float(text)
    return value if math.isfinite(value) else _Overflow()


def _shape_problem(message: Any) -> str | None:
    if isinstance(message, list):
        return "invalid request: JSON-RPC batches are not supported; send one object per line"
    if not isinstance(message, dict):
        return "invalid request: a frame must be a JSON-RPC object"
    if message.get("jsonrpc") != "2.0":
        return 'invalid request: "jsonrpc" must be "2.0"'
    if "id" in message and not valid_id(message["id"]):
        return 'invalid request: "id" must be a string, a number or null'
    if "method" in message:
        if not isinstance(message["method"], str):
            return 'invalid request: "method" must be a string'
        if message.get("params") is not None and not isinstance(message["params"], dict | list):
            return 'invalid request: "params" must be an object or an array'
        return None
    if "id" not in message or ("result" in message) == ("error" in message):
        return (
            'invalid request: a frame needs "method" (a request) or "id" with exactly one of'
            ' "result" / "error" (a response)'
        )
    error = message.get("error")
    if "error" in message and not (
        isinstance(error, dict)
        and isinstance(error.get("code"), int)
        and not isinstance(error.get("code"), bool)
        and isinstance(error.get("message"), str)
    ):
        return 'invalid request: a response "error" must be {"code": integer, "message": string}'
    return None
