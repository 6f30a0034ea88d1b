"""Steering and follow-up queues: messages that reach a turn while it runs.

`steer` messages are injected at the next step boundary — after the running tool batch,
before the next model call. `follow_up` messages are taken only when the turn would
otherwise end. Each queue drains either one message per boundary (`one`) or all that are
waiting (`all`). The loop logs every injected message (`steer_applied`,
`follow_up_applied`), so replay and projection see exactly what the model saw.
"""

from __future__ import annotations

from collections import deque
from typing import Literal

from steerable_bridge.runtime.values import ContentPart

__all__ = ["DrainMode", "InputQueue"]

DrainMode = Literal["one", "all"]


class InputQueue:
    """A FIFO of pending user inputs with a drain mode."""

    def __init__(self, mode: DrainMode = "all") -> None:
        self.mode: DrainMode = mode
        self._items: deque[tuple[ContentPart, ...]] = deque()

    def push(self, content: tuple[ContentPart, ...]) -> None:
        self._items.append(content)

    def __len__(self) -> int:
        return len(self._items)

    def take(self) -> list[tuple[ContentPart, ...]]:
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
