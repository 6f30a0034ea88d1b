"""The lazy front of the ACP agent: answers `initialize` before the runtime is loaded.

An editor starts the agent and waits for its `initialize` answer; everything else (the
runtime, storage, tools, `AcpAgent`) costs several times the SDK's own import. So the SDK
connection is given this front instead: `initialize` is answered from the default model's
`ModelInfo` alone (`capabilities.py`), then the real agent is built in the background
(`build()`), and every other method waits for it and delegates. If building fails (a
storage path that cannot be opened, say), the reason is logged and every later request is
answered with that error and its remedy instead of the process dying mid-handshake. A
store failure a method did not answer itself (`storage_full`) is answered with its code.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from acp import RequestError
from acp import schema as acp

from steerable_bridge.runtime.ports.model import ModelInfo
from steerable_bridge.transports.acp import errors
from steerable_bridge.transports.acp.capabilities import initialize_response

__all__ = ["LazyAcpAgent"]

log = logging.getLogger("steerable_bridge.acp")

WARM_UP_DELAY_S = 0.01
"""Pause before building, so the `initialize` answer is written before the CPU-bound build."""


class LazyAcpAgent:
    """Routes the SDK's calls to an `AcpAgent` built on first need (see the module docstring)."""

    def __init__(
        self,
        build: Callable[[], Any],
        *,
        info: ModelInfo | None,
        model: str,
        workspaces: bool,
        spawn: Callable[[Callable[[], Awaitable[None]]], None],
    ) -> None:
        self._build = build
        self._info = info
        self._model = model
        self._workspaces = workspaces
        self._spawn = spawn
        self._conn: Any = None
        self._initialize: dict[str, Any] | None = None
        self._real: Any = None
        self._failure: RequestError | None = None
        self._lock: anyio.Lock | None = None

    @property
    def built(self) -> Any:
        """The real `AcpAgent`, or None before it is built."""
        return self._real

    def on_connect(self, conn: Any) -> None:
        self._conn = conn

    async def real(self) -> Any:
        """The real agent, built (and told about `initialize`) on first call."""
        if self._real is not None:
            return self._real
        if self._failure is not None:
            raise self._failure
        if self._lock is None:
            self._lock = anyio.Lock()
        async with self._lock:
            if self._real is None and self._failure is None:
                try:
                    real = self._build()
                except Exception as error:  # a configuration problem: report it on every call
                    message = getattr(error, "message", None) or str(error)
                    log.error("steerable-bridge could not start its agent: %s", message)
                    self._failure = errors.startup_failed(message)
                    raise self._failure from None
                real.on_connect(self._conn)
                if self._initialize is not None:
                    await real.initialize(**self._initialize)
                self._real = real
        if self._failure is not None:
            raise self._failure
        return self._real

    async def _call(self, method: str, kwargs: dict[str, Any]) -> Any:
        """Delegate to the real agent; a store failure it did not answer itself (a full
        disk, say) becomes that error's code and remedy instead of "Internal error"."""
        real = await self.real()
        try:
            return await getattr(real, method)(**kwargs)
        except RequestError:
            raise
        except Exception as error:
            from steerable_bridge.runtime.ports.storage import StoreError  # loaded by now

            if isinstance(error, StoreError):
                log.warning("%s: the session store failed: %s", method, error.message)
                raise errors.store_failed(error.code, error.message) from None
            raise

    async def _warm_up(self) -> None:
        await anyio.sleep(WARM_UP_DELAY_S)
        with contextlib.suppress(RequestError):  # logged; every request will answer with it
            await self.real()

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: acp.ClientCapabilities | None = None,
        client_info: acp.Implementation | None = None,
        **kwargs: Any,
    ) -> acp.InitializeResponse:
        if self._real is not None:
            response: acp.InitializeResponse = await self._real.initialize(
                protocol_version, client_capabilities, client_info, **kwargs
            )
            return response
        self._initialize = {
            "protocol_version": protocol_version,
            "client_capabilities": client_capabilities,
            "client_info": client_info,
            **kwargs,
        }
        self._spawn(self._warm_up)
        return initialize_response(
            self._info, self._model, workspaces=self._workspaces, client=client_capabilities
        )

    async def authenticate(self, **kwargs: Any) -> Any:
        return await self._call("authenticate", kwargs)

    async def new_session(self, **kwargs: Any) -> Any:
        return await self._call("new_session", kwargs)

    async def load_session(self, **kwargs: Any) -> Any:
        return await self._call("load_session", kwargs)

    async def resume_session(self, **kwargs: Any) -> Any:
        return await self._call("resume_session", kwargs)

    async def fork_session(self, **kwargs: Any) -> Any:
        return await self._call("fork_session", kwargs)

    async def list_sessions(self, **kwargs: Any) -> Any:
        return await self._call("list_sessions", kwargs)

    async def close_session(self, **kwargs: Any) -> Any:
        return await self._call("close_session", kwargs)

    async def set_session_mode(self, **kwargs: Any) -> Any:
        return await self._call("set_session_mode", kwargs)

    async def set_config_option(self, **kwargs: Any) -> Any:
        return await self._call("set_config_option", kwargs)

    async def prompt(self, **kwargs: Any) -> Any:
        return await self._call("prompt", kwargs)

    async def cancel(self, **kwargs: Any) -> None:
        if self._real is not None:  # nothing can be running before the agent exists
            await self._real.cancel(**kwargs)

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = await (await self.real()).ext_method(method, params)
        return result

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        if self._real is not None:
            await self._real.ext_notification(method, params)
