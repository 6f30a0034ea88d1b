"""The opaque listing cursor every session store issues: the last record's (updated_at, id).

Stores list newest first; a cursor names the last record of a page, and the next page starts
strictly after it. One encoding for all stores, so a cursor means the same everywhere and a
malformed one gets the same error with the same remedy.
"""

from __future__ import annotations

import base64

from steerable_bridge.runtime.ports.storage import SessionRecord, StoreError

__all__ = ["decode_cursor", "encode_cursor"]


def encode_cursor(record: SessionRecord) -> str:
    raw = f"{record.updated_at}:{record.session_id}".encode()
    return base64.urlsafe_b64encode(raw).decode()


def decode_cursor(cursor: str) -> tuple[int, str]:
    """(updated_at, session_id) of the record the cursor names; StoreError `invalid_cursor`."""
    try:
        stamp, _, sid = base64.urlsafe_b64decode(cursor.encode()).decode().partition(":")
        return int(stamp), sid
    except (ValueError, UnicodeDecodeError) as err:
        raise StoreError(
            "invalid_cursor", "the cursor is not one this store issued; list again without it"
        ) from err
