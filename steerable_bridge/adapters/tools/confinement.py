"""The sandbox policy for processes tools start, and what it decides for each of them.

`CommandPolicy` is what the user chose (`--sandbox`, `--sandbox-net`, `--mcp-net`,
`--pass-env`); commands (`local_env.py`) and stdio MCP servers (`kit.py`) both ask
`confinement(policy)` what they get: `bwrap` when bubblewrap works here (probed once,
`bwrap.py`) and the mode is not `off`, else `none` — and under `require` they are refused
instead (`refusal()`: code `sandbox_unavailable`, remedy "install bubblewrap or pass
--sandbox off"). A fallback is never silent: `startup_notice(policy)` is the line a command
prints on stderr when it starts and `auto` found no working bubblewrap (or `require` will
refuse), the first unconfined process logs a warning, and every result says `none`.
`confine(policy, program, ...)` wraps a command line in the sandbox. Nothing here starts a
process except the probe.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from steerable_bridge.adapters.tools import bwrap
from steerable_bridge.adapters.tools.agent_files import AGENT_FILES, AgentFiles
from steerable_bridge.runtime.ports.environment import WorkspaceError
from steerable_bridge.runtime.values import Sandbox

__all__ = [
    "DEFAULT_POLICY",
    "REMEDY",
    "CommandPolicy",
    "SandboxMode",
    "confine",
    "confinement",
    "refusal",
    "startup_notice",
]

log = logging.getLogger(__name__)

SandboxMode = Literal["auto", "require", "off"]
REMEDY = "install bubblewrap (apt-get install bubblewrap) or pass --sandbox off"
_warned: set[str] = set()


@dataclass(frozen=True, slots=True, kw_only=True)
class CommandPolicy:
    """How tool processes run: `pass_env` lists secret-looking variables they may still
    see; `sandbox` and `network` decide a command's confinement, `mcp_network` the default
    network of a stdio MCP server (a server's own setting overrides it); `bwrap_path` is
    the bubblewrap executable (None: there is none)."""

    pass_env: frozenset[str] = frozenset()
    sandbox: SandboxMode = "auto"
    network: bool = False
    mcp_network: bool = True
    bwrap_path: str | None = dataclasses.field(default_factory=bwrap.find_bwrap)


DEFAULT_POLICY = CommandPolicy()


async def confinement(policy: CommandPolicy, what: str = "commands") -> Sandbox:
    """`bwrap` or `none` for the next process `policy` governs (see the module docstring)."""
    if policy.sandbox == "off":
        return "none"
    if await bwrap.probe(policy.bwrap_path):
        return "bwrap"
    if policy.sandbox == "auto" and what not in _warned:
        _warned.add(what)
        log.warning(
            "bubblewrap (bwrap) is not usable here, so %s are NOT sandboxed: they can read"
            " this process's environment through /proc and your home folder; %s",
            what,
            REMEDY,
        )
    return "none"


def refusal(what: str) -> WorkspaceError:
    """The error for a process `--sandbox require` will not start unconfined."""
    return WorkspaceError(
        "sandbox_unavailable",
        f"{what} must run in a sandbox (--sandbox require) but bubblewrap cannot create one"
        f" here; {REMEDY}",
    )


def startup_notice(policy: CommandPolicy) -> str | None:
    """The warning to print when a command starts, or None when the sandbox works (or the
    user turned it off). Probes bubblewrap now (blocking, once per process)."""
    if policy.sandbox == "off" or bwrap.probe_now(policy.bwrap_path):
        return None
    where = policy.bwrap_path or "no bwrap on PATH"
    if policy.sandbox == "require":
        return (
            f"warning: bubblewrap cannot create a sandbox here ({where}); with --sandbox"
            f" require every command and stdio MCP server will be refused; {REMEDY}"
        )
    return (
        f"warning: bubblewrap cannot create a sandbox here ({where}); commands and stdio MCP"
        " servers will run UNSANDBOXED (enforcement: none) and can read this process's"
        f" environment and your home folder; {REMEDY}"
    )


def confine(
    policy: CommandPolicy,
    program: Sequence[str],
    *,
    cwd: str,
    writable: Sequence[str],
    network: bool,
    nproc: int | None = None,
    private: AgentFiles = AGENT_FILES,
    shown: Sequence[str] = (),
) -> list[str]:
    """`program` inside bubblewrap (call only when `confinement` said `bwrap`), with the
    agent's own files inside `writable` (`private`) read-only or hidden, and `shown`
    (beside the toolchain folders) visible read-only."""
    if policy.bwrap_path is None:
        raise refusal("this process")
    return bwrap.confined_argv(
        program,
        bwrap=policy.bwrap_path,
        cwd=cwd,
        writable=writable,
        network=network,
        nproc=nproc,
        masked=private.masks(writable),
        shown=(*bwrap.toolchain_paths(), *shown),
    )
