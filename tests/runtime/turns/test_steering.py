"""`InputQueue` (`runtime/turns/steering.py`): pending steer and follow-up messages, first in first
out, drained one per boundary (`one`) or all at once (`all`), each with the client's id when
it gave one. When the loop injects them is pinned in `test_loop.py`."""

from __future__ import annotations

from steerable_bridge.runtime.turns.steering import InputQueue, Queued
from steerable_bridge.runtime.values import TextPart


def text(value: str) -> tuple[TextPart, ...]:
    return (TextPart(text=value),)


def test_an_empty_queue_gives_nothing() -> None:
    for mode in ("one", "all"):
        queue = InputQueue(mode)
        assert len(queue) == 0 and queue.take() == []


def test_the_default_mode_drains_everything_in_order() -> None:
    queue = InputQueue()
    assert queue.mode == "all"
    queue.push(text("a"))
    queue.push(text("b"), "m2")
    assert queue.take() == [Queued(text("a")), Queued(text("b"), "m2")]
    assert len(queue) == 0 and queue.take() == []


def test_one_mode_drains_the_oldest_message_per_take() -> None:
    queue = InputQueue("one")
    for value in ("a", "b", "c"):
        queue.push(text(value))
    assert [queue.take() for _ in range(4)] == [
        [Queued(text("a"))], [Queued(text("b"))], [Queued(text("c"))], [],
    ]  # fmt: skip


def test_the_mode_may_change_between_takes() -> None:
    queue = InputQueue("one")
    for value in ("a", "b", "c"):
        queue.push(text(value))
    assert queue.take() == [Queued(text("a"))]
    queue.mode = "all"
    assert queue.take() == [Queued(text("b")), Queued(text("c"))]


def test_clear_drops_what_is_waiting() -> None:
    queue = InputQueue()
    queue.push(text("a"), "m1")
    queue.clear()
    assert len(queue) == 0 and queue.take() == []


def test_a_queued_message_keeps_its_client_id_or_none() -> None:
    queue = InputQueue()
    queue.push(text("a"))
    queue.push(text("b"), "client-7")
    first, second = queue.take()
    assert first.message_id is None and first.content == text("a")
    assert second.message_id == "client-7"
