"""`serve`'s connection limits from the command line and the environment.

`--max-head BYTES` (`STEERABLE_MAX_HEAD`, default 32 KiB: request line plus headers, 431
beyond), `--head-timeout SECONDS` (`STEERABLE_HEAD_TIMEOUT`, default 10: 408 when a head
takes longer), `--body-timeout SECONDS` (`STEERABLE_BODY_TIMEOUT`, default 30: 408 when a
body takes longer after its head) and `--max-connections N` (`STEERABLE_MAX_CONNECTIONS`,
default: what the file-descriptor limit leaves room for) become the
`transports/agui/head_guard.ConnectionLimits` the HTTP protocol enforces. The variables are
fields of `settings.ServeSettings`; a bad value is a `ConfigError` naming the option, the
variable and what it accepts.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from steerable_bridge.commands.errors import ConfigError
from steerable_bridge.commands.model_deadlines import seconds_text
from steerable_bridge.commands.setting_values import positive_seconds
from steerable_bridge.transports.agui.head_guard import ConnectionLimits

if TYPE_CHECKING:
    from steerable_bridge.commands.settings import ServeSettings

__all__ = ["add_limit_options", "limits_from_args"]

MIN_HEAD = 1024
"""Below this, ordinary browser requests (cookies, user agent) would not fit."""


def add_limit_options(
    parser: argparse.ArgumentParser, settings: ServeSettings | None = None
) -> None:
    """The four options, their defaults from `settings` (read leniently when None)."""
    if settings is None:
        from steerable_bridge.commands.settings import ServeSettings

        settings = ServeSettings.lenient()
    default = ConnectionLimits()
    parser.add_argument(
        "--max-head",
        default=str(settings.max_head),
        metavar="BYTES",
        help="largest request line plus headers; larger get 431 (default: $STEERABLE_MAX_HEAD"
        f" or {default.max_head_bytes})",
    )
    parser.add_argument(
        "--head-timeout",
        default=seconds_text(settings.head_timeout),
        metavar="SECONDS",
        help="time a connection has to send its request head; slower get 408 (default:"
        f" $STEERABLE_HEAD_TIMEOUT or {default.head_timeout_s:g})",
    )
    parser.add_argument(
        "--body-timeout",
        default=seconds_text(settings.body_timeout),
        metavar="SECONDS",
        help="time a request has to send its body after the head; slower get 408 (default:"
        f" $STEERABLE_BODY_TIMEOUT or {default.body_timeout_s:g})",
    )
    parser.add_argument(
        "--max-connections",
        default="" if settings.max_connections is None else str(settings.max_connections),
        metavar="N",
        help="connections open at once; past it the longest-waiting idle one is dropped"
        " (default: $STEERABLE_MAX_CONNECTIONS, else what the file-descriptor limit allows)",
    )


def _seconds(raw: object, flag: str, env: str) -> float:
    try:
        return positive_seconds(raw, flag, env)
    except ValueError as err:
        raise ConfigError(str(err)) from None


def _whole(raw: object, flag: str, env: str, least: int) -> int:
    text = str(raw).strip().replace("_", "")
    if not text.isdigit() or int(text) < least:
        raise ConfigError(f"{flag} / {env}={raw!r} must be a whole number, at least {least:,}")
    return int(text)


def limits_from_args(args: argparse.Namespace) -> ConnectionLimits:
    """The limits the options ask for (defaults for options a caller did not add)."""
    default = ConnectionLimits()
    head = getattr(args, "max_head", None)
    head_s = getattr(args, "head_timeout", None)
    body_s = getattr(args, "body_timeout", None)
    connections = str(getattr(args, "max_connections", "") or "").strip()
    return ConnectionLimits(
        max_head_bytes=default.max_head_bytes
        if head is None
        else _whole(head, "--max-head", "STEERABLE_MAX_HEAD", MIN_HEAD),
        head_timeout_s=default.head_timeout_s
        if head_s is None
        else _seconds(head_s, "--head-timeout", "STEERABLE_HEAD_TIMEOUT"),
        body_timeout_s=default.body_timeout_s
        if body_s is None
        else _seconds(body_s, "--body-timeout", "STEERABLE_BODY_TIMEOUT"),
        max_connections=_whole(connections, "--max-connections", "STEERABLE_MAX_CONNECTIONS", 1)
        if connections
        else None,
    )
