"""The psycopg driver as the PostgreSQL store uses it: import, connection options, failures.

psycopg 3 and psycopg_pool come with the `postgresql` extra; without them `psycopg` here is
None and `PostgresStore()` refuses with the remedy (`require_driver`), so importing the store
never fails. Every connection the store opens (pooled, owner, listener) gets the same
options (`connect_kwargs`: autocommit, the `steerable` schema first on the search path, an
application name naming the process, a connect timeout). `unavailable` turns a driver
failure into the `store_unavailable` StoreError naming the remedy (`storage_full` for the
server's disk-full error); `redact` keeps the
password out of every message.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager, nullcontext
from typing import TYPE_CHECKING, Any, TypeAlias
from urllib.parse import urlsplit, urlunsplit

from steerable_bridge.runtime.ports.storage import StoreError, storage_full

try:
    import psycopg
    import psycopg_pool
except ImportError:  # pragma: no cover - reported by require_driver() with the remedy
    psycopg = None  # type: ignore[assignment]
    psycopg_pool = None  # type: ignore[assignment]

if TYPE_CHECKING:
    Connection: TypeAlias = psycopg.AsyncConnection[Any]
    """One connection to the server (autocommit, the store's options)."""

__all__ = [
    "SCHEMA",
    "connect_kwargs",
    "pipelined",
    "psycopg",
    "psycopg_pool",
    "redact",
    "require_driver",
    "unavailable",
]

DISK_FULL = "53100"
"""SQLSTATE `disk_full`: the server could not extend a file (its disk or quota is full)."""

SCHEMA = "steerable"
"""The PostgreSQL schema holding the store's tables."""


def require_driver() -> None:
    """Raise `store_unavailable` naming the extra to install when psycopg is missing."""
    if psycopg is None or psycopg_pool is None:
        raise StoreError(
            "store_unavailable",
            "--storage postgresql://... needs psycopg: install steerable-bridge[postgresql]",
        )


def redact(url: str) -> str:
    """The URL without its password, for messages and logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)
    user = (parts.username or "") + ":***"
    return urlunsplit(parts._replace(netloc=f"{user}@{netloc[-1]}"))


def connect_kwargs(identity: str, timeout_s: float) -> dict[str, Any]:
    """The options of every connection a store opens."""
    return {
        "autocommit": True,
        "options": f"-c search_path={SCHEMA}",
        "application_name": identity,
        "connect_timeout": max(1, int(timeout_s)),
    }


def pipelined(conn: Connection) -> AbstractAsyncContextManager[object]:
    """Pipeline mode on `conn` (queries queued, one round trip when results are read)
    where libpq supports it (14 and later; psycopg[binary] bundles one), else nothing:
    the same queries then run one round trip each."""
    if psycopg.AsyncPipeline.is_supported():
        return conn.pipeline()
    return nullcontext()


def unavailable(where: str, err: BaseException) -> StoreError:
    """`store_unavailable` for a failure talking to the server at `where` (redacted)."""
    text = " ".join(str(err).split()) or type(err).__name__
    if getattr(err, "sqlstate", None) == DISK_FULL:
        return storage_full(where, text)
    return StoreError(
        "store_unavailable",
        f"cannot use the PostgreSQL session store {where} ({text}); check that the server is"
        " up, the URL in --storage / STEERABLE_STORAGE, and the user's rights (it needs to"
        f" create the schema {SCHEMA!r} on first use)",
    )
