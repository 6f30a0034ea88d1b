"""An LRU map that forgets idle entries: bounded memory for sessions and threads.

A process serving many conversations must not keep every one it ever touched. `IdleCache`
holds values by key in use order; `get` and `put` mark a key used now. `sweep(idle)` drops,
oldest first, the entries `idle(value)` says may go (no turn running, nothing unsaved) while
the map is over `capacity`, and any idle entry unused for `ttl_s` seconds. A dropped
session is reloaded from the store on its next use, so forgetting it loses nothing. Pure
bookkeeping: no I/O, and the caller decides what "idle" means.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

__all__ = ["IdleCache"]

K = TypeVar("K")
V = TypeVar("V")


class IdleCache(Generic[K, V]):
    """Use-ordered map with a soft `capacity` and an idle `ttl_s` (see the module docstring)."""

    def __init__(
        self,
        *,
        capacity: int,
        ttl_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        self.ttl_s = ttl_s
        self._clock = clock
        self._items: OrderedDict[K, tuple[V, float]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def key_list(self) -> list[K]:
        return list(self._items)

    def values(self) -> Iterator[V]:
        return (value for value, _ in self._items.values())

    def get(self, key: K) -> V | None:
        """The value, marked used now; None when absent."""
        found = self._items.get(key)
        if found is None:
            return None
        self._items[key] = (found[0], self._clock())
        self._items.move_to_end(key)
        return found[0]

    def peek(self, key: K) -> V | None:
        """The value without marking it used."""
        found = self._items.get(key)
        return found[0] if found is not None else None

    def put(self, key: K, value: V) -> None:
        self._items[key] = (value, self._clock())
        self._items.move_to_end(key)

    def pop(self, key: K) -> V | None:
        found = self._items.pop(key, None)
        return found[0] if found is not None else None

    def sweep(self, idle: Callable[[V], bool]) -> list[V]:
        """Forget idle entries over capacity (oldest first) or past the TTL; returns them."""
        now = self._clock()
        gone: list[K] = []
        dropped: list[V] = []
        over = len(self._items) - self.capacity
        # No copy of the map: a sweep runs on every request and usually stops at the oldest
        # entry, so copying every entry first would make each request pay for all of them.
        for key, (value, used) in self._items.items():
            expired = now - used >= self.ttl_s
            if (over > 0 or expired) and idle(value):
                gone.append(key)
                dropped.append(value)
                over -= 1
            elif over <= 0 and not expired:
                break  # the rest were used more recently
        for key in gone:
            del self._items[key]
        return dropped
