"""JWTs for tests: an HS256 secret, RSA and EC key pairs, and a JWKS served on 127.0.0.1."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tests.transports.agui.harness import live_server

SECRET = b"s" * 40
AUDIENCE = "steerable-test"
ISSUER = "https://issuer.test"
RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
EC_KEY = ec.generate_private_key(ec.SECP256R1())


def claims(user: str, **extra: Any) -> dict[str, Any]:
    now = int(time.time())
    return {"sub": user, "aud": AUDIENCE, "iss": ISSUER, "iat": now, "exp": now + 600, **extra}


def hs256(user: str, **extra: Any) -> str:
    return jwt.encode(claims(user, **extra), SECRET, algorithm="HS256")


def rs256(user: str, **extra: Any) -> str:
    return jwt.encode(claims(user, **extra), RSA_KEY, algorithm="RS256", headers={"kid": "rsa"})


def es256(user: str, **extra: Any) -> str:
    return jwt.encode(claims(user, **extra), EC_KEY, algorithm="ES256", headers={"kid": "ec"})


def unsigned(user: str) -> str:
    return jwt.encode(claims(user), None, algorithm="none")


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def jwks() -> dict[str, Any]:
    rsa_jwk = RSAAlgorithm.to_jwk(RSA_KEY.public_key(), as_dict=True)
    ec_jwk = ECAlgorithm.to_jwk(EC_KEY.public_key(), as_dict=True)
    return {
        "keys": [
            {**rsa_jwk, "kid": "rsa", "use": "sig", "alg": "RS256"},
            {**ec_jwk, "kid": "ec", "use": "sig", "alg": "ES256"},
        ]
    }


@contextlib.asynccontextmanager
async def jwks_server() -> AsyncIterator[tuple[str, list[int]]]:
    """A JWKS on 127.0.0.1; yields its URL and a list counting its fetches."""
    fetched: list[int] = []

    async def keys(request: Request) -> JSONResponse:
        fetched.append(1)
        return JSONResponse(jwks())

    app = Starlette(routes=[Route("/jwks.json", keys)])
    async with live_server(app) as url:
        yield f"{url}/jwks.json", fetched
