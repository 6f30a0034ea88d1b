"""The one base for errors that carry a stable code: `CodedError(code, message, remedy)`.

Every layer (runtime, adapters, transports, commands) raises its own subclass, so a catch
site can still tell a store failure from a route failure, while every one of them offers the
same three things: `code`, a stable snake_case token a client or a test can match on;
`message`, the text a user reads, which names the remedy ("... ; do X"); and `remedy`, the
"do X" part when the raiser gave it apart (then `message` ends with it, after "; "). `str()`
of the error is its message. It lives in the runtime because the runtime imports nothing from
the outer layers, and all of them may import the runtime.
"""

from __future__ import annotations

__all__ = ["CodedError"]


class CodedError(Exception):
    """A failure with a stable `code` and a `message` that names the remedy."""

    def __init__(self, code: str, message: str, remedy: str | None = None) -> None:
        text = message if remedy is None else f"{message}; {remedy}"
        super().__init__(text)
        self.code = code
        self.message = text
        self.remedy = remedy
