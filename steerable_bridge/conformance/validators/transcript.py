"""ACP transcripts: every JSON-RPC message of one connection, in order, with who sent it.

`Transcript` is a stream observer for the `acp` SDK's connections (pass
`observers=[transcript.observe]` to `run_agent`, `connect_to_agent` or
`spawn_agent_process`): the SDK hands it each message as it crosses the wire, before
validation, so the validators grade what was really sent rather than what the SDK's lenient
models made of it. Bytes written around the SDK (the malformed-JSON probe) are noted with
`note_raw`. Waiting helpers (`wait_for`) let a validator block, with a deadline, until a
message matching a predicate has arrived. The transcript writes itself as JSON lines. It
never sends anything.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import anyio

__all__ = ["Sender", "Transcript", "TranscriptEntry", "response_to"]

Sender = Literal["client", "agent"]


@dataclass(frozen=True, slots=True)
class TranscriptEntry:
    """One message: who sent it, seconds since the transcript began, and the message.

    `raw` holds the exact text for bytes written outside the SDK (then `message` is empty).
    """

    sender: Sender
    at: float
    message: dict[str, Any]
    raw: str | None = None

    def to_json(self) -> str:
        data: dict[str, Any] = {"sender": self.sender, "at": round(self.at, 6)}
        if self.raw is not None:
            data["raw"] = self.raw
        else:
            data["message"] = self.message
        return json.dumps(data, ensure_ascii=False)


class Transcript:
    """The ordered record of one ACP connection, seen from `local` (the side we play)."""

    def __init__(self, local: Sender) -> None:
        self.local: Sender = local
        self.remote: Sender = "agent" if local == "client" else "client"
        self._entries: list[TranscriptEntry] = []
        self._start = time.monotonic()
        self._changed = anyio.Event()
        self._asked: set[tuple[Sender, str]] = set()
        self._early: dict[tuple[Sender, str], TranscriptEntry] = {}

    # -- recording -------------------------------------------------------------------

    def observe(self, event: Any) -> None:
        """An `acp` StreamObserver: record the message with its direction.

        The SDK reports an outgoing request only once its write has drained, so a fast
        answer can arrive first; such a response is held back and recorded right after
        the request it answers, keeping the transcript in causal order.
        """
        incoming = getattr(getattr(event, "direction", None), "value", "") == "incoming"
        sender = self.remote if incoming else self.local
        message = dict(event.message)
        entry = TranscriptEntry(sender, self.now(), message)
        other: Sender = self.remote if sender == self.local else self.local
        if "method" in message and "id" in message:
            key = (sender, _key(message["id"]))
            self._asked.add(key)
            self._append(entry)
            early = self._early.pop(key, None)
            if early is not None:
                self._append(early)
            return
        if "method" not in message and message.get("id") is not None:
            key = (other, _key(message["id"]))
            if key not in self._asked:
                self._early[key] = entry
                return
        self._append(entry)

    def note_sent(self, message: dict[str, Any]) -> None:
        """Record a well-formed message we wrote around the SDK (as raw bytes on purpose)."""
        if "method" in message and "id" in message:
            self._asked.add((self.local, _key(message["id"])))
        self._append(TranscriptEntry(self.local, self.now(), dict(message)))

    def note_raw(self, sender: Sender, text: str) -> None:
        """Record bytes that were written around the SDK (not valid JSON-RPC on purpose)."""
        self._append(TranscriptEntry(sender, self.now(), {}, raw=text))

    def _append(self, entry: TranscriptEntry) -> None:
        self._entries.append(entry)
        changed, self._changed = self._changed, anyio.Event()
        changed.set()

    def now(self) -> float:
        return time.monotonic() - self._start

    # -- reading ---------------------------------------------------------------------

    @property
    def entries(self) -> tuple[TranscriptEntry, ...]:
        return tuple(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def _all(self) -> list[TranscriptEntry]:
        """Every entry in record order; responses still held back (never asked) come last."""
        return [*self._entries, *self._early.values()]

    def messages(self) -> list[dict[str, Any]]:
        """`{"sender", "message", "line"}` dicts in wire order (the rules read the first two).

        `line` is the message's 1-based line in the file `write_jsonl` writes, so evidence
        can point into it. Raw notes are left out.
        """
        return [
            {"sender": e.sender, "message": e.message, "line": n}
            for n, e in enumerate(self._all(), start=1)
            if e.raw is None
        ]

    def find(
        self, predicate: Callable[[TranscriptEntry], bool], start: int = 0
    ) -> TranscriptEntry | None:
        for entry in self._entries[start:]:
            if predicate(entry):
                return entry
        return None

    def exchange(self, method: str, start: int, session: str | None = None) -> tuple[int, int]:
        """Indices of the latest `method` request since `start` and its response (-1 if none)."""
        entries = self._entries
        request = -1
        for index in range(start, len(entries)):
            message = entries[index].message
            params = message.get("params") if isinstance(message.get("params"), dict) else {}
            if (
                entries[index].sender == "client"
                and message.get("method") == method
                and (session is None or (params or {}).get("sessionId") == session)
            ):
                request = index
        if request < 0:
            return -1, -1
        match = response_to(entries[request].message.get("id"))
        for index in range(request + 1, len(entries)):
            if match(entries[index]):
                return request, index
        return request, -1

    def session_updates(
        self, session: str, start: int, end: int | None = None
    ) -> list[TranscriptEntry]:
        entries = self._entries[start:end]
        return [
            e
            for e in entries
            if e.sender == "agent"
            and e.message.get("method") == "session/update"
            and (e.message.get("params") or {}).get("sessionId") == session
        ]

    async def wait_for(
        self,
        predicate: Callable[[TranscriptEntry], bool],
        *,
        within: float,
        start: int = 0,
    ) -> TranscriptEntry | None:
        """The first entry from `start` on matching `predicate`, waiting up to `within` s."""
        with anyio.move_on_after(within):
            while True:
                changed = self._changed
                found = self.find(predicate, start)
                if found is not None:
                    return found
                await changed.wait()
        return None

    def write_jsonl(self, path: str | Path) -> Path:
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("".join(e.to_json() + "\n" for e in self._all()), encoding="utf-8")
        return target


def _key(request_id: object) -> str:
    return repr(request_id)


def response_to(request_id: object) -> Callable[[TranscriptEntry], bool]:
    """A predicate matching the response (result or error) to the request with that id."""

    def match(entry: TranscriptEntry) -> bool:
        message = entry.message
        return (
            "method" not in message
            and "id" in message
            and message.get("id") == request_id
            and ("result" in message or "error" in message)
        )

    return match
