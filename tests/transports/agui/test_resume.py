"""Reconnecting to a thread's stream on a real server (issue 28 §1): every frame has an id,
and `GET /agent/threads/{id}/events` after any id sends the rest of the original stream,
byte for byte, whether the run is still going or has ended."""

from __future__ import annotations

import random
import re
from typing import Any

import anyio
import httpx
import pytest

from steerable_bridge.runtime.agent_sessions.conversations import LocalPort
from steerable_bridge.transports.agui.app import create_app
from tests.lanes import examples
from tests.runtime.harness import scripted
from tests.transports.agui.decoding import frames
from tests.transports.agui.harness import agent_for, live_server, run_input, user

pytestmark = pytest.mark.anyio

KEEPALIVE = re.compile(rb"^: [^\n]*\n\n", re.MULTILINE)
ID = re.compile(rb"^id: ([^\n]+)\n", re.MULTILINE)
SEED = 28
TRIALS = examples(200)  # a fixed, seeded share in the fast lane (tests/lanes.py)


def _round() -> dict[str, Any]:
    # reasoning (two frames for one log event), text one char at a time, slow enough that
    # a follower is killed while the run is live
    return {"reasoning": "think", "text": "y" * 80, "chunk_size": 1, "delay_ms": 2}


def _clean(body: bytes) -> bytes:
    return KEEPALIVE.sub(b"", body)


def _complete(body: bytes) -> tuple[bytes, str | None]:
    """The complete frames of a cut stream, and the id of the last of them."""
    body = _clean(body)
    end = body.rfind(b"\n\n")
    whole = body[: end + 2] if end >= 0 else b""
    ids = ID.findall(whole)
    return whole, ids[-1].decode() if ids else None


def _resumable(thread: str, run: str, text: str) -> dict[str, Any]:
    return run_input(
        thread, run, [user(f"u-{run}", text)], forwardedProps={"steerable": {"resumable": True}}
    )


async def _follow(
    client: httpx.AsyncClient, thread: str, rng: random.Random, final: anyio.Event
) -> tuple[bytes, int]:
    """Follow the thread's stream, killing the connection after a random number of bytes
    and reconnecting with Last-Event-ID, until the run's end has come; the frames received
    and the number of kills."""
    got = b""
    last: str | None = None
    kills = 0
    while True:
        headers = {"Last-Event-ID": last} if last is not None else {}
        cut = rng.randint(1, 4000)
        after_the_run = final.is_set()
        body = b""
        async with client.stream(
            "GET", f"/agent/threads/{thread}/events", headers=headers, params={"after": "-1"}
        ) as response:
            assert response.status_code == 200, await response.aread()
            async for chunk in response.aiter_raw():
                body += chunk
                if len(body) >= cut:
                    break
            else:
                cut = -1  # read to its end
        whole, last_id = _complete(body)
        got += whole
        if last_id is not None:
            last = last_id
        if cut == -1:
            if after_the_run:  # read to its end after the run had ended: all of it is in
                return got, kills
        else:
            kills += 1


async def test_a_stream_killed_at_random_and_resumed_equals_the_unbroken_one() -> None:
    rng = random.Random(SEED)
    app = create_app(LocalPort(agent_for(scripted(_round(), loop=True))), keepalive_s=0.01)
    kills = 0
    runs = 0
    async with live_server(app) as url, httpx.AsyncClient(base_url=url, timeout=20) as client:
        with anyio.fail_after(240):
            while kills < TRIALS:
                thread = f"t{runs}"
                final = anyio.Event()
                unbroken: list[bytes] = []

                async def run(
                    thread: str = thread,
                    final: anyio.Event = final,
                    unbroken: list[bytes] = unbroken,
                ) -> None:
                    reply = await client.post("/agent", json=_resumable(thread, "r1", "go"))
                    unbroken.append(reply.content)
                    final.set()

                # a first run so the resumed stream spans two runs and the held messages
                await client.post("/agent", json=_resumable(thread, "r0", "first"))
                async with anyio.create_task_group() as tg:
                    tg.start_soon(run)
                    followed, killed = await _follow(client, thread, rng, final)
                runs += 1
                kills += killed
                first = (await client.get(f"/agent/threads/{thread}/events?after=-1")).content
                assert followed.endswith(_clean(unbroken[0]))  # the live run, byte for byte
                ids = [i.decode() for i in ID.findall(followed)]
                assert len(ids) == len(set(ids))  # 0 duplicated
                assert _clean(first) == followed  # 0 lost: the whole thread, once each
    assert kills >= TRIALS


