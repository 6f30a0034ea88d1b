"""Steering and follow-up queues: messages that reach a turn while it runs.

`steer` messages are injected at the next step boundary — after the running tool batch,
before the next model call. `follow_up` messages are taken only when the turn would
otherwise end. Each queue drains either one message per boundary (`one`) or all that are
waiting (`all`). The loop logs every injected message (`steer_applied`,
`follow_up_applied`), so replay and projection see exactly what the model saw. A message
may come with the id its client gave it (an AG-UI message id); the loop logs it under that
id, so whichever process reads the log later knows the message was taken.
"""

from __future__ import annotations

from collections import deque
from typing import Literal, NamedTuple

from steerable_bridge.runtime.values import ContentPart

__all__ = ["DrainMode", "InputQueue", "Queued"]

DrainMode = Literal["one", "all"]


class Queued(NamedTuple):
    """One pending message: its content, and the id its client gave it (None: the loop
    makes one)."""

    content: tuple[ContentPart, ...]
    message_id: str | None = None


class InputQueue:
    """A FIFO of pending user inputs with a drain mode."""

    def __init__(self, mode: DrainMode = "all") -> None:
        self.mode: DrainMode = mode
        self._items: deque[Queued] = deque()

    def push(self, content: tuple[ContentPart, ...], message_id: str | None = None) -> None:
        self._items.append(Queued(content, message_id))

    def __len__(self) -> int:
        return len(self._items)

    def take(self) -> list[Queued]:
        """The messages to inject now: the oldest one, or all, per `mode`."""
        if not self._items:
            return []
        if self.mode == "one":
            return [self._items.popleft()]
        items = list(self._items)
        self._items.clear()
        return items

    def clear(self) -> None:
        self._items.clear()
