"""One cancellation token per turn, shared by the loop, the provider call and every tool.

`CancelToken.cancel()` is what a transport calls on `session/cancel`, on a client that
disconnects, or on `session/close`. Code that waits on something cancellable does it inside
`with token.scope():`; the token cancels every open scope at once, and a scope opened after
the token fired is cancelled on entry. The loop then checks `token.cancelled` and closes the
turn with stop reason `cancelled`. No task is spawned: cancelling is a synchronous call on
the event loop's thread.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import anyio

__all__ = ["CancelToken"]


class CancelToken:
    """A one-shot cancel signal; `reason` says who cancelled (for logs and errors)."""

    __slots__ = ("_scopes", "reason")

    def __init__(self) -> None:
        self._scopes: set[anyio.CancelScope] = set()
        self.reason: str | None = None

    @property
    def cancelled(self) -> bool:
        return self.reason is not None

    def cancel(self, reason: str = "cancelled by the client") -> None:
        """Cancel every open scope now; later scopes are cancelled on entry. Idempotent."""
        if self.reason is None:
            self.reason = reason
        for scope in list(self._scopes):
            scope.cancel()

    @contextmanager
    def scope(self) -> Iterator[anyio.CancelScope]:
        """A cancel scope tied to this token; leaves quietly when the token fires."""
        cs = anyio.CancelScope()
        if self.reason is not None:
            cs.cancel()
        self._scopes.add(cs)
        try:
            with cs:
                yield cs
        finally:
            self._scopes.discard(cs)
