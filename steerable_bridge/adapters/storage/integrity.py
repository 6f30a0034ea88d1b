"""Checking a SQLite session store and salvaging what a damaged one still holds.

`check_store(path)` looks at everything without changing anything: SQLite's own
`integrity_check`, the schema version, and every row — its JSON decodes into a LoopEvent
(through the format upgrades), its seq matches the column, each session's seqs rise and end
at the recorded last seq, its format is one this build reads — and returns a report listing
each problem found. `salvage_events(path, session_id)` yields every row of a session that
still decodes, reading row by row so one damaged page or record costs only itself, and
reports each row it had to leave behind. The `sessions check` and `sessions export`
commands use these; the live store (`sqlite.py`) never does. `check_log` and `salvaged`
are the per-session rules, shared with the PostgreSQL store's `check()`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from steerable_bridge.adapters.storage.formats import FORMAT, Row, decode_event
from steerable_bridge.adapters.storage.request_resolver import Resolver
from steerable_bridge.adapters.storage.sql import ROW_COLUMNS
from steerable_bridge.adapters.storage.sqlite import SCHEMA_VERSION, store_error
from steerable_bridge.runtime.events import LoopEvent
from steerable_bridge.runtime.ports.storage import StoreError

__all__ = ["CheckReport", "Salvaged", "check_log", "check_store", "salvage_events", "salvaged"]


@dataclass(slots=True)
class CheckReport:
    """What `check_store` found. `ok` when the problem list is empty."""

    path: str
    sessions: int = 0
    events: int = 0
    formats: dict[str, int] = field(default_factory=dict)
    """Rows per record format (`unstamped` for rows written before stamps existed)."""
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


@dataclass(frozen=True, slots=True)
class Salvaged:
    """One row `salvage_events` read: the event, or why it had to be left behind."""

    seq: int | None
    found: int | None = None
    """The row's record format (None: unstamped)."""
    event: LoopEvent | None = None
    problem: str | None = None


def _connect(path: Path) -> sqlite3.Connection:
    if not path.is_file():
        raise StoreError(
            "store_missing", f"there is no session store at {path}; check the --storage path"
        )
    conn = sqlite3.connect(path, isolation_level=None, timeout=10.0)
    conn.execute("PRAGMA busy_timeout = 10000")
    return conn


def check_store(path: Path, *, limit: int = 200) -> CheckReport:
    """Verify the store at `path`; raises StoreError only when it does not exist."""
    report = CheckReport(path=str(path))
    conn = _connect(path)
    try:
        try:
            rows = conn.execute("PRAGMA integrity_check").fetchall()
            report.problems += [f"SQLite integrity: {r[0]}" for r in rows if r[0] != "ok"]
        except sqlite3.DatabaseError as err:
            report.problems.append(f"SQLite integrity check failed: {err}")
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            sessions = conn.execute(
                "SELECT session_id, last_seq, format FROM sessions ORDER BY session_id"
            ).fetchall()
        except sqlite3.DatabaseError as err:
            report.problems.append(f"SQLite cannot read the file: {err}")
            return report
        if version != SCHEMA_VERSION:
            report.problems.append(
                f"schema version {version}; this build uses {SCHEMA_VERSION}"
                + (" (upgrade steerable-bridge)" if version > SCHEMA_VERSION else "")
            )
            return report
        for session_id, last_seq, found in sessions:
            _check_session(conn, path, report, session_id, last_seq, found)
        try:
            orphans = conn.execute(
                "SELECT count(*) FROM events WHERE session_id NOT IN"
                " (SELECT session_id FROM sessions)"
            ).fetchone()[0]
        except sqlite3.DatabaseError as err:
            report.problems.append(f"cannot look for orphaned events: {err}")
        else:
            if orphans:
                report.problems.append(f"{orphans} events belong to no session")
    finally:
        conn.close()
    del report.problems[limit:]
    return report


