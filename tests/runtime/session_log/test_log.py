"""The session log: monotonic sequence numbers, read-only snapshots, batched commits."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import pytest

from steerable_bridge.adapters.storage.memory import MemoryStore
from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.ports.model import ModelRequest
from steerable_bridge.runtime.ports.storage import SessionRecord
from steerable_bridge.runtime.session_log.log import SessionLog
from steerable_bridge.runtime.values import Message, TextPart


def delta(log: SessionLog, text: str) -> ev.TextDelta:
    return log.record(ev.TextDelta, "run1", message_id="m", delta=text)


def test_record_assigns_strictly_increasing_seq_and_a_timestamp() -> None:
    log = SessionLog("s1")
    events = [delta(log, str(i)) for i in range(5)]
    assert [e.seq for e in events] == [0, 1, 2, 3, 4]
    assert all(e.session_id == "s1" and e.run_id == "run1" and e.ts > 0 for e in events)
    assert [e.ts for e in events] == sorted(e.ts for e in events)
    assert log.next_seq == 5 and len(log) == 5


def test_a_reloaded_log_continues_after_the_last_seq() -> None:
    first = SessionLog("s1")
    delta(first, "a")
    delta(first, "b")
    reloaded = SessionLog("s1", list(first.view()))
    assert delta(reloaded, "c").seq == 2


def test_append_refuses_going_back_or_another_session() -> None:
    log = SessionLog("s1")
    old = delta(log, "a")
    with pytest.raises(ValueError, match="append-only"):
        log.append(old)
    with pytest.raises(ValueError, match="belongs to session s2"):
        log.append(dataclasses.replace(old, session_id="s2", seq=5))
    log.append(dataclasses.replace(old, seq=7))
    assert delta(log, "b").seq == 8
    with pytest.raises(ValueError):
        SessionLog("s1", [old, old])


def test_views_are_fixed_length_read_only_snapshots() -> None:
    log = SessionLog("s1")
    delta(log, "a")
    view = log.view()
    delta(log, "b")
    assert len(view) == 1 and [e.delta for e in view] == ["a"]  # type: ignore[union-attr]
    assert len(log.view()) == 2
    with pytest.raises(IndexError):
        view[1]
    assert view[-1] is view[0]
    assert isinstance(view[0:5], tuple) and len(view[0:5]) == 1
    with pytest.raises(TypeError):
        view[0] = view[0]  # type: ignore[index]
    assert not hasattr(view, "append")
    with pytest.raises(dataclasses.FrozenInstanceError):
        view[0].seq = 10  # type: ignore[misc]


class FlakyStore(MemoryStore):
    """Fails the first `failures` appends, recording every batch it accepted."""

    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures = failures
        self.batches: list[list[int]] = []

    async def append(self, session_id: str, events: Sequence[ev.LoopEvent]) -> None:
        if self.failures:
            self.failures -= 1
            raise OSError("disk full")
        self.batches.append([e.seq for e in events])
        await super().append(session_id, events)


@pytest.mark.anyio
async def test_commit_writes_batches_in_order_and_loses_nothing_on_a_failed_write() -> None:
    store = FlakyStore(failures=1)
    await store.create(SessionRecord(session_id="s1", cwd="/", created_at=0, updated_at=0))
    log = SessionLog("s1", store=store)
    delta(log, "a")
    delta(log, "b")
    assert log.uncommitted == 2
    with pytest.raises(OSError):
        await log.commit()
    assert log.uncommitted == 2  # still pending after the failure
    delta(log, "c")
    await log.commit()
    assert store.batches == [[0, 1, 2]]
    assert log.uncommitted == 0
    await log.commit()  # nothing pending: no empty write
    assert store.batches == [[0, 1, 2]]
    assert [e.seq for e in await store.read("s1")] == [0, 1, 2]


def _history(turns: int) -> tuple[Message, ...]:
    """A freshly built copy of a conversation (equal values, new objects each call)."""
    out: list[Message] = []
    for i in range(turns):
        out.append(
            Message(id=f"u{i}", role="user", content=(TextPart(text="".join(["q", str(i)])),))
        )
        out.append(Message(id=f"a{i}", role="assistant", content=(TextPart(text="a" * (i + 1)),)))
    return tuple(out)


def test_each_request_shares_the_history_it_repeats_instead_of_keeping_a_copy() -> None:
    log = SessionLog("s1")
    system = "".join(["be ", "brief"])
    asked = [
        ModelRequest(model="m", system=system + "", messages=_history(n), tools=())
        for n in (1, 2, 3)
    ]
    first, second, third = (
        log.record(ev.ModelRequestEvent, "r1", step=i, request=request)
        for i, request in enumerate(asked)
    )
    assert [e.request for e in (first, second, third)] == asked  # the same requests, by value
    for older, newer in ((first, second), (second, third)):
        kept = older.request.messages
        assert all(a is b for a, b in zip(kept, newer.request.messages, strict=False))
    assert third.request.messages[4] is asked[2].messages[4]  # new: kept as it came
    # a request whose history moved (a compaction put a summary first) still shares by value
    summary = Message(id="c", role="user", content=(TextPart(text="summary"),))
    moved = ModelRequest(model="m", system=system, messages=(summary, *_history(3)[2:]))
    fourth = log.record(ev.ModelRequestEvent, "r1", step=3, request=moved)
    assert fourth.request == moved
    kept = third.request.messages[2:]
    assert all(a is b for a, b in zip(fourth.request.messages[1:], kept, strict=True))
    reloaded = SessionLog("s1", list(log.view()))  # a loaded log shares with its last request
    again = reloaded.record(ev.ModelRequestEvent, "r1", step=4, request=moved)
    assert again.request.messages[0] is fourth.request.messages[0]
