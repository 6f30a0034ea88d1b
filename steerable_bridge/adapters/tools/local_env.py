"""The local environment: the session's files on this machine's disk and its subprocesses.

`LocalEnvironment` implements the runtime's `Environment` port over a `Workspace`: every
path is confined to the workspace roots and opened race-free (`paths.py`), only regular
files are opened (a FIFO or device is refused before it can block); text files larger than
`max_file_bytes` must be read in parts and binary files are refused; a part (`line` /
`limit`) is streamed and bounded too (`reading.py`: at most `max_file_bytes`, each line cut
at `max_line_bytes`), and a read stops when its caller is cancelled. `run`
starts `/bin/sh -c COMMAND` in a process group of its own (`start_new_session`), keeps the
last `output_limit` bytes of its merged stdout/stderr, and kills the whole group — on
timeout, on cancellation, and once the command has exited, so nothing it started in the
background outlives it; if this process dies first (even by SIGKILL), `deathwatch.py` kills
the group. Commands get this process's environment without its secrets
(`tool_env.py`; `policy.pass_env` names the ones to keep), and run inside a bubblewrap
sandbox (`bwrap.py`) as `policy.sandbox` says: `auto` sandboxes when `bwrap` works here
(probed once; when it does not, a warning is logged once and commands run unconfined),
`require` refuses to run a command without it, `off` never sandboxes; `policy.network`
lets sandboxed commands use the network. A sandboxed command's process count is bounded
(`RLIMIT_NPROC`, and a pids cgroup where this process may create one: `pids_cgroup.py`).
`sandbox()` says which of `bwrap` / `none` a command will get, and every `CommandResult`
carries it. `run_argv` is the same machinery
for tools that run a program directly (ripgrep). Blocking disk calls run in worker threads;
every wait is bounded.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import signal
import subprocess
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import anyio
import anyio.abc

from steerable_bridge.adapters.tools import bwrap, pids_cgroup
from steerable_bridge.adapters.tools.deathwatch import arm, gated
from steerable_bridge.adapters.tools.paths import Workspace
from steerable_bridge.adapters.tools.reading import read_window
from steerable_bridge.adapters.tools.stoppable import run_stoppable
from steerable_bridge.adapters.tools.tool_env import tool_environ
from steerable_bridge.runtime.environment import CommandResult, EnvironmentError
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

SandboxMode = Literal["auto", "require", "off"]
_warned_unconfined = False

BINARY_SNIFF_BYTES = 8192
_KILL_GRACE_S = 0.5
_DRAIN_S = 1.0
_POLL_S = 0.02


def is_binary(sample: bytes) -> bool:
    """A NUL byte in the first block means binary (the rule git and ripgrep use)."""
    return b"\x00" in sample[:BINARY_SNIFF_BYTES]


@dataclass(frozen=True, slots=True, kw_only=True)
class CommandPolicy:
    """How commands run: `pass_env` lists secret-looking variables they may still see;
    `sandbox` and `network` decide their confinement (see the module docstring)."""

    pass_env: frozenset[str] = frozenset()
    sandbox: SandboxMode = "auto"
    network: bool = False
    bwrap_path: str | None = dataclasses.field(default_factory=bwrap.find_bwrap)


DEFAULT_POLICY = CommandPolicy()


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
        self, command: str, *, cwd: str, timeout_s: float, output_limit: int
    ) -> CommandResult:
        real_cwd = self.workspace.resolve(cwd)
        if not await anyio.to_thread.run_sync(os.path.isdir, real_cwd):
            raise EnvironmentError(
                "not_a_directory", f"{cwd} is not a directory; run the command from a folder"
            )
        confined = await self.sandbox()
        policy = self.policy
        cgroup: str | None = None
        if confined == "bwrap" and policy.bwrap_path is not None:
            argv = bwrap.sandboxed_argv(
                command,
                bwrap=policy.bwrap_path,
                cwd=real_cwd,
                writable=self.workspace.roots,
                network=policy.network,
                nproc=bwrap.nproc_limit(),
            )
            cgroup = pids_cgroup.open_cgroup(bwrap.NPROC_MARGIN)
            if cgroup is not None:
                argv = pids_cgroup.enter_argv(cgroup, argv)
        elif policy.sandbox == "require":
            raise EnvironmentError(
                "sandbox_unavailable",
                "commands must run in a sandbox (--sandbox require) but bubblewrap cannot"
                " create one here; install it (Debian: apt-get install bubblewrap), allow"
                " unprivileged user namespaces, or start with --sandbox auto",
            )
        else:
            argv = ["/bin/sh", "-c", command]
        try:
            result = await run_argv(
                argv,
                cwd=real_cwd,
                timeout_s=timeout_s,
                output_limit=output_limit,
                env=tool_environ(policy.pass_env),
            )
        finally:
            if cgroup is not None:
                with anyio.CancelScope(shield=True):
                    await pids_cgroup.remove_cgroup(cgroup)
        return dataclasses.replace(result, sandbox=confined)

    async def sandbox(self) -> Sandbox:
        global _warned_unconfined
        if self.policy.sandbox == "off":
            return "none"
        if await bwrap.probe(self.policy.bwrap_path):
            return "bwrap"
        if self.policy.sandbox == "auto" and not _warned_unconfined:
            _warned_unconfined = True
            log.warning(
                "bubblewrap (bwrap) is not usable here, so commands the model runs are NOT"
                " sandboxed; install bubblewrap, or pass --sandbox off to say that is intended"
            )
        return "none"

    # -- blocking halves, run in worker threads ----------------------------------------------

    def _read(self, real: str, line: int | None, limit: int | None, stop: threading.Event) -> str:
        fd = self.workspace.open_file(real, os.O_RDONLY)
        with os.fdopen(fd, "rb") as handle:
            head = handle.read(BINARY_SNIFF_BYTES)
            if is_binary(head):
                size = os.fstat(handle.fileno()).st_size
                raise EnvironmentError(
                    "binary_file",
                    f"{real} is a binary file ({size} bytes); only text files can be read",
                )
            if line is None and limit is None:
                size = os.fstat(handle.fileno()).st_size
                if size > self.max_file_bytes:
                    raise EnvironmentError(
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
        parent = os.path.dirname(real)
        if not os.path.isdir(parent):
            os.makedirs(parent, exist_ok=True)
            if not self.workspace.contains(os.path.realpath(parent)):
                raise EnvironmentError(
                    "outside_workspace", f"{parent} leads outside the workspace; not written"
                )
        # No O_TRUNC: the descriptor is checked before a byte of the file changes.
        fd = self.workspace.open_file(real, os.O_WRONLY | os.O_CREAT)
        with os.fdopen(fd, "wb") as handle:
            handle.truncate(0)
            handle.write(content.encode("utf-8"))


async def run_argv(
    argv: Sequence[str],
    *,
    cwd: str,
    timeout_s: float,
    output_limit: int,
    env: dict[str, str] | None = None,
) -> CommandResult:
    """Run `argv` in its own process group; merged output, last `output_limit` bytes kept."""
    try:
        process = await anyio.open_process(
            gated(list(argv), env),
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    except OSError as err:
        raise EnvironmentError(
            "spawn_failed", f"could not start {argv[0]}: {err.strerror or err}"
        ) from err
    watch = await arm(process)  # from here the group dies with this process, even by SIGKILL
    buffer = bytearray()
    dropped = False
    eof = anyio.Event()

    async def pump() -> None:
        nonlocal dropped
        assert process.stdout is not None
        try:
            async for chunk in process.stdout:
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
