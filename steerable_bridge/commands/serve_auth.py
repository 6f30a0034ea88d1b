"""`serve`'s identity options: one user behind a token, users by JWT, or by a proxy's header.

`--auth token` (the default) is the single-user mode of `--token`. `--auth jwt` verifies a
bearer JWT — `--jwt-secret-file F` (HS256, the secret is the file's bytes with the trailing
newline cut) or `--jwks-url URL` (RS256 / ES256) — with `--jwt-audience`, `--jwt-issuer`
and `--jwt-user-claim` (default `sub`). `--auth header --user-header NAME` takes the user
from a reverse proxy's header, only with `--trusted-proxy CIDR` (repeatable) naming the
proxy's addresses. `--metrics-token` guards `/metrics` on its own (`$STEERABLE_METRICS_TOKEN`).
`identity_from_args` checks the combination and builds the `Identity` the app asks.
"""

from __future__ import annotations

import argparse
import ipaddress
from typing import TYPE_CHECKING, Any

from steerable_bridge.commands.errors import ConfigError

if TYPE_CHECKING:
    from steerable_bridge.commands.settings import ServeSettings

__all__ = ["add_auth_options", "identity_from_args"]


def add_auth_options(parser: Any, settings: ServeSettings | None = None) -> None:
    """The identity options; `--metrics-token`'s default from `settings` (read leniently
    when None)."""
    if settings is None:
        from steerable_bridge.commands.settings import ServeSettings

        settings = ServeSettings.lenient()
    parser.add_argument(
        "--auth",
        choices=("token", "jwt", "header"),
        default="token",
        help="how requests say who sends them: token (one user; --token), jwt (a bearer JWT"
        " names the user; each thread is its creator's), header (a trusted proxy's header)",
    )
    parser.add_argument("--jwt-secret-file", metavar="F", help="HS256 secret for --auth jwt")
    parser.add_argument("--jwks-url", metavar="URL", help="JWKS of RS256/ES256 keys (--auth jwt)")
    parser.add_argument("--jwt-audience", metavar="AUD", help="the audience tokens must name")
    parser.add_argument("--jwt-issuer", metavar="ISS", help="the issuer tokens must name")
    parser.add_argument(
        "--jwt-user-claim", default="sub", metavar="CLAIM", help="claim naming the user (sub)"
    )
    parser.add_argument("--user-header", metavar="NAME", help="the user header (--auth header)")
    parser.add_argument(
        "--trusted-proxy",
        action="append",
        default=[],
        metavar="CIDR",
        help="addresses of the proxy whose --user-header is believed (repeatable)",
    )
    parser.add_argument(
        "--metrics-token",
        default=settings.metrics_token,
        help="bearer token for /metrics (default: $STEERABLE_METRICS_TOKEN; single-user"
        " mode falls back to --token)",
    )


def identity_from_args(args: argparse.Namespace) -> Any:
    """The app's `Identity` for these options; raises `ConfigError` naming the fix."""
    from steerable_bridge.transports.agui.identity import JwtUsers, ProxyUsers, SingleUser

    mode = getattr(args, "auth", "token")
    if mode == "token":
        return SingleUser(args.token or None)
    if args.token:
        raise ConfigError(f"--token is the single-user mode; drop it with --auth {mode}")
    if mode == "jwt":
        if bool(args.jwt_secret_file) == bool(args.jwks_url):
            raise ConfigError("--auth jwt needs one of --jwt-secret-file F or --jwks-url URL")
        secret = None
        if args.jwt_secret_file:
            try:
                with open(args.jwt_secret_file, "rb") as handle:
                    secret = handle.read().rstrip(b"\r\n")
            except OSError as err:
                raise ConfigError(
                    f"cannot read --jwt-secret-file {args.jwt_secret_file} ({err.strerror});"
                    " give a readable file holding the HS256 secret"
                ) from None
            if len(secret) < 32:
                raise ConfigError(
                    "--jwt-secret-file holds fewer than 32 bytes; use a longer secret"
                    " (HS256 needs at least 256 bits)"
                )
        return JwtUsers(
            secret=secret,
            jwks_url=args.jwks_url,
            audience=args.jwt_audience,
            issuer=args.jwt_issuer,
            user_claim=args.jwt_user_claim,
        )
    if not args.user_header:
        raise ConfigError("--auth header needs --user-header NAME")
    if not args.trusted_proxy:
        raise ConfigError(
            "--auth header needs --trusted-proxy CIDR: without it anyone could name any user"
        )
    for cidr in args.trusted_proxy:
        try:
            ipaddress.ip_network(cidr, strict=False)
        except ValueError:
            raise ConfigError(f"--trusted-proxy {cidr!r} is not an address or CIDR") from None
    return ProxyUsers(args.user_header, args.trusted_proxy)
