"""The web rules of `serve`: no other web page can drive the agent, no body can 500 it.

Each rule is checked through the app as `serve` builds it (`allowed_hosts` set): a
cross-site `text/plain` POST, a foreign `Origin`, a foreign `Host` (DNS rebinding), and
bodies that used to 500 or be silently changed (lone surrogates, deep nesting, NaN).
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from steerable_bridge.runtime.agent_sessions.conversations import LocalPort
from steerable_bridge.transports.agui.app import create_app
from steerable_bridge.transports.agui.guard import exposure_problem
from tests.transports.agui.harness import agent_for, asgi_client, run_input, session_of, user

pytestmark = pytest.mark.anyio

BASE = "http://127.0.0.1:8000"
JSON_TYPE = {"content-type": "application/json"}
BODY = run_input("t1", "r1", [user("u1", "hello")])


def _app(**options: Any) -> Any:
    return create_app(LocalPort(agent_for()), allowed_hosts=("127.0.0.1",), **options)


async def _post(client: httpx.AsyncClient, content: bytes, **headers: str) -> httpx.Response:
    return await client.post(f"{BASE}/agent", content=content, headers=headers)


def _json(response: httpx.Response) -> dict[str, Any]:
    assert response.headers["content-type"].startswith("application/json")
    body: dict[str, Any] = response.json()
    return body


async def test_a_cross_site_text_plain_post_does_not_run_the_agent() -> None:
    import json

    app = _app()
    async with asgi_client(app) as client:
        plain = await _post(client, json.dumps(BODY).encode(), **{"content-type": "text/plain"})
        from_page = await _post(
            client,
            json.dumps(BODY).encode(),
            **{"content-type": "text/plain", "origin": "https://evil.example"},
        )
    assert plain.status_code == 415
    assert _json(plain)["error"]["code"] == "unsupported_media_type"
    assert from_page.status_code == 403
    assert session_of(app, "t1") is None  # nothing ran


async def test_a_foreign_origin_is_refused_and_the_own_or_listed_one_allowed() -> None:
    import json

    data = json.dumps(BODY).encode()
    app = _app(cors_origins=("https://app.example",))
    async with asgi_client(app) as client:
        foreign = await _post(client, data, origin="https://evil.example", **JSON_TYPE)
        null = await _post(client, data, origin="null", **JSON_TYPE)
        other_port = await _post(client, data, origin="http://127.0.0.1:9999", **JSON_TYPE)
        own = await _post(client, data, origin=BASE, **JSON_TYPE)
        listed = await client.get(f"{BASE}/health", headers={"origin": "https://app.example"})
    for refused in (foreign, null, other_port):
        assert refused.status_code == 403
        assert _json(refused)["error"]["code"] == "origin_not_allowed"
        assert "--cors-origin" in refused.json()["error"]["message"]
    assert own.status_code == 200 and "RUN_FINISHED" in own.text
    assert listed.status_code == 200
    assert listed.headers["access-control-allow-origin"] == "https://app.example"


async def test_a_foreign_host_is_refused_against_dns_rebinding() -> None:
    app = _app()
    async with asgi_client(app) as client:
        rebound = await client.get("http://evil.example:8000/health")
        loopback = [
            await client.get(f"http://{name}:8000/health")
            for name in ("localhost", "127.0.0.1", "[::1]")
        ]
    assert rebound.status_code == 421
    assert _json(rebound)["error"]["code"] == "host_not_allowed"
    assert "--allowed-host" in rebound.json()["error"]["message"]
    assert [r.status_code for r in loopback] == [200, 200, 200]

    extra = create_app(LocalPort(agent_for()), allowed_hosts=("127.0.0.1", "agent.lan"))
    wildcard = create_app(LocalPort(agent_for()), allowed_hosts=("0.0.0.0",), any_ip_host=True)
    async with asgi_client(extra) as client:
        named = await client.get("http://agent.lan:8000/health")
    async with asgi_client(wildcard) as client:
        by_ip = await client.get("http://192.168.1.20:8000/health")
        by_name = await client.get("http://evil.example:8000/health")
    assert named.status_code == 200 and by_ip.status_code == 200
    assert by_name.status_code == 421


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b'{"threadId":"\\ud800x","runId":"r","messages":[]}', "lone_surrogate"),
        (b'{"threadId":"\xed\xa0\x80x","runId":"r","messages":[]}', "not_utf8"),
        (
            b'{"threadId":"t","runId":"r","messages":[],"state":'
            + b"[" * 2000
            + b"]" * 2000
            + b"}",
            "too_deep",
        ),
        (b'{"threadId":"t","runId":"r","messages":[],"state":{"x":NaN}}', "non_finite"),
        (
            b'{"threadId":"t","runId":"r","messages":[],"forwardedProps":{"x":-Infinity}}',
            "non_finite",
        ),
        (b'{"threadId":"t","runId":"r","messages":[],"state":{"x":1e400}}', "out_of_range"),
    ],
)
async def test_bodies_that_used_to_500_or_change_silently_get_422(
    content: bytes, reason: str
) -> None:
    async with asgi_client(_app()) as client:
        response = await _post(client, content, **JSON_TYPE)
    assert response.status_code == 422
    assert _json(response)["error"] == {
        "code": "invalid_json",
        "message": response.json()["error"]["message"],
        "reason": reason,
    }


async def test_a_bug_answers_a_json_500_without_a_traceback_page() -> None:
    import json

    app = _app()

    def broken(thread_id: str) -> Any:
        raise RuntimeError("a bug")

    app.state.threads.claim = broken
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport) as client:
        response = await _post(client, json.dumps(BODY).encode(), **JSON_TYPE)
    assert response.status_code == 500
    assert _json(response)["error"]["code"] == "internal_error"
    assert "Traceback" not in response.text


def test_a_non_loopback_bind_needs_a_token_or_the_insecure_flag() -> None:
    for address in ("127.0.0.1", "::1", "localhost", "127.0.0.2"):
        assert exposure_problem(address, token=None, insecure=False) is None
    for address in ("0.0.0.0", "::", "192.168.1.20", "example.org"):
        problem = exposure_problem(address, token=None, insecure=False)
        assert problem is not None and "--token" in problem and "--insecure-no-token" in problem
        assert exposure_problem(address, token="s3cret", insecure=False) is None
        assert exposure_problem(address, token=None, insecure=True) is None
