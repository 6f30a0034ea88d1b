"""`steerable-bridge sessions list | show ID | export ID | delete ID | check | claim`: sessions.

Reads the store `--storage` names (the same default as every other command) without running
the agent: `list` pages newest first (`--cwd`, `--limit`, `--cursor`), `show` prints a
session's record, status (idle, running in which process, or interrupted — closed on its
next load) and conversation (`--timeline`: each run as a waterfall, `timeline.py`), `export`
writes its LoopEvents as JSON lines, `delete` removes it, `check` verifies a SQLite or
PostgreSQL store row by row, `claim` gives sessions stored without an owner to a user
(`session_owners.py`). Nothing here modifies a session except `delete` and `claim`; `show` never
closes an interrupted turn. `export` reads a damaged store row by row and salvages every
event that still decodes, listing the rest on stderr. `--json` makes `list`, `show` and
`check` print JSON. Everything printed for people goes through `terminal.say`, so control
characters in titles, paths and messages are shown escaped, never sent to the terminal.
Exit status: 0 when all is well, 1 when a session or (for `check` and `export`) the store
has a problem (the message names the remedy), 2 for a usage mistake or a store `list`,
`show` and `delete` cannot open (checked first, one line).
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from steerable_bridge.commands.session_owners import add_claim_options, claim, usage_problem
from steerable_bridge.commands.storage_choice import add_storage_option
from steerable_bridge.commands.terminal import printable, say

if TYPE_CHECKING:
    from collections.abc import Sequence

    from steerable_bridge.runtime.events import LoopEvent
    from steerable_bridge.runtime.ports.storage import SessionRecord, SessionStore


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("sessions", help="list, show, export, delete or check sessions")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)

    def action(name: str, help_: str, *, session: bool = False, as_json: bool = True) -> Any:
        sub = actions.add_parser(name, help=help_)
        add_storage_option(sub)
        if session:
            sub.add_argument("session_id", metavar="ID", help="the session's id")
        if as_json:
            sub.add_argument("--json", action="store_true", help="print JSON")
        sub.set_defaults(func=main)
        return sub

    listing = action("list", "sessions, most recently updated first")
    listing.add_argument("--cwd", help="only sessions whose working directory is CWD")
    listing.add_argument("--limit", type=int, default=50, help="sessions per page (50)")
    listing.add_argument("--cursor", help="continue a listing where the previous page ended")
    show = action("show", "a session's record, status and conversation", session=True)
    show.add_argument(
        "--timeline",
        action="store_true",
        help="draw each run as a waterfall of its steps, model calls, permission waits and"
        " tools, with durations",
    )
    export = action("export", "a session's LoopEvents as JSON lines", session=True, as_json=False)
    export.add_argument("-o", "--output", help="write to this file instead of stdout")
    action("delete", "remove a session and its log", session=True, as_json=False)
    action("check", "verify the store: SQLite integrity, every row decodes, seqs rise")
    add_claim_options(
        action("claim", "give sessions stored without an owner to a user (`serve --auth`)")
    )


def main(args: argparse.Namespace) -> int:
    import anyio

    from steerable_bridge.commands.errors import ConfigError
    from steerable_bridge.commands.storage_choice import build_store, check_storage
    from steerable_bridge.runtime.ports.storage import StoreError

    if args.action == "list" and args.limit < 1:
        raise ConfigError("--limit must be at least 1")
    if args.action == "claim" and (problem := usage_problem(args)) is not None:
        raise ConfigError(problem)
    if args.action not in ("check", "export"):  # those two read damaged stores on purpose
        check_storage(args.storage)
    store = build_store(args.storage)

    async def run() -> int:
        try:
            return await _ACTIONS[args.action](store, args)
        finally:
            close = getattr(store, "aclose", None)
            if close is not None:
                await close()

    try:
        code: int = anyio.run(run)
        return code
    except StoreError as error:
        say(f"error [{error.code}]: {error.message}", file=sys.stderr)
        return 1


async def _list(store: SessionStore, args: argparse.Namespace) -> int:
    page = await store.list(cwd=args.cwd, cursor=args.cursor, limit=args.limit)
    if args.json:
        print(
            json.dumps(
                {
                    "sessions": [_record_json(r) for r in page.records],
                    "next_cursor": page.next_cursor,
                }
            )
        )
        return 0
    for r in page.records:
        title = r.title or "(untitled)"
        say(f"{_one(r.session_id)}  {_when(r.updated_at)}  {_one(title)}  [{_one(r.cwd)}]")
    if not page.records:
        say("no sessions", file=sys.stderr)
    if page.next_cursor:
        say(f"more: --cursor {page.next_cursor}", file=sys.stderr)
    return 0


async def _show(store: SessionStore, args: argparse.Namespace) -> int:
    from steerable_bridge.runtime.model_context.projection import project_history, session_facts
    from steerable_bridge.runtime.ports.storage import SessionNotFound, read_tail, session_owner

    record = await store.get(args.session_id)
    if record is None:
        raise SessionNotFound(args.session_id)
    if args.timeline:
        return await _timeline(store, args)
    events = await read_tail(store, args.session_id)
    facts = session_facts(events)
    owner = await session_owner(store, args.session_id)
    if owner is not None:
        status = f"running in {owner}"
    elif facts.running:
        status = "interrupted (the open turn is closed when the session is next loaded)"
    else:
        status = "idle"
    messages = project_history(events)
    if args.json:
        data = _record_json(record) | {
            "status": "running" if owner else ("interrupted" if facts.running else "idle"),
            "owner": owner,
            "events": len(events),
            "last_seq": events[-1].seq if events else None,
            "mode": facts.mode_id,
            "messages": len(messages),
        }
        print(json.dumps(data))
        return 0
    say(f"session  {_one(record.session_id)}")
    say(f"title    {_one(record.title or '(untitled)')}")
    say(f"cwd      {_one(record.cwd)}")
    say(f"model    {_one(record.model or '-')}")
    say(f"created  {_when(record.created_at)}")
    say(f"updated  {_when(record.updated_at)}")
    say(f"events   {len(events)} (last seq {events[-1].seq if events else '-'})")
    say(f"status   {status}")
    for message in messages:
        text = " ".join(getattr(part, "text", f"[{part.type}]") for part in message.content)
        if message.tool_calls:
            text += " " + " ".join(f"[call {c.name}]" for c in message.tool_calls)
        text = " ".join(text.split())
        say(f"  {message.role:<9} {text[:100] + ('...' if len(text) > 100 else '')}")
    for line in _questions(events):
        say(line)
    return 0


def _questions(events: Sequence[LoopEvent]) -> list[str]:
    """One line per question asked, with its answer (or that it still waits)."""
    from steerable_bridge.runtime import events as ev

    answers = {e.question_id: e for e in events if isinstance(e, ev.QuestionAnswered)}
    completed = {e.question_id for e in events if isinstance(e, ev.QuestionCompleted)}
    lines: list[str] = []
    for event in events:
        if not isinstance(event, ev.QuestionAsked):
            continue
        answer = answers.get(event.question_id)
        if answer is None:
            outcome = "waiting for an answer"
        elif answer.action == "accept" and event.url is not None:
            done = ", completed" if event.question_id in completed else ""
            outcome = f"accepted (opened {event.url}{done})"
        elif answer.action == "accept":
            outcome = f"accepted {answer.content_json or '{}'}"
        else:
            outcome = f"{answer.action}d" if answer.action == "decline" else "cancelled"
        lines.append(f"  question  {_one(event.message)[:80]} -> {_one(outcome)[:100]}")
    return lines


async def _timeline(store: SessionStore, args: argparse.Namespace) -> int:
    from steerable_bridge.commands.timeline import draw, timelines

    runs = timelines(await store.read(args.session_id))
    if args.json:
        print(json.dumps([
            {"run_id": run.run_id, "trace_id": run.trace_id,
             "rows": [{"depth": r.depth, "label": r.label, "start": r.start, "end": r.end,
                       "note": r.note} for r in run.rows]}
            for run in runs
        ]))  # fmt: skip
        return 0
    if not runs:
        say(f"session {args.session_id} has no runs yet", file=sys.stderr)
    for number, run in enumerate(runs):
        if number:
            say()
        say("\n".join(draw(run)))
    return 0


async def _export(store: SessionStore, args: argparse.Namespace) -> int:
    from steerable_bridge.runtime.encoding.codec import event_to_json

    out = open(args.output, "w") if args.output else sys.stdout  # noqa: SIM115, ASYNC230
    lost = 0
    written = 0
    try:
        path = getattr(store, "path", None)
        if isinstance(path, Path):
            from steerable_bridge.adapters.storage.integrity import salvage_events

            for item in salvage_events(path, args.session_id):
                if item.event is None:
                    lost += 1
                    say(f"skipped: {item.problem}", file=sys.stderr)
                    continue
                out.write(event_to_json(item.event) + "\n")
                written += 1
            if written == 0 and lost == 0 and await _missing(store, args.session_id):
                from steerable_bridge.runtime.ports.storage import SessionNotFound

                raise SessionNotFound(args.session_id)
        else:
            for event in await store.read(args.session_id):
                out.write(event_to_json(event) + "\n")
                written += 1
    finally:
        if out is not sys.stdout:
            out.close()
        else:
            out.flush()
    if lost:
        say(
            f"exported {written} events; {lost} rows could not be read (listed above)",
            file=sys.stderr,
        )
        return 1
    return 0


async def _missing(store: SessionStore, session_id: str) -> bool:
    from steerable_bridge.runtime.ports.storage import StoreError

    try:
        return await store.get(session_id) is None
    except StoreError:
        return False


async def _delete(store: SessionStore, args: argparse.Namespace) -> int:
    from steerable_bridge.adapters.tools.spill import FileSpill

    if not await store.delete(args.session_id):
        say(f"session {args.session_id} does not exist; nothing deleted", file=sys.stderr)
        return 1
    try:
        await FileSpill().forget(args.session_id)  # the full tool outputs it kept
    except OSError as err:
        say(f"deleted {args.session_id}, but not its spilled outputs: {err}", file=sys.stderr)
        return 1
    say(f"deleted {args.session_id}", file=sys.stderr)
    return 0


async def _check(store: SessionStore, args: argparse.Namespace) -> int:
    path = getattr(store, "path", None)
    check = getattr(store, "check", None)
    if check is not None:  # a database server's store checks itself
        report = await check()
    elif isinstance(path, Path):
        from steerable_bridge.adapters.storage.integrity import check_store

        report = check_store(path)
    else:
        say("the memory store keeps nothing between runs; nothing to check", file=sys.stderr)
        return 0
    if args.json:
        print(
            json.dumps(
                {
                    "path": report.path,
                    "ok": report.ok,
                    "sessions": report.sessions,
                    "events": report.events,
                    "formats": report.formats,
                    "problems": report.problems,
                }
            )
        )
    else:
        formats = ", ".join(f"format {k}: {v}" for k, v in sorted(report.formats.items()))
        say(f"{report.path}: {report.sessions} sessions, {report.events} events ({formats})")
        for problem in report.problems:
            say(f"problem: {problem}")
        if report.ok:
            say("ok")
        else:
            say(
                f"{len(report.problems)} problems; `steerable-bridge sessions export ID` salvages"
                " every readable event of a session"
            )
    return 0 if report.ok else 1


_ACTIONS = {
    "list": _list,
    "show": _show,
    "export": _export,
    "delete": _delete,
    "check": _check,
    "claim": claim,
}


def _record_json(record: SessionRecord) -> dict[str, object]:
    return {
        "session_id": record.session_id,
        "cwd": record.cwd,
        "title": record.title,
        "model": record.model,
        "created_at": record.created_at,
        "updated_at": record.updated_at,
    }


def _one(text: str) -> str:
    """A field shown on one line: newlines and tabs in it are escaped too."""
    return printable(text, layout=False)


def _when(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")