def _check_session(
    conn: sqlite3.Connection,
    path: Path,
    report: CheckReport,
    session_id: str,
    last_seq: int,
    found: int | None,
) -> None:
    check_log(report, session_id, last_seq, found, _rows(conn, path, session_id))


def check_log(
    report: CheckReport,
    session_id: str,
    last_seq: int,
    found: int | None,
    items: Iterable[Salvaged],
) -> None:
    """Add one session's problems to `report`: its record format, each row (`salvaged`),
    seqs that do not rise, and a log that does not end at the recorded last seq. Every
    durable store's check goes through it."""
    report.sessions += 1
    if found is not None and found > FORMAT:
        report.problems.append(
            f"session {session_id}: record format {found} is newer than {FORMAT}"
            " (upgrade steerable-bridge)"
        )
    previous = -1
    for item in items:
        if item.seq is not None:
            if item.seq <= previous:
                report.problems.append(
                    f"session {session_id}: seq {item.seq} does not rise after {previous}"
                )
            previous = item.seq
        if item.problem is not None:
            report.problems.append(item.problem)
            continue
        report.events += 1
        label = "unstamped" if item.found is None else str(item.found)
        report.formats[label] = report.formats.get(label, 0) + 1
    if previous != last_seq:
        report.problems.append(
            f"session {session_id}: its record says the last seq is {last_seq},"
            f" the readable log ends at {previous}"
        )


def salvaged(session_id: str, row: Row, resolver: Resolver | None = None) -> list[Salvaged]:
    """One stored row's events (one, or a run's deltas, `runs.py`), decoded, or the reason
    it cannot be. Rows read in seq order through one `resolver` rebuild requests stored by
    reference from the rows before them."""
    seq, found = row[0], row[1]
    try:
        if resolver is None:
            return [Salvaged(seq=seq, found=found, event=decode_event(session_id, row))]
        return [Salvaged(seq=e.seq, found=found, event=e) for e in resolver.decode_row(row)]
    except StoreError as err:
        return [Salvaged(seq=seq, found=found, problem=err.message)]


def salvage_events(path: Path, session_id: str) -> Iterator[Salvaged]:
    """Every decodable event of the session in seq order, plus one entry per lost row."""
    conn = _connect(path)
    try:
        yield from _rows(conn, path, session_id)
    finally:
        conn.close()


def _rows(conn: sqlite3.Connection, path: Path, session_id: str) -> Iterator[Salvaged]:
    try:
        ids = [
            row[0]
            for row in conn.execute(
                "SELECT id FROM events WHERE session_id = ? ORDER BY seq", (session_id,)
            )
        ]
    except sqlite3.DatabaseError:
        ids = _scan_ids(conn, path, session_id)
    resolver = Resolver(session_id)
    for row_id in ids:
        yield from _salvage_row(conn, session_id, row_id, resolver)


def _scan_ids(conn: sqlite3.Connection, path: Path, session_id: str) -> list[int]:
    """Row ids of the session found one row at a time (the seq index is unreadable)."""
    try:
        top = conn.execute("SELECT max(id) FROM events").fetchone()[0] or 0
    except sqlite3.DatabaseError as err:
        raise store_error(path, err) from None
    found: list[tuple[int, int]] = []
    for row_id in range(1, top + 1):
        try:
            row = conn.execute(
                "SELECT session_id, seq FROM events WHERE id = ?", (row_id,)
            ).fetchone()
        except sqlite3.DatabaseError:
            continue
        if row is not None and row[0] == session_id:
            found.append((row[1], row_id))
    return [row_id for _, row_id in sorted(found)]


def _salvage_row(
    conn: sqlite3.Connection, session_id: str, row_id: int, resolver: Resolver
) -> list[Salvaged]:
    try:
        row = conn.execute(f"SELECT {ROW_COLUMNS} FROM events WHERE id = ?", (row_id,)).fetchone()
    except sqlite3.DatabaseError as err:
        return [
            Salvaged(seq=None, problem=f"session {session_id}: row {row_id} is unreadable: {err}")
        ]
    return salvaged(session_id, row, resolver)
