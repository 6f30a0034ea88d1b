"""`serve --auth jwt` as users deploy it (issue 28 §2): two `serve` processes on one real
PostgreSQL, users named by HS256 JWTs. A thread is its creator's on both servers — the
other user's runs, steers, stops, reads, event streams and deletes get 404 on either, the
owner reaches it through the other server — and a bad token is refused with its reason."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from tests.transports.agui.jwt_kit import AUDIENCE, ISSUER, SECRET, bearer, hs256, unsigned

from .serve_child import frames, run_cli, started

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]


def _body(thread: str, run: str, text: str, **steerable: bool) -> dict[str, object]:
    return {
        "threadId": thread,
        "runId": run,
        "protocolVersion": "1.0",
        "messages": [{"id": f"{run}-u", "role": "user", "content": text}],
        "forwardedProps": {"steerable": steerable} if steerable else {},
    }


def _attempts(client: httpx.Client, thread: str, who: dict[str, str]) -> list[httpx.Response]:
    return [
        client.post("/agent", json=_body(thread, "x1", "mine now"), headers=who),
        client.post("/agent", json=_body(thread, "x2", "psst", steer=True), headers=who),
        client.post("/agent", json=_body(thread, "x3", "halt", stop=True), headers=who),
        client.get(f"/agent/threads/{thread}", headers=who),
        client.get(f"/agent/threads/{thread}/events", params={"after": "-1"}, headers=who),
        client.delete(f"/agent/threads/{thread}", headers=who),
    ]


def test_two_servers_on_postgresql_keep_each_users_threads_their_own(
    pg_url: str, tmp_path: Path
) -> None:
    secret = tmp_path / "secret"
    secret.write_bytes(SECRET + b"\n")
    script = tmp_path / "model.json"
    rounds = [{"text": "hello there", "chunk_size": 1, "delay_ms": 20}]
    script.write_text(json.dumps({"rounds": rounds, "loop": True}))
    args = [
        "--model",
        f"scripted:{script}",
        "--auth",
        "jwt",
        "--jwt-secret-file",
        str(secret),
        "--jwt-audience",
        AUDIENCE,
        "--jwt-issuer",
        ISSUER,
    ]
    alice, bob = bearer(hs256("alice")), bearer(hs256("bob"))
    with (
        started(args, storage=pg_url) as (one, _),
        started(args, storage=pg_url) as (two, _),
        httpx.Client(base_url=one, timeout=30) as first,
        httpx.Client(base_url=two, timeout=30) as second,
    ):
        threads = [f"pg-{i}" for i in range(4)]
        for i, thread in enumerate(threads):
            server = first if i % 2 == 0 else second
            reply = server.post("/agent", json=_body(thread, "r1", "hi"), headers=alice)
            assert frames(reply.text)[-1]["type"] == "RUN_FINISHED"
        succeeded = sum(
            reply.status_code != 404
            for thread in threads
            for server in (first, second)
            for reply in _attempts(server, thread, bob)
        )
        assert succeeded == 0
        for thread in threads:  # the owner, through either server
            for server in (first, second):
                snap = server.get(f"/agent/threads/{thread}", headers=alice)
                assert snap.status_code == 200 and snap.json()["messages"][0]["content"] == "hi"
        assert second.get("/agent/threads", headers=bob).json()["threads"] == []
        listed = first.get("/agent/threads", headers=alice).json()["threads"]
        assert sorted(t["threadId"] for t in listed) == threads
        again = second.post(
            "/agent",
            json={
                **_body("pg-0", "r2", "more"),
                "messages": [
                    {"id": "r1-u", "role": "user", "content": "hi"},
                    {"id": "r2-u", "role": "user", "content": "more"},
                ],
            },
            headers=alice,
        )
        assert frames(again.text)[-1]["type"] == "RUN_FINISHED"
        for token, code in (
            (unsigned("alice"), "token_unsigned"),
            (hs256("alice", exp=1000, iat=900), "token_expired"),
            (hs256("alice", aud="elsewhere"), "token_audience"),
        ):
            refused = first.get("/agent/threads", headers=bearer(token))
            assert refused.status_code == 401 and refused.json()["error"]["code"] == code
        assert second.delete("/agent/threads/pg-1", headers=alice).status_code == 204
        assert first.get("/agent/threads/pg-1", headers=alice).status_code == 404
        _resume_on_the_other_server(first, second, alice)


def _resume_on_the_other_server(
    first: httpx.Client, second: httpx.Client, alice: dict[str, str]
) -> None:
    """A run streaming from one server, resumed mid-run through the other: the two parts
    make the whole stream, byte for byte."""
    body = {**_body("pg-live", "r1", "go"), "forwardedProps": {"steerable": {"resumable": True}}}
    with first.stream("POST", "/agent", json=body, headers=alice) as stream:
        chunks = stream.iter_raw()
        seen = b""
        for chunk in chunks:
            seen += chunk
            if seen.count(b"TEXT_MESSAGE_CONTENT") >= 2 and seen.endswith(b"\n\n"):
                break
        last = [line for line in seen.split(b"\n") if line.startswith(b"id: ")][-1][4:]
        rest = second.get(
            "/agent/threads/pg-live/events",
            headers={**alice, "Last-Event-ID": last.decode()},
        )
        assert rest.status_code == 200
        whole = seen + b"".join(chunks)
    assert b"RUN_FINISHED" in rest.content
    assert seen + rest.content == whole


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--auth", "jwt"], "--jwt-secret-file F or --jwks-url URL"),
        (["--auth", "header", "--user-header", "X-User"], "--trusted-proxy CIDR"),
        (["--auth", "header", "--user-header", "X-User", "--trusted-proxy", "nope"], "nope"),
        (["--auth", "jwt", "--jwks-url", "http://127.0.0.1:1/j", "--token", "t"], "--token"),
    ],
)
def test_a_wrong_combination_of_auth_options_is_refused_before_serving(
    args: list[str], says: str
) -> None:
    done = run_cli("serve", "--port", "0", "--storage", "memory", *args)
    assert done.returncode != 0 and says in done.stderr
