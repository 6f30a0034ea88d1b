"""The permission port: may this tool call run?

Before a tool that is not read-only runs, the loop asks the session's `PermissionPolicy`.
`verdict(request)` answers at once: `allow`, `deny` (with a reason the model is told),
`ask` (the loop logs `permission_requested`, awaits `ask(request)` within a timeout and logs
`permission_resolved`) or `defer` (the run stops with stop reason `interrupted` so the client
can answer in its next run — the AG-UI approval flow). Remembered "always" answers are kept
in the log and consulted by the loop before the policy, so they survive a reload.

Modes (ACP `session/set_mode`): `default` asks before edit / delete / move / execute tools,
`accept-edits` allows edits and asks for the rest, `read-only` denies every non-read tool
without asking — and network tools (kind `fetch`, which otherwise run without asking).
Besides the four ACP answers, `reject_stop` ("Reject and stop") rejects the call and ends
the turn with stop reason `rejected`. `ModePolicy` implements them over any `Asker`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal, Protocol

from steerable_bridge.runtime.events import PermissionOutcome
from steerable_bridge.runtime.values import PermissionOption, ToolCall, ToolKind

__all__ = [
    "DEFAULT_OPTIONS",
    "MODES",
    "Approval",
    "Asker",
    "ModePolicy",
    "PermissionAnswer",
    "PermissionPolicy",
    "PermissionRequest",
    "StaticPolicy",
    "Verdict",
]

Verdict = Literal["allow", "deny", "ask", "defer"]
Approval = Literal["ask", "all", "none"]

DEFAULT_OPTIONS: tuple[PermissionOption, ...] = (
    PermissionOption(option_id="allow_once", name="Allow once", kind="allow_once"),
    PermissionOption(option_id="allow_always", name="Always allow", kind="allow_always"),
    PermissionOption(option_id="reject_once", name="Reject", kind="reject_once"),
    PermissionOption(option_id="reject_always", name="Always reject", kind="reject_always"),
    PermissionOption(option_id="reject_stop", name="Reject and stop", kind="reject_once"),
)
"""`reject_stop` rejects the call and ends the turn (stop reason `rejected`)."""

MODES: dict[str, tuple[str, str]] = {
    "default": ("Default", "Ask before editing files or running commands"),
    "accept-edits": ("Accept edits", "Edit files without asking; ask before running commands"),
    "read-only": ("Read only", "Never edit or run anything; only read and search"),
}
"""Mode id → (name, description)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PermissionRequest:
    """A tool call waiting for permission, with what a person needs to decide."""

    session_id: str
    call: ToolCall
    tool_kind: ToolKind
    title: str
    options: tuple[PermissionOption, ...] = DEFAULT_OPTIONS


@dataclass(frozen=True, slots=True, kw_only=True)
class PermissionAnswer:
    """The person's answer; `option_id` is the option they picked (None when cancelled)."""

    outcome: PermissionOutcome
    option_id: str | None = None


class PermissionPolicy(Protocol):
    """Decides whether a tool call that needs permission may run."""

    def verdict(self, request: PermissionRequest) -> tuple[Verdict, str]:
        """(verdict, reason): reason is what the model is told when denied."""

    async def ask(self, request: PermissionRequest) -> PermissionAnswer:
        """Ask a person (only called after verdict `ask`)."""


Asker = Callable[[PermissionRequest], Awaitable[PermissionAnswer]]


async def _refuse(request: PermissionRequest) -> PermissionAnswer:
    return PermissionAnswer(outcome="reject_once", option_id="reject_once")


class StaticPolicy:
    """`--approve all` allows everything, `none` denies everything, `ask` asks `asker`."""

    def __init__(self, approval: Approval, asker: Asker = _refuse, *, defer: bool = False) -> None:
        self.approval = approval
        self._asker = asker
        self._defer = defer

    def verdict(self, request: PermissionRequest) -> tuple[Verdict, str]:
        if self.approval == "all" or request.tool_kind == "fetch":
            return "allow", ""
        if self.approval == "none":
            return "deny", "tools that change things are disabled (--approve none)"
        return ("defer" if self._defer else "ask"), ""

    async def ask(self, request: PermissionRequest) -> PermissionAnswer:
        return await self._asker(request)


class ModePolicy:
    """ACP modes over an asker; `mode` is read on every verdict so changes apply at once."""

    def __init__(
        self, mode: Callable[[], str], asker: Asker = _refuse, *, defer: bool = False
    ) -> None:
        self._mode = mode
        self._asker = asker
        self._defer = defer
        """No one to ask here: what the mode leaves to a person waits for the client's
        next run (AG-UI interrupts) instead."""

    def verdict(self, request: PermissionRequest) -> tuple[Verdict, str]:
        mode = self._mode()
        if mode == "read-only" and request.tool_kind == "fetch":
            return "deny", "the session is in read-only mode, which keeps tools off the network"
        if mode == "read-only":
            return "deny", "the session is in read-only mode; switch mode to allow changes"
        if request.tool_kind == "fetch":
            return "allow", ""
        if mode == "accept-edits" and request.tool_kind == "edit":
            return "allow", ""
        return ("defer" if self._defer else "ask"), ""

    async def ask(self, request: PermissionRequest) -> PermissionAnswer:
        return await self._asker(request)
