"""Resuming a thread's stream: the AG-UI frames after an SSE event id, from the log, then live.

Every frame `POST /agent` sends from a log event carries the SSE id `wire.event_ids` gives
it (`<seq>`, or `<seq>.<i>` for all but the last of several frames of one event), so an id
names an exact place in the thread's log. `Restream` renders a thread's log again the way
the runs rendered it live: each run from its `run_started` with a renderer of its own (the
client's run id and parent from `run_started`, the MESSAGES_SNAPSHOT folded from the log up
to the run's end exactly as `Threads` folds it, each `model_request` by reference to the
request before it in the log, as `requests.py` sends it live), the events logged between
runs held and sent right after the next RUN_STARTED, nothing outside a run — and keeps only
the frames after the id, byte for byte what the original stream carried. `resume(...)` is
the producer of `GET /agent/threads/{threadId}/events`: it writes what the log holds after
the id, then, while a turn runs (here or in another process), what it logs as it logs it —
woken by the thread's run in this process, else reading the log every `POLL_S` — and returns
once the run that was going on has ended (at once when none was). Frames the server made up
without a log event (a RUN_ERROR for a model that could not be reached) are not in the log
and are not sent again. No SSE framing of its own: the bytes are `wire.SseEncoder`'s.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import anyio

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.events import LoopEvent
from steerable_bridge.runtime.ports.port import AgentPort
from steerable_bridge.transports.agui.renderer import AguiRenderer
from steerable_bridge.transports.agui.requests import RequestChain
from steerable_bridge.transports.agui.stream import Write
from steerable_bridge.transports.agui.threads import Thread
from steerable_bridge.transports.agui.wire import SseEncoder

__all__ = ["POLL_S", "RESUME_DEADLINE_S", "EventId", "Restream", "resume"]

POLL_S = 0.25
"""How often a resumed stream reads the log while another process runs the turn."""
RESUME_DEADLINE_S = 3600.0
"""The longest a resumed stream follows a running turn."""

_ID = re.compile(r"(-1|0|[1-9][0-9]{0,17})(?:\.(0|[1-9][0-9]{0,8}))?")
_FINAL = (ev.RunFinished, ev.RunFailed)


@dataclass(frozen=True, slots=True)
class EventId:
    """A place in a thread's stream: after frame `index` of log event `seq`, or after all
    of its frames (`index` None)."""

    seq: int
    index: int | None = None

    @classmethod
    def parse(cls, text: str) -> EventId:
        """The id an SSE frame carried (`57`, `57.0`); raises `ValueError`."""
        found = _ID.fullmatch(text.strip())
        if found is None:
            raise ValueError(text)
        seq, index = found.group(1), found.group(2)
        return cls(int(seq), None if index is None else int(index))

    def __str__(self) -> str:
        return str(self.seq) if self.index is None else f"{self.seq}.{self.index}"


class Restream:
    """A thread's log rendered again as its runs streamed it (see the module docstring)."""

    def __init__(self, thread_id: str, after: EventId, *, legacy_outcomes: bool = False) -> None:
        self.thread_id = thread_id
        self.after = after
        self.legacy_outcomes = legacy_outcomes
        self.history = Thread(thread_id)
        """The fold the snapshots are built from, as `Threads` keeps it for a live run."""
        self.seq = -1
        """The last log event taken."""
        self.between: list[LoopEvent] = []
        self.requests = RequestChain()
        """The log's requests so far, as the runs' renderers sent them (the history's own
        chain has taken each event before it is rendered)."""
        self.encoder: SseEncoder | None = None
        """The open run's encoder (None between runs)."""

    @property
    def in_run(self) -> bool:
        """Whether the log's last run has not ended yet (as far as it was taken)."""
        return self.encoder is not None

    def take(self, events: Sequence[LoopEvent]) -> bytes:
        """The frames after the id among those `events` render to (events already taken
        are skipped, so a reader may overlap the last read)."""
        out: list[bytes] = []
        fresh = [event for event in events if event.seq > self.seq]
        if not fresh:
            return b""
        self.seq = fresh[-1].seq
        after = self.after
        history = self.history
        for event in fresh:
            history.take((event,))  # a run's snapshot sees the log up to its end, no further
            encoder = self.encoder
            if isinstance(event, ev.RunStarted):
                renderer = AguiRenderer(
                    thread_id=self.thread_id,
                    run_id=event.client_run_id or event.run_id,
                    parent_run_id=event.parent_run_id,
                    messages=self.history.messages,
                    legacy_outcomes=self.legacy_outcomes,
                    requests=self.requests,
                )
                for held in self.between:  # logged between runs: sent after RUN_STARTED
                    renderer.render(held)
                self.between.clear()
                encoder = self.encoder = SseEncoder(renderer)
            elif encoder is None:
                self.between.append(event)
                continue
            if isinstance(event, _FINAL):
                self.encoder = None
            if event.seq < after.seq:  # sent already: only a run's start sets up its renderer
                if isinstance(event, ev.RunStarted):
                    encoder.encode(event)
                self.requests.note(event)  # what a request after the id refers to
                continue
            data = encoder.encode(event)
            if event.seq == after.seq:
                data = _frames_after(data, after.index)
            if data:
                out.append(data)
        return b"".join(out)


def _frames_after(data: bytes, index: int | None) -> bytes:
    """The frames of one event's bytes after frame `index` (none when `index` is None)."""
    if index is None:
        return b""
    frames = data.split(b"\n\n")[:-1]  # JSON holds no raw newline: a frame ends at a blank line
    return b"".join(frame + b"\n\n" for frame in frames[index + 1 :])


async def resume(
    port: AgentPort,
    thread: Thread,
    after: EventId,
    write: Write,
    *,
    legacy_outcomes: bool = False,
    poll_s: float = POLL_S,
    deadline_s: float = RESUME_DEADLINE_S,
) -> None:
    """Write the thread's frames after `after`, then follow the turn running now to its end
    (see the module docstring). Raises `SessionNotFound` before writing anything when the
    conversation does not exist."""
    restream = Restream(thread.thread_id, after, legacy_outcomes=legacy_outcomes)
    thread_id = thread.thread_id
    with anyio.move_on_after(deadline_s):
        while True:
            changed = thread.changed = thread.changed or anyio.Event()
            data = restream.take(await port.events_after(thread_id, restream.seq))
            if data:
                await write(data)
            if not restream.in_run:
                return  # the run has ended (or none ran): the stream ends with it
            if not await port.is_running(thread_id) and thread.streams == 0:
                # one more read: the run may have ended between the read and the check
                data = restream.take(await port.events_after(thread_id, restream.seq))
                if data:
                    await write(data)
                return  # a run the log shows open but nobody runs: it ends here
            with anyio.move_on_after(poll_s):
                await changed.wait()
