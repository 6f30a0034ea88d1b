"""The local environment: the session's files on this machine's disk and its subprocesses.

`LocalEnvironment` implements the runtime's `Environment` port over a `Workspace`: every
path is confined to the workspace roots and opened race-free (`paths.py`), only regular
files are opened (a FIFO or device is refused before it can block); text files larger than
`max_file_bytes` must be read in parts and binary files are refused; a part (`line` /
`limit`) is streamed and bounded too (`reading.py`: at most `max_file_bytes`, each line cut
at `max_line_bytes`), and a read stops when its caller is cancelled; writes go
to a new file renamed over the old one (`replace_in`), so a hard link is never written
through. `run`
starts `/bin/sh -c COMMAND` in a process group of its own (`start_new_session`) and a
`containment.py` holder (a cgroup of its own, else an environment tag, so children that
leave the group by `setsid` are held too), keeps the last `output_limit` bytes of its
merged stdout/stderr, and kills the group and everything held — on timeout, on
cancellation, and once the command has exited, so nothing it started in the background
outlives it; if this process dies first (even by SIGKILL), `deathwatch.py` kills them.
Commands get this process's environment without its secrets (`tool_env.py`;
`policy.pass_env` names the ones to keep), and run inside a bubblewrap sandbox (`bwrap.py`)
as `confinement.py` decides from `policy.sandbox`: `auto` sandboxes when `bwrap` works
here (else they run unconfined, with a warning), `require` refuses to run a command
without it (`sandbox_unavailable`), `off` never sandboxes; `policy.network` lets
sandboxed commands use the network. A sandboxed command's process count is bounded
(`RLIMIT_NPROC`, and `pids.max` where its cgroup can count: `pids_cgroup.py`).
`sandbox()` says which of `bwrap` / `none` a command will get, and every `CommandResult`
carries it. `run_argv` is the same machinery for tools that run a program directly
(ripgrep). Blocking disk calls run in worker threads; every wait is bounded.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import secrets
import signal
import stat
import subprocess
import threading
from collections.abc import Sequence
from dataclasses import dataclass

import anyio
import anyio.abc

from steerable_bridge.adapters.tools import bwrap
from steerable_bridge.adapters.tools.confinement import (
    DEFAULT_POLICY,
    CommandPolicy,
    SandboxMode,
    confine,
    confinement,
    refusal,
)
from steerable_bridge.adapters.tools.containment import Containment
from steerable_bridge.adapters.tools.deathwatch import arm, gated, resolved
from steerable_bridge.adapters.tools.paths import Workspace, os_error
from steerable_bridge.adapters.tools.reading import read_window
from steerable_bridge.adapters.tools.stoppable import run_stoppable
from steerable_bridge.adapters.tools.tool_env import tool_environ
from steerable_bridge.runtime.ports.environment import CommandResult, OutputSink, WorkspaceError
from steerable_bridge.runtime.values import Sandbox

__all__ = [
    "DEFAULT_POLICY",
    "CommandPolicy",
    "LocalEnvironment",
    "SandboxMode",
    "is_binary",
    "run_argv",
]

log = logging.getLogger(__name__)


BINARY_SNIFF_BYTES = 8192
_KILL_GRACE_S = 0.5
_DRAIN_S = 1.0
_POLL_S = 0.02


def is_binary(sample: bytes) -> bool:
    """A NUL byte in the first block means binary (the rule git and ripgrep use)."""
    return b"\x00" in sample[:BINARY_SNIFF_BYTES]


@dataclass(slots=True)
class LocalEnvironment:
    """Disk and processes of one workspace; see the module docstring."""

    workspace: Workspace
    max_file_bytes: int = 10 * 1024 * 1024
    max_line_bytes: int = 1024 * 1024
    policy: CommandPolicy = DEFAULT_POLICY

    async def read_text(
        self, path: str, *, line: int | None = None, limit: int | None = None
    ) -> str:
        real = self.workspace.resolve(path)
        return await run_stoppable(lambda stop: self._read(real, line, limit, stop))

    async def write_text(self, path: str, content: str) -> None:
        real = self.workspace.resolve(path)
        await anyio.to_thread.run_sync(self._write, real, content)

    async def run(
        self,
        command: str,
        *,
        cwd: str,
        timeout_s: float,
        output_limit: int,
        on_output: OutputSink | None = None,
    ) -> CommandResult:
        real_cwd = self.workspace.resolve(cwd)
        if not await anyio.to_thread.run_sync(os.path.isdir, real_cwd):
            raise WorkspaceError(
                "not_a_directory", f"{cwd} is not a directory; run the command from a folder"
            )
        confined = await self.sandbox()
        policy = self.policy
        argv = ["/bin/sh", "-c", command]
        limit: int | None = None
        if confined == "bwrap":
            argv = confine(
                policy,
                argv,
                cwd=real_cwd,
                writable=self.workspace.roots,
                network=policy.network,
                nproc=bwrap.nproc_limit(),
                private=self.workspace.private,
            )
            limit = bwrap.NPROC_MARGIN
        elif policy.sandbox == "require":
            raise refusal("commands")
        result = await run_argv(
            argv,
            cwd=real_cwd,
            timeout_s=timeout_s,
            output_limit=output_limit,
            env=tool_environ(policy.pass_env),
            pids_max=limit,
            on_output=on_output,
        )
        return dataclasses.replace(result, sandbox=confined)

    async def sandbox(self) -> Sandbox:
        return await confinement(self.policy)

    # -- blocking halves, run in worker threads ----------------------------------------------

    def _read(self, real: str, line: int | None, limit: int | None, stop: threading.Event) -> str:
        fd = self.workspace.open_file(real, os.O_RDONLY)
        with os.fdopen(fd, "rb") as handle:
            head = handle.read(BINARY_SNIFF_BYTES)
            if is_binary(head):
                size = os.fstat(handle.fileno()).st_size
                raise WorkspaceError(
                    "binary_file",
                    f"{real} is a binary file ({size} bytes); only text files can be read",
                )
            if line is None and limit is None:
                size = os.fstat(handle.fileno()).st_size
                if size > self.max_file_bytes:
                    raise WorkspaceError(
                        "file_too_large",
                        f"{real} is {size} bytes, more than {self.max_file_bytes} can be read at"
                        " once; read it in parts with line and limit",
                    )
                # Bounded even when the file grows after the fstat.
                rest = handle.read(max(self.max_file_bytes - len(head), 0))
                return (head + rest).decode("utf-8", errors="replace")
            handle.seek(0)
            window = read_window(
                handle,
                first=max(line or 1, 1),
                limit=limit,
                max_bytes=self.max_file_bytes,
                max_line_bytes=self.max_line_bytes,
                stop=stop,
            )
            return window.decode("utf-8", errors="replace")

    def _write(self, real: str, content: str) -> None:
        parent, name = os.path.split(real)
        if not os.path.isdir(parent):
            os.makedirs(parent, exist_ok=True)
            if not self.workspace.contains(os.path.realpath(parent)):
                raise WorkspaceError(
                    "outside_workspace", f"{parent} leads outside the workspace; not written"
                )
        data = content.encode("utf-8")
        dir_fd = self.workspace.open_dir(parent)
        try:
            replace_in(dir_fd, name, data, real)
        finally:
            os.close(dir_fd)


def replace_in(dir_fd: int, name: str, data: bytes, shown: str) -> None:
    """Give `name` (in the checked directory `dir_fd`) the content `data`.

    Written to a new file beside it and renamed over it, so the directory entry is replaced
    and never followed: an existing hard link to a file outside the workspace, or a
    symbolic link swapped in after the check, keeps its target untouched (the link is
    simply no longer shared), and a failed write (disk full) leaves the old content whole.
    The new file takes the old one's permission bits. Only when the directory itself is not
    writable is the file rewritten in place, and then only if it has no other link.
    """
    try:
        old: os.stat_result | None = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        old = None
    except OSError as err:
        raise os_error(shown, err) from err
    if old is not None and stat.S_ISLNK(old.st_mode):
        raise WorkspaceError(
            "outside_workspace",
            f"{shown} became a symbolic link after the path was checked; it was not written",
        )
    if old is not None and stat.S_ISDIR(old.st_mode):
        raise WorkspaceError("is_a_directory", f"{shown} is a directory, not a file")
    if old is not None and not stat.S_ISREG(old.st_mode):
        raise WorkspaceError(
            "not_a_regular_file", f"{shown} is a device, pipe or socket; only files can be written"
        )
    temp = f".{secrets.token_hex(6)}.steerable-write"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(temp, flags, 0o666, dir_fd=dir_fd)
    except PermissionError as err:
        if old is None:
            raise os_error(shown, err) from err
        _rewrite_in_place(dir_fd, name, data, shown)
        return
    except OSError as err:
        raise os_error(shown, err) from err
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            if old is not None:
                os.fchmod(handle.fileno(), stat.S_IMODE(old.st_mode))
        os.replace(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException as err:
        with contextlib.suppress(OSError):
            os.unlink(temp, dir_fd=dir_fd)
        if isinstance(err, OSError):
            raise os_error(shown, err) from err
        raise


def _rewrite_in_place(dir_fd: int, name: str, data: bytes, shown: str) -> None:
    """The fallback for a read-only folder: truncate and write the file itself, refused
    when another hard link shares it (that link may lie outside the workspace)."""
    try:
        fd = os.open(name, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError as err:
        raise os_error(shown, err) from err
    try:
        with os.fdopen(fd, "wb") as handle:
            opened = os.fstat(handle.fileno())
            if not stat.S_ISREG(opened.st_mode) or opened.st_nlink > 1:
                raise WorkspaceError(
                    "hard_linked",
                    f"{shown} shares its content with another hard link, and its folder is"
                    " read-only so it cannot be replaced safely; make the folder writable",
                )
            handle.truncate(0)  # no O_TRUNC: the descriptor was checked before any change
            handle.write(data)
    except OSError as err:
        raise os_error(shown, err) from err


async def run_argv(
    argv: Sequence[str],
    *,
    cwd: str,
    timeout_s: float,
    output_limit: int,
    env: dict[str, str] | None = None,
    pids_max: int | None = None,
    on_output: OutputSink | None = None,
) -> CommandResult:
    """Run `argv` in its own process group and, where one can be made, its own cgroup
    (`pids_max` processes at most, where the hierarchy counts them); merged output, the
    last `output_limit` bytes kept, each chunk handed to `on_output` as it arrives.
    Whatever it started is killed when it ends."""
    held = Containment.open(pids_max)
    try:
        return await _run_contained(argv, held, cwd, timeout_s, output_limit, env, on_output)
    finally:
        await held.close()


async def _run_contained(
    argv: Sequence[str],
    held: Containment,
    cwd: str,
    timeout_s: float,
    output_limit: int,
    env: dict[str, str] | None,
    on_output: OutputSink | None = None,
) -> CommandResult:
    try:
        program = held.argv(resolved(list(argv), env))
        process = await anyio.open_process(
            gated(program, env),
            cwd=cwd,
            env=held.environ(env),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    except OSError as err:
        raise WorkspaceError(
            "spawn_failed", f"could not start {argv[0]}: {err.strerror or err}"
        ) from err
    watch = await arm(process, held)  # from here it all dies with this process, even by SIGKILL
    buffer = bytearray()
    dropped = False
    eof = anyio.Event()

    async def pump() -> None:
        nonlocal dropped
        assert process.stdout is not None
        try:
            async for chunk in process.stdout:
                if on_output is not None:
                    on_output(chunk)
                buffer.extend(chunk)
                if len(buffer) > output_limit:
                    del buffer[: len(buffer) - output_limit]
                    dropped = True
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            pass
        finally:
            eof.set()

    timed_out = stopped = False
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(pump)
            with anyio.move_on_after(timeout_s) as deadline:
                await _wait_exit(process)
            timed_out = deadline.cancelled_caught
            await _stop_group(process)
            stopped = True
            with anyio.move_on_after(_DRAIN_S):
                await eof.wait()
            tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            if not stopped:
                await _stop_group(process)
            await held.kill()  # what left the group by `setsid` or a double fork
            await _release(process)
            await watch.release()
    text = bytes(buffer).decode("utf-8", errors="replace")
    return CommandResult(
        exit_code=None if timed_out else process.returncode,
        output=text,
        truncated=dropped,
        timed_out=timed_out,
    )


async def _stop_group(process: anyio.abc.Process) -> None:
    """SIGTERM the process group; once the command has exited (or after a short grace),
    SIGKILL whatever is left of the group. Bounded."""
    pgid = process.pid  # start_new_session: the child leads its own group
    if not _signal_group(pgid, signal.SIGTERM):
        return
    with anyio.move_on_after(_KILL_GRACE_S):
        await _wait_exit(process)
    _signal_group(pgid, signal.SIGKILL)
    with anyio.move_on_after(_KILL_GRACE_S):
        await _wait_exit(process)
        while _group_alive(pgid):  # noqa: ASYNC110 - the kernel's state is what we wait on
            await anyio.sleep(_POLL_S)


async def _wait_exit(process: anyio.abc.Process) -> None:
    """Poll for the exit.

    Not `process.wait()`: on asyncio it also waits for the pipe to close, which a
    background grandchild can hold open forever. Callers bound this with a deadline.
    """
    while process.returncode is None:  # noqa: ASYNC110
        await anyio.sleep(_POLL_S)


async def _release(process: anyio.abc.Process) -> None:
    """Close the pipe and reap the child, bounded even if an escaped daemon holds the pipe."""
    if process.stdout is not None:
        with anyio.move_on_after(_DRAIN_S):
            await process.stdout.aclose()
    with anyio.move_on_after(_DRAIN_S):
        await process.wait()


def _group_alive(pgid: int) -> bool:
    """Does any process of the group still run? Zombies (exited, not yet reaped) do not."""
    if not _signal_group(pgid, 0):
        return False
    try:
        entries = os.listdir("/proc")
    except OSError:
        return True  # no /proc: the signal answered, so assume it runs
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            return True
    return False


def _signal_group(pgid: int, sig: int) -> bool:
    """Send `sig` to the group; False when no member is left (or it is not ours)."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True
