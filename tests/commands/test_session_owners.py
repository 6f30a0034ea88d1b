"""`sessions claim`: threads from the single-user era (no owner stored) become one user's.

A SQLite store written by a single-user `serve` (no `--auth`) is then served with
`--auth jwt`: before the claim nobody sees the old threads; after
`sessions claim --owner alice --all-unowned` alice lists, opens and continues them and bob
still gets 404; a session another user owns is never taken, an unknown id is reported, and
the command line refuses IDs together with --all-unowned.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from steerable_bridge.adapters.storage.sqlite import SqliteStore
from steerable_bridge.cli import main
from steerable_bridge.runtime.agent_sessions.conversations import LocalPort
from steerable_bridge.transports.agui.app import create_app
from steerable_bridge.transports.agui.identity import Identity, JwtUsers
from tests.runtime.harness import make_agent, scripted
from tests.transports.agui.harness import live_server, run_input, user
from tests.transports.agui.jwt_kit import AUDIENCE, ISSUER, SECRET, bearer, hs256

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


def _app(path: Path, identity: Identity | None = None) -> Any:
    agent = make_agent(scripted({"text": "hello"}, loop=True), store=SqliteStore(path))  # type: ignore[arg-type]
    return create_app(LocalPort(agent), identity=identity)


async def _claim(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = await anyio.to_thread.run_sync(main, ["sessions", "claim", *args])
    out, err = capsys.readouterr()
    return code, out, err


async def test_claimed_legacy_threads_are_the_owners_and_only_hers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "s.db"
    async with (
        live_server(_app(db)) as url,  # the single-user era: no owner is stored
        httpx.AsyncClient(base_url=url, timeout=20) as client,
    ):
        for thread in ("old-1", "old-2"):
            reply = await client.post("/agent", json=run_input(thread, "r", [user("u", "hi")]))
            assert reply.status_code == 200 and b"RUN_FINISHED" in reply.content
    alice, bob = bearer(hs256("alice")), bearer(hs256("bob"))
    jwt = JwtUsers(secret=SECRET, audience=AUDIENCE, issuer=ISSUER)
    async with (
        live_server(_app(db, jwt)) as url,
        httpx.AsyncClient(base_url=url, timeout=20) as client,
    ):
        await client.post("/agent", json=run_input("bobs", "r", [user("u", "yo")]), headers=bob)
        invisible = await client.get("/agent/threads/old-1", headers=alice)
        assert invisible.status_code == 404  # what the operator is fixing
        assert (await client.get("/agent/threads", headers=alice)).json()["threads"] == []

        code, out, err = await _claim(
            capsys, "--storage", str(db), "--owner", "alice", "--all-unowned"
        )
        assert code == 0, err
        assert sorted(out.splitlines()) == [
            "old-1: now owned by alice",
            "old-2: now owned by alice",
        ]
        assert "2 claimed for alice" in err

        # the running server sees it at once: alice's now, still not bob's
        listed = (await client.get("/agent/threads", headers=alice)).json()["threads"]
        assert sorted(t["threadId"] for t in listed) == ["old-1", "old-2"]
        snap = await client.get("/agent/threads/old-1", headers=alice)
        assert snap.status_code == 200 and snap.json()["messages"][0]["content"] == "hi"
        history = snap.json()["messages"]
        more = await client.post(
            "/agent",
            json=run_input("old-1", "r2", [*history, user("u2", "more")]),
            headers=alice,
        )
        assert more.status_code == 200 and b"RUN_FINISHED" in more.content
        for path in ("/agent/threads/old-1", "/agent/threads/old-2/events"):
            refused = await client.get(path, headers=bob)
            assert refused.status_code == 404
            assert refused.json()["error"]["code"] == "thread_not_found"
        bobs = (await client.get("/agent/threads", headers=bob)).json()["threads"]
        assert [t["threadId"] for t in bobs] == ["bobs"]

    # bob's thread is never taken; an unknown id is reported; alice's stay hers
    code, out, err = await _claim(
        capsys, "--storage", str(db), "--owner", "carol", "bobs", "old-1", "nope", "--json"
    )
    assert code == 1
    assert json.loads(out) == {
        "owner": "carol",
        "claimed": [],
        "kept": [],
        "refused": [
            {"session_id": "bobs", "code": "owned_by_another_user"},
            {"session_id": "old-1", "code": "owned_by_another_user"},
            {"session_id": "nope", "code": "session_not_found"},
        ],
    }
    code, out, err = await _claim(capsys, "--storage", str(db), "--owner", "alice", "old-2")
    assert code == 0 and out == "old-2: already owned by alice\n"
    code, out, err = await _claim(capsys, "--storage", str(db), "--owner", "alice", "--all-unowned")
    assert code == 0 and out == "" and "no session is stored without an owner" in err
    store = SqliteStore(db)
    try:
        owners = {r.session_id: r.user for r in (await store.list()).records}
    finally:
        store.close()
    assert owners == {"old-1": "alice", "old-2": "alice", "bobs": "bob"}


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--owner", "alice"], "name the sessions to claim"),
        (["--owner", "alice", "--all-unowned", "s1"], "not both or neither"),
        (["--owner", " ", "--all-unowned"], "--owner must name a user"),
    ],
)
async def test_a_claim_without_a_clear_target_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], says: str
) -> None:
    code, _, err = await _claim(capsys, "--storage", str(tmp_path / "s.db"), *args)
    assert code == 2 and says in err
