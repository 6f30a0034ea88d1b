"""The client validator's file-system and terminal steps, run on the client's side.

`file_system(walk)` writes a scratch file inside the session's cwd with `fs/write_text_file`
(when advertised), reads it back whole and with `line=2, limit=2` through
`fs/read_text_file`, and deletes it afterwards. `terminal(walk)` runs a short command through
`terminal/create` and grades `wait_for_exit` (exit code 3), `output` (the printed marker),
`release`, then starts a long sleep and grades `kill`. A capability the client did not
advertise is skipped, saying so. Every request is bounded by the walk's request deadline.
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
from acp import start_tool_call, tool_terminal_ref, update_tool_call

from steerable_bridge.conformance.validators.client_session import SCRATCH_LINES

if TYPE_CHECKING:
    from steerable_bridge.conformance.validators.client_session import WalkSteps

__all__ = ["file_system", "terminal"]


async def file_system(walk: WalkSteps) -> None:
    fs = walk.caps.fs
    can_read = bool(fs and fs.read_text_file)
    can_write = bool(fs and fs.write_text_file)
    scratch = Path(walk.path(f".steerable-validator-{walk.nonce}.txt"))
    sid = walk.session.id
    try:
        if can_write:
            _, problem = await walk.request(
                "fs/write_text_file",
                lambda: walk.conn.write_text_file(
                    session_id=sid, path=str(scratch), content=SCRATCH_LINES
                ),
            )
            if problem:
                walk.log.record("fs.write_text_file", "fail", problem)
            elif not can_read:
                on_disk = await _read_local(scratch)
                ok = on_disk == SCRATCH_LINES
                walk.log.record(
                    "fs.write_text_file",
                    "pass" if ok else "fail",
                    f"wrote {len(SCRATCH_LINES)} chars to {scratch.name}; on disk: {on_disk!r:.80}",
                )
        else:
            walk.log.record(
                "fs.write_text_file", "skipped", "client did not advertise fs.writeTextFile"
            )
        if not can_read:
            why = "client did not advertise fs.readTextFile"
            walk.log.record("fs.read_text_file", "skipped", why)
            walk.log.record("fs.read_text_file.line_limit", "skipped", why)
            return
        if not can_write or _failed(walk, "fs.write_text_file"):
            try:
                await anyio.Path(scratch).write_text(SCRATCH_LINES, encoding="utf-8")
            except OSError as err:
                why = f"could not create a scratch file in the session cwd: {err}"
                walk.log.record("fs.read_text_file", "skipped", why)
                walk.log.record("fs.read_text_file.line_limit", "skipped", why)
                return
        wrote = can_write and not _failed(walk, "fs.write_text_file")
        await _grade_reads(walk, scratch, wrote=wrote)
    finally:
        with contextlib.suppress(OSError):
            await anyio.Path(scratch).unlink()


def _failed(walk: WalkSteps, check_id: str) -> bool:
    return any(c.id == check_id and c.status == "fail" for c in walk.log.checks)


async def _grade_reads(walk: WalkSteps, scratch: Path, *, wrote: bool) -> None:
    sid = walk.session.id
    whole, problem = await walk.request(
        "fs/read_text_file", lambda: walk.conn.read_text_file(session_id=sid, path=str(scratch))
    )
    if whole is None:
        walk.log.record("fs.read_text_file", "fail", problem)
    else:
        ok = whole.content == SCRATCH_LINES
        walk.log.record(
            "fs.read_text_file",
            "pass" if ok else "fail",
            f"read back {len(whole.content)} chars, "
            + ("identical" if ok else f"expected {SCRATCH_LINES!r}, got {whole.content!r:.80}"),
        )
        if wrote:
            walk.log.record(
                "fs.write_text_file",
                "pass" if ok else "fail",
                "content written with fs/write_text_file round-trips through fs/read_text_file"
                if ok
                else "content read back differs from what fs/write_text_file wrote",
            )
    part, problem = await walk.request(
        "fs/read_text_file with line=2, limit=2",
        lambda: walk.conn.read_text_file(session_id=sid, path=str(scratch), line=2, limit=2),
    )
    if part is None:
        walk.log.record("fs.read_text_file.line_limit", "fail", problem)
        return
    ok = part.content.rstrip("\n") == "line 2\nline 3"
    walk.log.record(
        "fs.read_text_file.line_limit",
        "pass" if ok else "fail",
        f"line=2 limit=2 gave {part.content!r}" + ("" if ok else "; expected 'line 2\\nline 3\\n'"),
    )


async def terminal(walk: WalkSteps) -> None:
    ids = (
        "terminal.create",
        "terminal.output",
        "terminal.wait_for_exit",
        "terminal.kill",
        "terminal.release",
    )
    if not walk.caps.terminal:
        for check_id in (*ids, "update.tool_call.terminal"):
            walk.log.record(check_id, "skipped", "client did not advertise terminal")
        return
    sid, marker = walk.session.id, f"steerable-validator-{walk.nonce}"
    created, problem = await walk.request(
        "terminal/create",
        lambda: walk.conn.create_terminal(
            session_id=sid,
            command=sys.executable,
            args=["-c", f"print({marker!r}); raise SystemExit(3)"],
            cwd=walk.session.cwd,
            output_byte_limit=4096,
        ),
    )
    if created is None:
        for check_id in (*ids, "update.tool_call.terminal"):
            walk.log.record(
                check_id,
                "fail" if check_id == "terminal.create" else "skipped",
                problem or "terminal/create failed",
            )
        return
    tid = created.terminal_id
    walk.log.record(
        "terminal.create",
        "pass",
        f"created terminal {tid!r} running {Path(sys.executable).name} -c …",
    )
    call_id = f"validator-terminal-{walk.nonce}"
    await walk.grade_update(
        "update.tool_call.terminal",
        start_tool_call(
            call_id,
            "Validator: run a command",
            kind="execute",
            status="in_progress",
            content=[tool_terminal_ref(tid)],
        ),
        "tool_call with terminal content",
    )
    exited, problem = await walk.request(
        "terminal/wait_for_exit",
        lambda: walk.conn.wait_for_terminal_exit(session_id=sid, terminal_id=tid),
    )
    if exited is None:
        walk.log.record("terminal.wait_for_exit", "fail", problem)
    else:
        ok = exited.exit_code == 3
        walk.log.record(
            "terminal.wait_for_exit",
            "pass" if ok else "fail",
            f"exitCode {exited.exit_code}, signal {exited.signal} (expected exitCode 3)",
        )
    output, problem = await walk.request(
        "terminal/output", lambda: walk.conn.terminal_output(session_id=sid, terminal_id=tid)
    )
    if output is None:
        walk.log.record("terminal.output", "fail", problem)
    else:
        ok = marker in output.output and not output.truncated
        code = output.exit_status.exit_code if output.exit_status else None
        walk.log.record(
            "terminal.output",
            "pass" if ok else "fail",
            f"output {'contains' if marker in output.output else 'lacks'} the printed marker,"
            f" truncated={output.truncated}, exitStatus.exitCode={code}",
        )
    await walk.send(update_tool_call(call_id, status="completed"))
    await _release(walk, tid)
    await _kill(walk)


async def _release(walk: WalkSteps, tid: str) -> None:
    sid = walk.session.id
    _, problem = await walk.request(
        "terminal/release", lambda: walk.conn.release_terminal(session_id=sid, terminal_id=tid)
    )
    if problem:
        walk.log.record("terminal.release", "fail", problem)
    elif not walk.log.has("terminal.release"):
        walk.log.record("terminal.release", "pass", f"released terminal {tid!r}")


async def _kill(walk: WalkSteps) -> None:
    sid = walk.session.id
    created, problem = await walk.request(
        "terminal/create (long-running)",
        lambda: walk.conn.create_terminal(
            session_id=sid,
            command=sys.executable,
            args=["-c", "import time; time.sleep(60)"],
            cwd=walk.session.cwd,
        ),
    )
    if created is None:
        walk.log.record("terminal.kill", "fail", problem)
        return
    tid = created.terminal_id
    _, problem = await walk.request(
        "terminal/kill", lambda: walk.conn.kill_terminal(session_id=sid, terminal_id=tid)
    )
    if problem:
        walk.log.record("terminal.kill", "fail", problem)
    else:
        exited, problem = await walk.request(
            "terminal/wait_for_exit after kill",
            lambda: walk.conn.wait_for_terminal_exit(session_id=sid, terminal_id=tid),
        )
        if exited is None:
            walk.log.record("terminal.kill", "fail", f"killed, but {problem}")
        else:
            walk.log.record(
                "terminal.kill",
                "pass",
                f"a 60 s sleep ended after kill: exitCode {exited.exit_code},"
                f" signal {exited.signal}",
            )
    await _release(walk, tid)


async def _read_local(path: Path) -> str | None:
    try:
        return await anyio.Path(path).read_text(encoding="utf-8")
    except OSError:
        return None
