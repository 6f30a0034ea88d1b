"""Who sends a request: the one local user, a JWT's subject, or a trusted proxy's header.

An `Identity` turns a request into a user id, or refuses it with `AuthRefused` (a stable
code and a message naming the remedy; the app answers 401). `SingleUser(token)` is the
single-user mode: every request is the same user (`None`: threads have no owner), and with
a token it must carry `Authorization: Bearer <token>`. `JwtUsers` verifies a bearer JWT
with PyJWT — HS256 against a shared secret, or RS256 / ES256 against the keys of a JWKS URL
(`PyJWKClient`, which caches the key set and refetches it for a key id it does not know) —
checking expiry, and the audience and issuer when configured; the user is one claim (`sub`
by default). An unsigned token (`alg: none`) and algorithms other than the configured
ones are refused before any key is looked up. `ProxyUsers(header, networks)` believes a
reverse proxy's header, but only from a peer address inside one of the trusted networks.
The JWKS fetch is blocking I/O, so key look-ups run in a worker thread, bounded. PyJWT (and
the `cryptography` it loads) is imported only by `JwtUsers`: a single-user server's memory
and start-up never pay for it.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

import anyio
import anyio.to_thread
from starlette.requests import Request

if TYPE_CHECKING:
    from jwt.types import Options

__all__ = ["AuthRefused", "Identity", "JwtUsers", "ProxyUsers", "SingleUser", "bearer"]

JWKS_TIMEOUT_S = 10.0
"""The longest a key look-up (a JWKS fetch) may take before the request is refused."""
JWKS_CACHE_S = 300
"""How long the fetched key set is trusted before it is fetched again."""


class AuthRefused(Exception):
    """The request does not say who sends it (acceptably): 401 with `code` and `message`."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class Identity(Protocol):
    """Turns a request into its user (see the module docstring)."""

    multi_user: bool
    """Whether users are told apart (then every thread has an owner)."""
    name: str
    """The mode, for `/health` and the capabilities: `none`, `token`, `jwt`, `header`."""

    async def user(self, request: Request) -> str | None:
        """The request's user (None in single-user mode); raises `AuthRefused`."""


def bearer(request: Request) -> str | None:
    """The bearer credential of `Authorization`, or None."""
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    given = given.strip()
    return given if scheme.lower() == "bearer" and given else None


class SingleUser:
    """One user; with `token`, only requests that carry it."""

    multi_user = False

    def __init__(self, token: str | None) -> None:
        self.token = token
        self.name = "none" if token is None else "token"

    async def user(self, request: Request) -> str | None:
        if self.token is None:
            return None
        given = bearer(request)
        if given is None or not hmac.compare_digest(given.encode(), self.token.encode()):
            raise AuthRefused(
                "unauthorized",
                "this server needs a bearer token: send 'Authorization: Bearer <token>' with"
                " the token it was started with (--token or STEERABLE_TOKEN)",
            )
        return None


class JwtUsers:
    """Users named by a verified JWT (see the module docstring)."""

    multi_user = True
    name = "jwt"

    def __init__(
        self,
        *,
        secret: bytes | None = None,
        jwks_url: str | None = None,
        audience: str | None = None,
        issuer: str | None = None,
        user_claim: str = "sub",
        leeway_s: float = 0.0,
    ) -> None:
        if (secret is None) == (jwks_url is None):
            raise ValueError("--auth jwt needs exactly one of --jwt-secret-file and --jwks-url")
        import jwt

        self.jwt = jwt
        self.secret = secret
        self.jwks = (
            None
            if jwks_url is None
            else jwt.PyJWKClient(jwks_url, cache_jwk_set=True, lifespan=JWKS_CACHE_S, timeout=10)
        )
        self.algorithms = ["HS256"] if secret is not None else ["RS256", "ES256"]
        self.audience = audience
        self.issuer = issuer
        self.user_claim = user_claim
        self.leeway_s = leeway_s
        self.options: Options = {"require": [user_claim], "verify_aud": audience is not None}

    async def user(self, request: Request) -> str | None:
        jwt = self.jwt
        token = bearer(request)
        if token is None:
            raise AuthRefused(
                "token_missing",
                "this server identifies users by JWT: send 'Authorization: Bearer <jwt>'",
            )
        try:
            alg = jwt.get_unverified_header(token).get("alg")
        except jwt.PyJWTError as err:
            raise AuthRefused(
                "token_invalid", f"the token is not a JWT ({err}); send a JWT"
            ) from None
        if not isinstance(alg, str) or alg not in self.algorithms:
            raise AuthRefused(
                "token_unsigned" if str(alg).lower() == "none" else "token_algorithm",
                f"the token is signed with {alg!r}; this server takes only"
                f" {', '.join(self.algorithms)} tokens — get one from your identity provider",
            )
        try:
            key: Any = self.secret
            if self.jwks is not None:
                with anyio.fail_after(JWKS_TIMEOUT_S):
                    found = await anyio.to_thread.run_sync(
                        self.jwks.get_signing_key_from_jwt, token, abandon_on_cancel=True
                    )
                key = found.key
            claims = jwt.decode(
                token,
                key,
                algorithms=self.algorithms,
                audience=self.audience,
                issuer=self.issuer,
                leeway=self.leeway_s,
                options=self.options,
            )
        except jwt.ExpiredSignatureError:
            raise AuthRefused("token_expired", "the token has expired; get a new one") from None
        except jwt.InvalidAudienceError:
            raise AuthRefused(
                "token_audience",
                f"the token is not for this server (audience {self.audience!r} expected);"
                " get a token issued for it",
            ) from None
        except jwt.InvalidIssuerError:
            raise AuthRefused(
                "token_issuer",
                f"the token was not issued by {self.issuer!r}; get one from that issuer",
            ) from None
        except jwt.PyJWKClientError as err:
            raise AuthRefused(
                "token_key_unknown",
                f"no key of the server's JWKS verifies the token ({err}); check --jwks-url"
                " and the token's issuer",
            ) from None
        except TimeoutError:
            raise AuthRefused(
                "jwks_unreachable",
                f"the JWKS did not answer within {JWKS_TIMEOUT_S:g}s; retry, and check --jwks-url",
            ) from None
        except jwt.PyJWTError as err:
            raise AuthRefused("token_invalid", f"the token is not valid ({err})") from None
        user = claims.get(self.user_claim)
        if not isinstance(user, str) or not user:
            raise AuthRefused(
                "token_invalid",
                f"the token's {self.user_claim!r} claim is not a non-empty string; send a"
                " token that names the user there (or start with --jwt-user-claim)",
            )
        return user


class ProxyUsers:
    """Users named by a trusted reverse proxy's header (see the module docstring)."""

    multi_user = True
    name = "header"

    def __init__(self, header: str, networks: Sequence[str]) -> None:
        if not networks:
            raise ValueError("--auth header needs --trusted-proxy CIDR")
        self.header = header.lower()
        self.networks = tuple(ipaddress.ip_network(n, strict=False) for n in networks)

    async def user(self, request: Request) -> str | None:
        peer = request.client.host if request.client is not None else ""
        try:
            address = ipaddress.ip_address(peer)
        except ValueError:
            address = None
        if address is None or not any(address in net for net in self.networks):
            raise AuthRefused(
                "untrusted_proxy",
                f"this server takes the user from {self.header!r} only from its proxy"
                " (--trusted-proxy); send the request through it",
            )
        user = request.headers.get(self.header, "").strip()
        if not user:
            raise AuthRefused(
                "user_missing",
                f"the proxy sent no {self.header!r} header; configure it to name the user",
            )
        return user
