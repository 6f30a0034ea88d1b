"""`PromptServer`: uvicorn's `Server` for the suite's in-process test servers, which notices
`should_exit` within milliseconds.

uvicorn's main loop looks at `should_exit` once every 0.1 s, and every test server paid up to
that at its end: the fast lane starts about a hundred of them. This loop looks every
`POLL_S` and does the same work per look (`on_tick`: the date header, the exit checks).
"""

from __future__ import annotations

import asyncio

import uvicorn

__all__ = ["POLL_S", "PromptServer"]

POLL_S = 0.005
"""How often the server looks at `should_exit` (uvicorn's own loop: every 0.1 s)."""


class PromptServer(uvicorn.Server):
    """A `uvicorn.Server` whose main loop stops within `POLL_S` of `should_exit` being set."""

    async def main_loop(self) -> None:
        ticks = 0
        while not await self.on_tick(ticks):
            await asyncio.sleep(POLL_S)
            ticks = (ticks + 1) % 864_000
