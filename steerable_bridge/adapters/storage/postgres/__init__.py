"""PostgreSQL `SessionStore`: sessions shared by processes on several machines.

Selected with `--storage postgresql://user:pass@host/db` (or `postgres://`); needs the
`postgresql` extra (psycopg 3 and psycopg_pool). Tables live in the `steerable` schema of
that database, created on first use (`schema.py`); they have the SQLite store's layout and
queries (`sql.py`), rows carry the same record format stamp and are read through the same
upgrade chain (`formats.py`), and a database from a newer build is refused
(`store_too_new`), never altered. Appends (`appends.py`) check seqs against the locked
session row and write a batch in one transaction; reads (`reads.py`) take the resume tail
through the same indexes as SQLite. A turn owns its session through an advisory lock
(`ownership.py`) that PostgreSQL drops when the process dies; steer, follow-up and cancel
reach the owning process by LISTEN/NOTIFY (`signals.py`). `store.py` holds the connections
and wires the port together.
"""

from steerable_bridge.adapters.storage.postgres.driver import SCHEMA, redact
from steerable_bridge.adapters.storage.postgres.schema import SCHEMA_VERSION
from steerable_bridge.adapters.storage.postgres.store import PostgresStore

__all__ = ["SCHEMA", "SCHEMA_VERSION", "PostgresStore", "redact"]
