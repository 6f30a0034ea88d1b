"""`WebGuard`: the ASGI middleware that keeps other web pages from driving the server.

A browser lets any page send a `POST` to `http://127.0.0.1:8000/agent`, and with DNS
rebinding (a hostile name that resolves to 127.0.0.1) even read the answer. Two header
checks close that, before any route runs:

- `Host` must name this server: a loopback name (`localhost`, `127.0.0.1`, `[::1]`), the
  address it is bound to, a name given with `--allowed-host`, or — when it listens on every
  interface — any IP literal (rebinding needs a DNS name). Otherwise 421, or 400 when there
  is no `Host` at all.
- `Origin`, when a browser sends one, must be the server's own (same scheme, host and port
  as the request) or one of the `--cors-origin`s. Otherwise 403.

A WebSocket upgrade (remote ACP, `transports/acp/remote.py`) is checked the same way and
refused with the same answer (a plain 403 where the server lacks ASGI's denial response).
The content type of `POST /agent` (415 unless `application/json`) is checked by the route.
Answers use the app's error shape `{"error": {"code", "message"}}`. Used by `app.py`;
`create_app(allowed_hosts=None)` leaves it out, for hosts that mount the app behind their
own checks.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Iterable
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["LOOPBACK_HOSTS", "WILDCARD_HOSTS", "WebGuard", "exposure_problem", "host_name"]

LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
WILDCARD_HOSTS = frozenset({"0.0.0.0", "::", ""})


def host_name(value: str) -> str:
    """The host of a `Host` header or a bare address, lower-case, without port or brackets."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1 : value.find("]")] if "]" in value else value[1:]
    if value.count(":") == 1:
        return value.split(":", 1)[0]
    return value  # a bare name or a bare IPv6 address


def is_loopback(address: str) -> bool:
    """Whether binding `address` keeps the server on this machine."""
    name = host_name(address)
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False  # a host name: assume it reaches beyond this machine


def exposure_problem(address: str, *, token: str | None, insecure: bool) -> str | None:
    """Why binding `address` without a token is refused (None when it is fine)."""
    if token or insecure or is_loopback(address):
        return None
    return (
        f"--host {address} lets other machines reach the agent, and there is no token; pass"
        " --token (or STEERABLE_TOKEN), or --insecure-no-token if the network is trusted"
    )


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def _endpoint(netloc: str, scheme: str) -> tuple[str, int] | None:
    try:
        parts = urlsplit(f"{scheme}://{netloc}")
        port = parts.port
    except ValueError:
        return None
    default = 443 if scheme in ("https", "wss") else 80
    return (parts.hostname or "", port or default)


class WebGuard:
    """Refuses requests whose `Host` or `Origin` is not this server's (see module docstring)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        allowed_hosts: Iterable[str],
        cors_origins: Iterable[str] = (),
        any_ip: bool = False,
    ) -> None:
        self.app = app
        self.hosts = frozenset(host_name(h) for h in allowed_hosts) | LOOPBACK_HOSTS
        self.origins = frozenset(o.rstrip("/").lower() for o in cors_origins)
        self.any_ip = any_ip

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        raw_scheme = str(scope.get("scheme", "http"))
        scheme = {"ws": "http", "wss": "https"}.get(raw_scheme, raw_scheme)
        refusal = self._refusal(headers, scheme)
        if refusal is None:
            await self.app(scope, receive, send)
            return
        status, code, message = refusal
        prefix = ""
        if scope["type"] == "websocket":  # refuse the upgrade with the same answer
            if "websocket.http.response" not in scope.get("extensions", {}):
                await send({"type": "websocket.close", "code": 1008})
                return
            prefix = "websocket."
        body = json.dumps({"error": {"code": code, "message": message}}).encode()
        await send(
            {
                "type": f"{prefix}http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"vary", b"Origin"),
                ],
            }
        )
        await send({"type": f"{prefix}http.response.body", "body": body})

    def _refusal(self, headers: dict[str, str], scheme: str) -> tuple[int, str, str] | None:
        host = headers.get("host")
        if not host:
            return 400, "host_required", "the request has no Host header; send one"
        name = host_name(host)
        if name not in self.hosts and not (self.any_ip and _is_ip(name)):
            return (
                421,
                "host_not_allowed",
                f"this server does not answer to the host {name[:100]!r}; use its address or"
                " start it with --allowed-host NAME",
            )
        origin = headers.get("origin")
        if origin is None or origin.rstrip("/").lower() in self.origins or "*" in self.origins:
            return None
        try:
            split = urlsplit(origin) if "://" in origin else None
        except ValueError:
            split = None
        if (
            split is not None
            and split.scheme == scheme
            and _endpoint(split.netloc, scheme) == _endpoint(host, scheme)
        ):
            return None
        return (
            403,
            "origin_not_allowed",
            f"requests from the web origin {origin[:100]!r} are refused; start the server with"
            " --cors-origin ORIGIN to allow that site",
        )
