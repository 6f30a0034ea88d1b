"""Signals: steer, follow-up and cancel requests sent to the process running a session's turn.

When several processes share a store (`serve --workers N`, or several servers on one
PostgreSQL), a request to steer or stop a turn may reach a process other than the one
running it. That process publishes a `SessionSignal` through the store; every process
listens, and the one whose session is running applies it (`Agent.relay_signals`). A store
offers this with two optional methods, reached through `publish_signal` and
`listen_signals` so a store without them (memory) still works:

- `publish(signal)`: deliver it to every listening process (at most once each, within the
  store's bound on latency, which it documents);
- `listen(deliver, task_status=...)`: once it reported itself started (`anyio`'s
  `task_status.started()`) and until cancelled, call `deliver(signal)` for every signal
  published while this process holds a claim on some session (`claim_session`), from the
  moment it entered that claim: the only signals a turn here can use, since a session runs
  its turn inside its claim. A store may deliver others too (PostgreSQL delivers every
  one); SQLite stops polling while the process holds no claim and skips what was published
  meanwhile.

The JSON form (`signal_to_json` / `signal_from_json`) is what travels through the store.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from anyio import TASK_STATUS_IGNORED
from anyio.abc import TaskStatus
from pydantic import TypeAdapter

from steerable_bridge.runtime.values import ContentPart

__all__ = [
    "SessionSignal",
    "SignalAction",
    "listen_signals",
    "publish_signal",
    "signal_from_json",
    "signal_to_json",
]

SignalAction = Literal["steer", "follow_up", "cancel"]


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionSignal:
    """One request for the running turn of `session_id`."""

    session_id: str
    action: SignalAction
    content: tuple[ContentPart, ...] = ()
    """The message to add (steer, follow_up)."""
    message_id: str | None = None
    """The id the client gave that message, logged with it (None: the owner makes one)."""
    reason: str = ""
    """Why (cancel): it ends up in the turn's log."""


_ADAPTER: TypeAdapter[SessionSignal] = TypeAdapter(SessionSignal)


def signal_to_json(signal: SessionSignal) -> str:
    return _ADAPTER.dump_json(signal).decode()


def signal_from_json(text: str | bytes) -> SessionSignal:
    """Parse one signal; raises `pydantic.ValidationError` when it is not one."""
    return _ADAPTER.validate_json(text)


async def publish_signal(store: object, signal: SessionSignal) -> bool:
    """Publish through the store; False when the store cannot carry signals."""
    publish = getattr(store, "publish", None)
    if publish is None:
        return False
    await publish(signal)
    return True


async def listen_signals(
    store: object,
    deliver: Callable[[SessionSignal], object],
    *,
    task_status: TaskStatus[None] = TASK_STATUS_IGNORED,
) -> bool:
    """Run the store's listener until cancelled (started once it listens); False at once
    (and started) when the store has none."""
    listen = getattr(store, "listen", None)
    if listen is None:
        task_status.started()
        return False
    await listen(deliver, task_status=task_status)
    return True
