"""Session signals (`runtime/agent_sessions/signals.py`): a `SessionSignal` travels through
the store as JSON and comes back equal; text that is not a signal is refused; `publish_signal` and
`listen_signals` use the store's optional `publish` / `listen` and answer False (listening:
at once, and started) when the store has none, so a memory store still works."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from pydantic import ValidationError

from steerable_bridge.adapters.storage.memory import MemoryStore
from steerable_bridge.adapters.storage.sqlite import SqliteStore
from steerable_bridge.runtime.agent_sessions.signals import (
    SessionSignal,
    listen_signals,
    publish_signal,
    signal_from_json,
    signal_to_json,
)
from steerable_bridge.runtime.ports.storage import claim_session
from steerable_bridge.runtime.values import ImagePart, TextPart

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(10)]

STEER = SessionSignal(
    session_id="s1",
    action="steer",
    content=(TextPart(text="use tabs"), ImagePart(data="aGk=", mime_type="image/png")),
    message_id="m7",
)


def test_a_signal_round_trips_through_json() -> None:
    cancel = SessionSignal(session_id="s1", action="cancel", reason="the client went away")
    for signal in (STEER, cancel, SessionSignal(session_id="s2", action="follow_up")):
        assert signal_from_json(signal_to_json(signal)) == signal
    assert signal_from_json(signal_to_json(STEER).encode()) == STEER


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        '{"session_id": "s1"}',
        '{"session_id": "s1", "action": "explode"}',
        '{"session_id": "s1", "action": "steer", "content": [{"type": "video"}]}',
    ],
)
def test_text_that_is_not_a_signal_is_refused(text: str) -> None:
    with pytest.raises(ValidationError):
        signal_from_json(text)


async def test_a_store_without_signals_says_so_and_listening_returns_at_once() -> None:
    store = MemoryStore()
    assert await publish_signal(store, STEER) is False
    assert await listen_signals(store, print) is False
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            assert await tg.start(listen_signals, store, print) is None  # started, not hung


async def test_a_signal_published_while_a_claim_is_held_reaches_the_listener(
    tmp_path: Path,
) -> None:
    store = SqliteStore(tmp_path / "s.db")  # a store that carries signals between processes
    got: list[SessionSignal] = []
    arrived = anyio.Event()

    def deliver(signal: SessionSignal) -> None:
        got.append(signal)
        arrived.set()

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            await tg.start(listen_signals, store, deliver)
            async with claim_session(store, "s1"):  # a turn runs here
                assert await publish_signal(store, STEER) is True
                await arrived.wait()
            tg.cancel_scope.cancel()
    await store.aclose()
    assert got == [STEER]
