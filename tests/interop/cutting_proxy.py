"""A TCP proxy on 127.0.0.1 that drops the first `POST /agent` stream partway through.

The chat page test points a browser at it to see the page lose a running answer's connection
for real (the socket closes in the middle of the chunked SSE body) and resume it through the
events route. Every other request passes untouched, and only one stream is ever cut. Each
connection's two pumps run in the proxy's task group, which `cutting_proxy` cancels on exit;
every read is bounded by the test's own timeout.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

import anyio
from anyio.abc import SocketStream

__all__ = ["cutting_proxy"]

CUT_AFTER = 4096
"""Response bytes of the `POST /agent` stream let through before the cut."""


@dataclass
class _Cut:
    done: bool = False


async def _pipe(
    source: SocketStream, sink: SocketStream, cut: _Cut, posting: list[bool], upstream: bool
) -> None:
    sent = 0
    with contextlib.suppress(
        anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError
    ):
        while True:
            data = await source.receive(65536)
            if upstream:
                if b"POST /agent " in data:
                    posting[0] = True
                elif data[:4] in (b"GET ", b"DELE"):
                    posting[0] = False
            elif posting[0] and not cut.done:
                sent += len(data)
                if sent > CUT_AFTER:
                    cut.done = True
                    await sink.send(data[: CUT_AFTER // 2])
                    break
            await sink.send(data)
    await source.aclose()
    await sink.aclose()


@contextlib.asynccontextmanager
async def cutting_proxy(target: str) -> AsyncIterator[str]:
    """Listen on a free port, forward to `target` (http://127.0.0.1:PORT); yields its URL."""
    host, port = target.removeprefix("http://").split(":")
    cut = _Cut()
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)

    async def serve(client: SocketStream) -> None:
        server = await anyio.connect_tcp(host, int(port))
        posting = [False]
        async with anyio.create_task_group() as pumps:
            pumps.start_soon(_pipe, client, server, cut, posting, True)
            pumps.start_soon(_pipe, server, client, cut, posting, False)

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(listener.serve, serve)
        bound = listener.extra(anyio.abc.SocketAttribute.local_port)
        try:
            yield f"http://127.0.0.1:{bound}"
        finally:
            tasks.cancel_scope.cancel()
