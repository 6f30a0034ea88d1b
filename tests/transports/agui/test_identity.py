"""One user per identity on a real server (issue 28 §2): JWTs (HS256, and RS256 / ES256 from a
JWKS the test serves on 127.0.0.1) and a trusted proxy's header name the user; every thread
is its creator's, and another user's request for it — run, steer, stop, events, snapshot,
delete — gets the same 404 as a thread that does not exist, on SQLite and across a restart."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from steerable_bridge.adapters.storage.sqlite import SqliteStore
from steerable_bridge.adapters.telemetry.metrics import ServerMetrics
from steerable_bridge.runtime.agent_sessions.conversations import LocalPort
from steerable_bridge.transports.agui.app import create_app
from steerable_bridge.transports.agui.identity import Identity, JwtUsers, ProxyUsers
from tests.runtime.harness import make_agent, scripted
from tests.transports.agui.harness import live_server, run_input, user
from tests.transports.agui.jwt_kit import (
    AUDIENCE,
    ISSUER,
    SECRET,
    bearer,
    es256,
    hs256,
    jwks_server,
    rs256,
    unsigned,
)

pytestmark = pytest.mark.anyio


def _app(path: Path, identity: Identity, **options: Any) -> Any:
    agent = make_agent(scripted({"text": "hello"}, loop=True), store=SqliteStore(path))  # type: ignore[arg-type]
    return create_app(LocalPort(agent), identity=identity, **options)


def _hs256() -> JwtUsers:
    return JwtUsers(secret=SECRET, audience=AUDIENCE, issuer=ISSUER)


async def _cross_user_attempts(
    client: httpx.AsyncClient, thread: str, intruder: dict[str, str]
) -> list[httpx.Response]:
    """Every way another user might reach `thread`."""
    base = [user("x1", "let me in")]
    return [
        await client.post("/agent", json=run_input(thread, "rx", base), headers=intruder),
        await client.post(
            "/agent",
            json=run_input(thread, "rs", base, forwardedProps={"steerable": {"steer": True}}),
            headers=intruder,
        ),
        await client.post(
            "/agent",
            json=run_input(thread, "rt", base, forwardedProps={"steerable": {"stop": True}}),
            headers=intruder,
        ),
        *await _reads(client, thread, intruder),
    ]


async def _reads(
    client: httpx.AsyncClient, thread: str, who: dict[str, str]
) -> list[httpx.Response]:
    return [
        await client.get(f"/agent/threads/{thread}", headers=who),
        await client.get(f"/agent/threads/{thread}/events", headers=who),
        await client.get(f"/agent/threads/{thread}/events", params={"after": "-1"}, headers=who),
        await client.delete(f"/agent/threads/{thread}", headers=who),
    ]


async def _check_isolation(
    client: httpx.AsyncClient, alice: dict[str, str], bob: dict[str, str], threads: int
) -> None:
    for i in range(threads):
        reply = await client.post(
            "/agent", json=run_input(f"a{i}", "r", [user("u", "hi")]), headers=alice
        )
        assert reply.status_code == 200 and b"RUN_FINISHED" in reply.content
    await client.post("/agent", json=run_input("b0", "r", [user("u", "hi")]), headers=bob)
    succeeded = 0
    for i in range(threads):
        for reply in await _cross_user_attempts(client, f"a{i}", bob):
            if reply.status_code != 404:
                succeeded += 1
            else:
                assert reply.json()["error"]["code"] == "thread_not_found"
    assert succeeded == 0
    # exactly what a thread that does not exist answers (reads and deletes; a run creates one)
    missing = await _reads(client, "no-such-thread", bob)
    assert {(r.status_code, r.json()["error"]["code"]) for r in missing} == {
        (404, "thread_not_found")
    }
    listed = (await client.get("/agent/threads", headers=bob)).json()
    assert [t["threadId"] for t in listed["threads"]] == ["b0"]
    mine = (await client.get("/agent/threads", headers=alice)).json()
    assert sorted(t["threadId"] for t in mine["threads"]) == [f"a{i}" for i in range(threads)]
    snap = await client.get("/agent/threads/a0", headers=alice)
    assert snap.status_code == 200 and snap.json()["messages"][0]["content"] == "hi"
    again = await client.post(
        "/agent", json=run_input("a0", "r2", [user("u", "hi"), user("u2", "more")]), headers=alice
    )
    assert again.status_code == 200 and b"RUN_FINISHED" in again.content


async def test_two_hs256_users_never_reach_each_others_threads_even_after_a_restart(
    tmp_path: Path,
) -> None:
    db = tmp_path / "s.db"
    alice, bob = bearer(hs256("alice")), bearer(hs256("bob"))
    async with (
        live_server(_app(db, _hs256())) as url,
        httpx.AsyncClient(base_url=url, timeout=20) as client,
    ):
        await _check_isolation(client, alice, bob, threads=5)
    async with (
        live_server(_app(db, _hs256())) as url,  # a restart: owners come from the store
        httpx.AsyncClient(base_url=url, timeout=20) as client,
    ):
        for reply in await _cross_user_attempts(client, "a1", bob):
            assert reply.status_code == 404
        assert (await client.get("/agent/threads/a1", headers=alice)).status_code == 200
        assert (await client.delete("/agent/threads/a1", headers=alice)).status_code == 204


async def test_rs256_and_es256_users_from_a_jwks(tmp_path: Path) -> None:
    async with jwks_server() as (jwks_url, fetched):
        identity = JwtUsers(jwks_url=jwks_url, audience=AUDIENCE, issuer=ISSUER)
        async with (
            live_server(_app(tmp_path / "s.db", identity)) as url,
            httpx.AsyncClient(base_url=url, timeout=20) as client,
        ):
            await _check_isolation(client, bearer(rs256("alice")), bearer(es256("bob")), 3)
            hs = await client.get("/agent/threads", headers=bearer(hs256("alice")))
            assert hs.status_code == 401 and hs.json()["error"]["code"] == "token_algorithm"
        assert 1 <= len(fetched) <= 2  # the key set is cached, not fetched per request


TOKENS: list[tuple[str, Callable[[], str], str]] = [
    ("expired", lambda: hs256("alice", exp=1000, iat=900), "token_expired"),
    ("wrong audience", lambda: hs256("alice", aud="someone-else"), "token_audience"),
    ("wrong issuer", lambda: hs256("alice", iss="https://evil.test"), "token_issuer"),
    ("alg none", lambda: unsigned("alice"), "token_unsigned"),
    ("not a jwt", lambda: "garbage", "token_invalid"),
    ("other secret", lambda: _other_secret(), "token_invalid"),
]


def _other_secret() -> str:
    import jwt

    from tests.transports.agui.jwt_kit import claims

    return jwt.encode(claims("alice"), b"o" * 40, algorithm="HS256")


async def test_bad_tokens_are_refused_with_the_reason(tmp_path: Path) -> None:
    async with (
        live_server(_app(tmp_path / "s.db", _hs256())) as url,
        httpx.AsyncClient(base_url=url, timeout=20) as client,
    ):
        for name, token, code in TOKENS:
            for reply in (
                await client.get("/agent/threads", headers=bearer(token())),
                await client.post(
                    "/agent", json=run_input("t", "r", [user("u", "hi")]), headers=bearer(token())
                ),
            ):
                assert reply.status_code == 401, name
                assert reply.json()["error"]["code"] == code, name
                assert reply.headers["www-authenticate"] == "Bearer"
        none = await client.get("/agent/threads")
        assert none.status_code == 401 and none.json()["error"]["code"] == "token_missing"


async def test_metrics_have_their_own_token(tmp_path: Path) -> None:
    app = _app(tmp_path / "s.db", _hs256(), metrics=ServerMetrics(), metrics_token="m" * 20)
    async with live_server(app) as url, httpx.AsyncClient(base_url=url, timeout=20) as client:
        assert (await client.get("/metrics", headers=bearer("m" * 20))).status_code == 200
        assert (await client.get("/metrics", headers=bearer(hs256("alice")))).status_code == 401
        assert (await client.get("/metrics")).status_code == 401


async def test_a_proxy_header_is_believed_only_from_the_trusted_proxy(tmp_path: Path) -> None:
    trusted = _app(tmp_path / "a.db", ProxyUsers("X-Forwarded-User", ["127.0.0.1/32"]))
    async with live_server(trusted) as url, httpx.AsyncClient(base_url=url, timeout=20) as client:
        await _check_isolation(
            client, {"X-Forwarded-User": "alice"}, {"X-Forwarded-User": "bob"}, threads=2
        )
        nobody = await client.get("/agent/threads")
        assert nobody.status_code == 401 and nobody.json()["error"]["code"] == "user_missing"
    elsewhere = _app(tmp_path / "b.db", ProxyUsers("X-Forwarded-User", ["10.0.0.0/8"]))
    async with (
        live_server(elsewhere) as url,
        httpx.AsyncClient(base_url=url, timeout=20) as client,
    ):
        spoofed = await client.get("/agent/threads", headers={"X-Forwarded-User": "alice"})
        assert spoofed.status_code == 401
        assert spoofed.json()["error"]["code"] == "untrusted_proxy"
