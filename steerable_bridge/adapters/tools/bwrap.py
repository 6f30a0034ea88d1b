"""bubblewrap (`bwrap`) command lines that confine one command or MCP server, and a probe.

`sandboxed_argv(command, ...)` builds the argv `LocalEnvironment.run` starts instead of
`/bin/sh -c COMMAND` (`confined_argv(program, ...)` the same for any command line, such as
a stdio MCP server's): the whole filesystem mounted read-only, with the user's home,
`/root`, `/home` and `/run` (agent sockets, container runtimes) hidden under empty tmpfs
mounts — except the home's toolchain folders (`TOOLCHAIN_DIRS`: `.local/bin`, `.cargo/bin`,
`.rustup`, `.nvm`, uv's Pythons, ...), shown read-only so `cargo`, `node` or a uv-managed
`python` still run, while `.ssh`, `.aws`, `.config` and the rest stay hidden; the workspace
roots bound writable over that; a private `/tmp` and `/dev`; a fresh `/proc` in a new PID
namespace (so killing the sandbox's first process ends every process it started); no
capabilities; a new IPC, UTS and — unless `network=True` — network namespace, whose only
interface is its own loopback. `--die-with-parent` ties the sandbox to the `bwrap` process
the caller kills on timeout or cancel. When `prlimit` is installed the command also runs
under an `RLIMIT_NPROC` a fixed margin above the processes already running, so a fork bomb
stops at that margin (the kernel does not apply the limit to root; there the PID namespace
and the command's time limit bound it). `probe(bwrap)` (`probe_now`, blocking, at start-up)
starts one empty sandbox with the same namespaces, once per process, and answers whether
confinement works here. The module only builds argument lists and runs the probe; it never
runs the user's command itself.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
from collections.abc import Sequence

import anyio

__all__ = [
    "NPROC_MARGIN",
    "TOOLCHAIN_DIRS",
    "confined_argv",
    "find_bwrap",
    "hidden_paths",
    "nproc_limit",
    "probe",
    "probe_now",
    "program_paths",
    "sandboxed_argv",
    "toolchain_paths",
]

log = logging.getLogger(__name__)

NPROC_MARGIN = 256
"""Processes a sandboxed command may add to those running when it starts."""

TOOLCHAIN_DIRS = (
    ".local/bin",
    ".local/share/uv/python",
    ".local/share/uv/tools",
    ".cargo/bin",
    ".rustup",
    ".nvm",
    ".pyenv",
    ".volta",
    ".bun/bin",
    ".deno/bin",
    "go/bin",
    ".sdkman/candidates",
)
"""Home folders (relative) holding programs rather than secrets; shown read-only."""

_PROBE_TIMEOUT_S = 10.0
_probes: dict[str, bool] = {}


def find_bwrap() -> str | None:
    """The `bwrap` executable on PATH, or None."""
    return shutil.which("bwrap")


def toolchain_paths(home: str | None = None) -> tuple[str, ...]:
    """The `TOOLCHAIN_DIRS` that exist in `home` (default: this user's), resolved."""
    base = home or os.path.expanduser("~")
    found: list[str] = []
    for relative in TOOLCHAIN_DIRS:
        path = os.path.join(base, relative)
        if os.path.isdir(path):
            found.append(os.path.realpath(path))
    return tuple(found)


def program_paths(program: Sequence[str], cwd: str) -> tuple[str, ...]:
    """What a confined server must see of its own install, read-only, though it lies in a
    hidden folder (`/tmp`, a home): the folder of its executable (the whole virtual
    environment when that is a venv's `bin/`) and the folder of each argument that names an
    existing file (`server.py`). Only for programs the user configured (MCP servers), never
    for a model's command."""
    found: list[str] = []
    candidates: list[str] = []
    if program:
        candidates.append(shutil.which(program[0]) or os.path.join(cwd, program[0]))
    candidates += [os.path.join(cwd, arg) for arg in program[1:] if os.sep in arg]
    for path in candidates:
        if not os.path.isfile(path):
            continue
        folder = os.path.dirname(os.path.abspath(path))
        if os.path.isfile(os.path.join(os.path.dirname(folder), "pyvenv.cfg")):
            folder = os.path.dirname(folder)  # the venv: its lib/ holds the server's packages
        if folder != "/" and folder not in found:
            found.append(folder)
    return tuple(found)


def hidden_paths(home: str | None = None) -> tuple[str, ...]:
    """Existing folders a command must not read: homes, `/root`, `/run`."""
    candidates = ["/root", "/home", "/run", home or os.path.expanduser("~")]
    found: list[str] = []
    for path in candidates:
        real = os.path.realpath(path)
        if real != "/" and os.path.isdir(real) and real not in found:
            found.append(real)
    return tuple(found)


def sandboxed_argv(
    command: str,
    *,
    bwrap: str,
    cwd: str,
    writable: Sequence[str],
    network: bool = False,
    nproc: int | None = None,
) -> list[str]:
    """The argv that runs `/bin/sh -c command` confined (see the module docstring)."""
    return confined_argv(
        ["/bin/sh", "-c", command],
        bwrap=bwrap,
        cwd=cwd,
        writable=writable,
        network=network,
        nproc=nproc,
    )


def confined_argv(
    program: Sequence[str],
    *,
    bwrap: str,
    cwd: str,
    writable: Sequence[str],
    network: bool = False,
    hidden: Sequence[str] | None = None,
    shown: Sequence[str] | None = None,
    nproc: int | None = None,
    masked: Sequence[str] = (),
) -> list[str]:
    """The argv that runs `program` (a command line, looked up on the sandbox's PATH)
    confined: the same mounts and namespaces for a shell command and an MCP server.
    `masked` is mount arguments laid over the writable roots (the agent's own files in
    them, `agent_files.AgentFiles.masks`)."""
    argv: list[str] = []
    prlimit = shutil.which("prlimit") if nproc is not None else None
    if prlimit is not None:
        argv += [prlimit, f"--nproc={nproc}:{nproc}", "--"]
    argv += [
        bwrap,
        "--die-with-parent",
        "--new-session",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--cap-drop",
        "ALL",
    ]
    if not network:
        argv.append("--unshare-net")
    argv += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    for path in hidden_paths() if hidden is None else hidden:
        argv += ["--tmpfs", path]
    for path in toolchain_paths() if shown is None else shown:
        argv += ["--ro-bind", path, path]
    if network and os.path.isdir("/run/systemd/resolve"):  # resolv.conf often points here
        argv += ["--ro-bind", "/run/systemd/resolve", "/run/systemd/resolve"]
    for root in writable:
        argv += ["--bind", root, root]
    argv += masked
    argv += ["--chdir", cwd, "--", *program]
    return argv


def nproc_limit() -> int:
    """`NPROC_MARGIN` above the processes running now (an upper bound of this user's)."""
    try:
        running = sum(1 for entry in os.listdir("/proc") if entry.isdigit())
    except OSError:
        running = 1024
    return running + NPROC_MARGIN


async def probe(bwrap: str | None) -> bool:
    """Can `bwrap` start a sandbox with our namespaces here? Asked once per executable
    (two first callers at the same moment may both ask; the answers agree)."""
    if bwrap is None:
        return False
    if bwrap not in _probes:
        _probes[bwrap] = await _try(bwrap)
    return _probes[bwrap]


def probe_now(bwrap: str | None) -> bool:
    """`probe`, blocking: for start-up, before an event loop runs (shares its answer)."""
    if bwrap is None:
        return False
    if bwrap not in _probes:
        try:
            result = subprocess.run(
                _probe_argv(bwrap),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                check=False,
                start_new_session=True,
                timeout=_PROBE_TIMEOUT_S,
            )
        except (OSError, subprocess.TimeoutExpired) as error:
            log.warning("bwrap probe failed: %s", error)
            _probes[bwrap] = False
        else:
            _probes[bwrap] = _judge(result.returncode, result.stderr)
    return _probes[bwrap]


def _probe_argv(bwrap: str) -> list[str]:
    program = ["/bin/sh", "-c", "true"]
    return confined_argv(program, bwrap=bwrap, cwd="/", writable=(), hidden=(), shown=())


async def _try(bwrap: str) -> bool:
    try:
        with anyio.fail_after(_PROBE_TIMEOUT_S):
            result = await anyio.run_process(
                _probe_argv(bwrap), stdin=subprocess.DEVNULL, check=False, start_new_session=True
            )
    except (OSError, TimeoutError) as error:
        log.warning("bwrap probe failed: %s", error)
        return False
    return _judge(result.returncode, result.stderr)


def _judge(returncode: int, stderr: bytes) -> bool:
    if returncode != 0:
        detail = stderr.decode(errors="replace").strip()[:300]
        log.warning("bwrap cannot create a sandbox here (exit %s): %s", returncode, detail)
        return False
    return True
