"""`steerable-bridge sessions claim --owner SUBJECT (--all-unowned | ID...)`: give sessions
stored without an owner to a user.

Sessions created before `serve` told users apart (no `--auth`, or `--token`) have no owner,
so under `--auth jwt` or `--auth header` nobody sees them. An operator moving such a
deployment to accounts runs this once, naming the user who should have them: SUBJECT is the
identity `serve` reads for that user (the JWT's `--jwt-user-claim`, or the `--user-header`
value). It never takes a session from another owner (that one is reported and the exit
status is 1) and is safe to run again (a session SUBJECT already owns is left as it is).
It may run while `serve` does: each session changes in one transaction, and `serve` reads
owners from the store on every request. Used by `sessions.py`; changes nothing but owners.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from steerable_bridge.commands.terminal import printable, say

if TYPE_CHECKING:
    from steerable_bridge.runtime.ports.storage import SessionStore

__all__ = ["add_claim_options", "claim"]

PAGE = 200


def add_claim_options(parser: Any) -> None:
    parser.add_argument(
        "--owner",
        required=True,
        metavar="SUBJECT",
        help="the user to own them, as `serve --auth` names it (the JWT's user claim or the"
        " --user-header value)",
    )
    parser.add_argument(
        "--all-unowned", action="store_true", help="every session stored without an owner"
    )
    parser.add_argument("session_ids", nargs="*", metavar="ID", help="these sessions")


def usage_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with the command line, with the remedy; None when it is fine."""
    if not args.owner.strip():
        return "--owner must name a user; give the subject `serve --auth` sees for them"
    if bool(args.all_unowned) == bool(args.session_ids):
        return "name the sessions to claim (IDs) or give --all-unowned, not both or neither"
    return None


async def _unowned(store: SessionStore) -> list[str]:
    """The ids of every session stored without an owner (every page of the listing)."""
    ids: list[str] = []
    cursor: str | None = None
    while True:
        page = await store.list(cursor=cursor, limit=PAGE)
        ids.extend(r.session_id for r in page.records if r.user is None)
        if page.next_cursor is None:
            return ids
        cursor = page.next_cursor


async def claim(store: SessionStore, args: argparse.Namespace) -> int:
    from steerable_bridge.runtime.ports.storage import SessionNotFound, adopt_session

    owner: str = args.owner
    wanted = await _unowned(store) if args.all_unowned else list(args.session_ids)
    claimed: list[str] = []
    kept: list[str] = []  # already the owner's
    refused: list[dict[str, str]] = []
    for session_id in wanted:
        before = await store.get(session_id)
        if before is None:
            refused.append({"session_id": session_id, "code": "session_not_found"})
            continue
        try:
            taken = await adopt_session(store, session_id, owner)
        except SessionNotFound:  # deleted in between
            refused.append({"session_id": session_id, "code": "session_not_found"})
            continue
        if not taken:
            refused.append({"session_id": session_id, "code": "owned_by_another_user"})
        elif before.user is None:
            claimed.append(session_id)
        else:
            kept.append(session_id)
    if args.json:
        print(json.dumps({"owner": owner, "claimed": claimed, "kept": kept, "refused": refused}))
        return 1 if refused else 0
    who = printable(owner, layout=False)
    for session_id in claimed:
        say(f"{printable(session_id, layout=False)}: now owned by {who}")
    for session_id in kept:
        say(f"{printable(session_id, layout=False)}: already owned by {who}")
    for item in refused:
        sid = printable(item["session_id"], layout=False)
        if item["code"] == "session_not_found":
            say(f"error [session_not_found]: {sid} does not exist; check `sessions list`",
                file=sys.stderr)  # fmt: skip
        else:
            say(
                f"error [owned_by_another_user]: {sid} belongs to another user; claim only"
                " sessions stored without an owner",
                file=sys.stderr,
            )
    if not wanted:
        say("no session is stored without an owner", file=sys.stderr)
    else:
        say(f"{len(claimed)} claimed for {who}", file=sys.stderr)
    return 1 if refused else 0