async def test_a_reconnect_after_the_run_ended_replays_the_rest_and_ends() -> None:
    rng = random.Random(SEED)
    app = create_app(LocalPort(agent_for(scripted(_round(), loop=True))))
    async with live_server(app) as url, httpx.AsyncClient(base_url=url, timeout=20) as client:
        body = _resumable("t", "r1", "hi")
        body["messages"].insert(0, user("earlier", "logged before the run, sent after its start"))
        original = _clean((await client.post("/agent", json=body)).content)
        assert frames(original)[1]["type"] == "CUSTOM"  # the earlier message, held
        assert frames(original)[1]["value"]["kind"] == "user_message"
        ids = [i.decode() for i in ID.findall(original)]
        assert any("." in i for i in ids)  # an event with several frames has sub-ids
        blocks = original.split(b"\n\n")[:-1]
        for _ in range(50):
            k = rng.randrange(len(blocks))
            with anyio.fail_after(10):
                rest = await client.get(
                    "/agent/threads/t/events", headers={"Last-Event-ID": ids[k]}
                )
            assert rest.status_code == 200
            assert b"".join(b + b"\n\n" for b in blocks[: k + 1]) + rest.content == original
        # a 0.0.x client's replay keeps the outcomes it accepts; a bad id is refused
        legacy = await client.get(
            "/agent/threads/t/events", params={"after": "-1", "protocol": "0"}
        )
        assert frames(legacy.content)[-1]["type"] == "RUN_FINISHED"
        bad = await client.get("/agent/threads/t/events", headers={"Last-Event-ID": "x"})
        assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_event_id"
        missing = await client.get("/agent/threads/nope/events")
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "thread_not_found"


async def test_the_snapshot_list_and_delete_of_a_thread() -> None:
    app = create_app(LocalPort(agent_for(scripted({"text": "hello"}, loop=True))))
    async with live_server(app) as url, httpx.AsyncClient(base_url=url, timeout=20) as client:
        streamed = frames(
            (await client.post("/agent", json=run_input("a", "r", [user("u", "hi")]))).content
        )
        await client.post("/agent", json=run_input("b", "r", [user("u", "yo")]))
        listed = (await client.get("/agent/threads", params={"limit": 1})).json()
        assert [t["threadId"] for t in listed["threads"]] == ["b"]  # newest first
        rest = (await client.get("/agent/threads", params={"cursor": listed["nextCursor"]})).json()
        assert [t["threadId"] for t in rest["threads"]] == ["a"] and rest["nextCursor"] is None
        assert rest["threads"][0]["running"] is False
        snap = (await client.get("/agent/threads/a")).json()
        sent = next(f for f in streamed if f["type"] == "MESSAGES_SNAPSHOT")
        assert snap["type"] == "MESSAGES_SNAPSHOT" and snap["messages"] == sent["messages"]
        assert snap["interrupts"] == [] and snap["running"] is False
        assert snap["lastEventId"] == frames_last_id(
            (await client.get("/agent/threads/a/events")).content
        )
        assert (await client.delete("/agent/threads/a")).status_code == 204
        assert (await client.get("/agent/threads/a")).status_code == 404
        assert (await client.delete("/agent/threads/a")).status_code == 404
        caps = (await client.get("/agent/capabilities")).json()
        assert caps["transport"]["resumable"] is True
        assert caps["humanInTheLoop"]["interrupts"] is True
        assert caps["custom"]["steerable"]["steering"] is True


def frames_last_id(body: bytes) -> str:
    return ID.findall(body)[-1].decode()
