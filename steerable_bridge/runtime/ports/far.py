"""What a turn engine that drives another agent tells the port beyond running turns.

`LocalPort` runs every turn through `Agent.engine`. For a bridge that engine drives a far
agent (a child ACP agent, an AG-UI endpoint), which has its own answer to what a
conversation can do, its own modes and settings, and sometimes its own list of sessions.
An engine says so by implementing any of these Protocols, each optional: `Describes`
(what the port may advertise: load, fork, list, steer, its modes), `Settles` (modes and
config options are the far agent's: switching one asks it, and a mode or option it does
not have is refused with a `ValueError` naming what it has), `ListsFar` (the far agent's
own sessions: the port lists them after its own, leaving out those its conversations are
mapped to, and a conversation opened under such a session's id continues it). A
`FarConversation` is the narrow view of one conversation such a call needs: its ids,
folder, logged settings, and a way to log an event in it. Plain Protocols and values; no
behaviour here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from steerable_bridge.runtime.events import LoopEvent
from steerable_bridge.runtime.ports.port import PortInfo
from steerable_bridge.runtime.ports.storage import SessionRecord

__all__ = ["Describes", "FarConversation", "FarPage", "ListsFar", "Settles"]

Record = Callable[..., Awaitable[LoopEvent]]
"""`record(EventClass, **fields)`: log a conversation-level event (`Session.record`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FarConversation:
    """One conversation, as an engine's call outside a turn sees it."""

    conversation_id: str
    cwd: str
    config: Mapping[str, str]
    """Its logged settings (`config_changed`), the far session id among them."""
    mode: str
    record: Record


@dataclass(frozen=True, slots=True, kw_only=True)
class FarPage:
    """One page of the far agent's own sessions."""

    records: tuple[SessionRecord, ...]
    next_cursor: str | None = None


@runtime_checkable
class Describes(Protocol):
    """An engine whose far agent limits what the port may advertise."""

    def describe(self, info: PortInfo) -> PortInfo:
        """`info` (the runtime's own answer) as the far agent makes it; cheap, no I/O."""
        ...


@runtime_checkable
class Settles(Protocol):
    """An engine whose modes and config options are the far agent's."""

    async def set_mode(self, conversation: FarConversation, mode_id: str) -> LoopEvent | None:
        """Switch the far session's mode; the logged `mode_changed` (None: it already was).
        Raises `ValueError` naming the far agent's modes when it has no `mode_id`."""
        ...

    async def set_option(
        self, conversation: FarConversation, option_id: str, value: Any
    ) -> LoopEvent | None:
        """Set one of the far session's config options; the logged `config_changed`
        (None: unchanged). Raises `ValueError` naming its options (or the option's values)
        when it has no such option or value."""
        ...


@runtime_checkable
class ListsFar(Protocol):
    """An engine whose far agent lists sessions of its own (ACP `session/list`)."""

    async def list_far(self, *, cwd: str | None, cursor: str | None) -> FarPage | None:
        """A page of the far agent's sessions (bounded in time), as records whose id is the
        far session id — a conversation opened under that id continues it; None when it
        does not list them or did not answer."""
        ...

    def far_id(self, config: Mapping[str, str]) -> str | None:
        """The far session a conversation with these logged settings is mapped to."""
        ...

    def far_ids(self) -> set[str]:
        """The far sessions conversations are mapped to in this process (cheap)."""
        ...
