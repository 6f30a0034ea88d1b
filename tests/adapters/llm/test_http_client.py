"""The pooled client's transport: calls spread over several pools, one connection when calm."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import httpx
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from steerable_bridge.adapters.llm.http_client import (
    HttpSettings,
    PooledClient,
    SpreadTransport,
    tls_context,
)
from tests.prompt_server import PromptServer

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def held_server(
    release: anyio.Event, peers: list[object], expected: int = 0, arrived: anyio.Event | None = None
) -> AsyncIterator[str]:
    """A server on 127.0.0.1 answering each request only once `release` is set; `arrived`
    is set when `expected` requests came in."""
    arrived = arrived or anyio.Event()

    async def hold(request: Request) -> Response:
        peers.append(request.client)
        if len(peers) == expected:
            arrived.set()
        with anyio.fail_after(10):
            await release.wait()
        return Response(b"ok")

    app = Starlette(routes=[Route("/", hold, methods=["GET"])])
    server = PromptServer(
        uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off")
    )
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve)
        with anyio.fail_after(10):
            await server.wait_started()
        port = server.servers[0].sockets[0].getsockname()[1]
        try:
            yield f"http://127.0.0.1:{port}/"
        finally:
            server.should_exit = True


async def test_concurrent_calls_spread_over_the_pools_and_are_released() -> None:
    release, arrived, peers = anyio.Event(), anyio.Event(), []
    pooled = PooledClient(HttpSettings(pool_shards=3))
    client = await pooled.client()
    transport = client._transport
    assert isinstance(transport, SpreadTransport)
    async with held_server(release, peers, 6, arrived) as url:
        async with anyio.create_task_group() as tg:
            for _ in range(6):
                tg.start_soon(client.get, url)
            with anyio.fail_after(10):
                await arrived.wait()
            assert transport.in_flight == [2, 2, 2]
            release.set()
        assert transport.in_flight == [0, 0, 0]
        assert len(set(peers)) == 6  # six calls at once: six connections
        await pooled.aclose()


async def test_calls_one_after_another_keep_one_connection() -> None:
    release, peers = anyio.Event(), []
    release.set()
    pooled = PooledClient(HttpSettings(pool_shards=4))
    async with held_server(release, peers) as url:
        client = await pooled.client()
        for _ in range(5):
            assert (await client.get(url)).content == b"ok"
        async with client.stream("GET", url) as reply:  # a streamed body, read and closed
            assert await reply.aread() == b"ok"
        transport = client._transport
        assert isinstance(transport, SpreadTransport) and transport.in_flight == [0] * 4
        await pooled.aclose()
    assert len(peers) == 6 and len(set(peers)) == 1


async def test_a_failed_call_is_released() -> None:
    pooled = PooledClient(HttpSettings(pool_shards=2, connect_timeout_s=2))
    client = await pooled.client()
    with pytest.raises(httpx.ConnectError):
        await client.get("http://127.0.0.1:9/")  # the discard port: nothing listens
    transport = client._transport
    assert isinstance(transport, SpreadTransport) and transport.in_flight == [0, 0]
    await pooled.aclose()


async def test_every_client_shares_the_one_tls_context() -> None:
    contexts = []
    for settings in (HttpSettings(pool_shards=2), HttpSettings(pool_shards=3)):
        pooled = PooledClient(settings)
        transport = (await pooled.client())._transport
        assert isinstance(transport, SpreadTransport)
        # httpx hands the context to httpcore's pool, which keeps it as `_ssl_context`
        contexts += [pool._pool._ssl_context for pool in transport._pools]
        await pooled.aclose()
    assert len(contexts) == 5 and all(context is tls_context() for context in contexts)
    assert tls_context().verify_mode == ssl.CERT_REQUIRED and tls_context().check_hostname
