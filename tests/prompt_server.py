"""`PromptServer`: uvicorn's `Server` for the suite's in-process test servers, which stops
within milliseconds of being told to.

uvicorn's main loop looks at `should_exit` once every 0.1 s, and its shutdown pauses 0.1 s
for open connections to wind down; every test server paid both at its end, and the fast lane
starts about a hundred of them. This main loop looks every `POLL_S`, doing the same work per
look (`on_tick`: the date header, the exit checks); a shutdown with no connection and no task
left closes the listening sockets and ends at once, and any other is uvicorn's own. A test
awaits `wait_started()` rather than polling uvicorn's `started` flag (a 10 ms poll per
server start was another ~10 ms each).
"""

from __future__ import annotations

import asyncio
import socket
import threading

import uvicorn

__all__ = ["POLL_S", "PromptServer"]

POLL_S = 0.005
"""How often the server looks at `should_exit` (uvicorn's own loop: every 0.1 s)."""


class PromptServer(uvicorn.Server):
    """A `uvicorn.Server` that stops within `POLL_S` of `should_exit` being set, and says
    when it has started (`wait_started`)."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self._settled = asyncio.Event()
        """Set once start-up has listened (or `serve` ended without listening)."""
        self._settled_here = threading.Event()
        """The same, for a thread that started the server in another (`start_in_thread`)."""

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        try:
            await super().serve(sockets=sockets)
        finally:
            self._settled.set()
            self._settled_here.set()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started:
            self._settled.set()
            self._settled_here.set()

    async def wait_started(self) -> None:
        """Return once the server listens; `RuntimeError` if `serve` ended first (uvicorn
        logged why). Bound it with the caller's own `fail_after`."""
        await self._settled.wait()
        if not self.started:
            raise RuntimeError(
                "the test server stopped before it listened (uvicorn's log says why)"
            )

    def start_in_thread(
        self, sockets: list[socket.socket] | None = None, *, timeout_s: float = 10.0
    ) -> threading.Thread:
        """Run the server on a daemon thread of its own and return once it listens (within
        `timeout_s`, a safety bound on start-up; `RuntimeError` if it stopped first)."""
        thread = threading.Thread(target=self.run, kwargs={"sockets": sockets}, daemon=True)
        thread.start()
        if not self._settled_here.wait(timeout_s) or not self.started:
            raise RuntimeError("the test server did not start (uvicorn's log says why)")
        return thread

    async def main_loop(self) -> None:
        ticks = 0
        while not await self.on_tick(ticks):
            await asyncio.sleep(POLL_S)
            ticks = (ticks + 1) % 864_000

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        if self.server_state.connections or self.server_state.tasks:
            await super().shutdown(sockets=sockets)  # something to wind down: uvicorn's way
            return
        for server in self.servers:
            server.close()
        for sock in sockets or []:
            sock.close()
        for server in self.servers:
            await server.wait_closed()
        await self.lifespan.shutdown()
