"""A thread as AG-UI messages: the session log folded into what MESSAGES_SNAPSHOT carries.

`thread_messages(events)` gives the message list an AG-UI client should hold after a run,
built the way the client builds it from the stream: user messages under their own ids,
assistant text under its `text_start` id, tool calls attached to their `parentMessageId`
(an assistant message with no text when the call opened none), reasoning as `reasoning`
messages, each tool result as a `tool` message with id `result-<call_id>`, and the plan as
one `activity` message. The ids match the streamed events, so a client that sends its
messages back gets them recognised and not duplicated (`known_ids`). `MessageFold` is the
same fold kept open: a thread feeds it each event once, as it learns of it, and asks it for
the messages at each run's end, so a long thread is not folded again from its first event
for every snapshot; `ids()` gives the ids the client may send back without building the
messages, and `covered_by(ids, before=n)` says whether a client that sent back `ids` holds
the whole thread already (its snapshot can be left out). It keeps each message it built,
and its JSON once asked (`json_of`; one copy, in UTF-8 as the snapshot's piece once one was
made), until an event changes that message, so a long thread's MESSAGES_SNAPSHOT builds
and encodes only what is new (`wire.SseEncoder`). Pure;
no I/O.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Sequence
from typing import Any

from ag_ui.core import (
    ActivityMessage,
    AssistantMessage,
    DataSource,
    FunctionCall,
    Message,
    ReasoningMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from ag_ui.core import ImagePart as AguiImagePart
from ag_ui.core import TextPart as AguiTextPart

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.encoding import codec
from steerable_bridge.runtime.events import LoopEvent
from steerable_bridge.runtime.values import ContentPart, ImagePart, ResourcePart, TextPart
from steerable_bridge.transports.agui.native import result_message_id
from steerable_bridge.transports.agui.renderer import plan_message_id

__all__ = ["MessageFold", "known_ids", "thread_messages", "user_content"]


def user_content(content: tuple[ContentPart, ...]) -> str | list[Any]:
    """A user message's content: a string when it is all text, else AG-UI content parts."""
    if all(isinstance(part, TextPart) for part in content):
        return "".join(part.text for part in content if isinstance(part, TextPart))
    parts: list[Any] = []
    for part in content:
        if isinstance(part, TextPart):
            parts.append(AguiTextPart(text=part.text))
        elif isinstance(part, ImagePart):
            parts.append(
                AguiImagePart(source=DataSource(value=part.data, mime_type=part.mime_type))
            )
        elif isinstance(part, ResourcePart):
            parts.append(AguiTextPart(text=part.text if part.text is not None else part.uri))
    return parts


class MessageFold:
    """The messages being built, by id, in first-seen order (`event` one event at a time,
    `messages` as AG-UI messages at any point)."""

    def __init__(self, thread_id: str) -> None:
        self.thread_id = thread_id
        self.order: list[str] = []
        self.data: dict[str, dict[str, Any]] = {}
        self.call_args: dict[str, tuple[str, int]] = {}
        """call id → (assistant message id, index of the call in it)."""
        self.call_order: list[str] = []
        """Each call id as first seen (`ids_since` reads on from a mark)."""
        self._built: dict[str, Message] = {}
        """Each message built by `messages` since an event last changed it, by id."""
        self._json: dict[str, str] = {}
        """The JSON of each message of `_built` once `json_of` gave it, until
        `snapshot_json` made its piece."""
        self._pos: dict[str, int] = {}
        """Each message's place in `order`."""
        self._last: list[Message] = []
        """What `messages` last returned; its first `_fresh` messages are still current."""
        self._fresh = 0
        self._pieces: list[bytes] = []
        """`snapshot_json`'s pieces for the first messages of `_last` (the JSON of each in
        UTF-8, after a comma but the first)."""

    def _changed(self, message_id: str) -> None:
        """Forget what was built of the message `message_id` (an event changed it), and what
        was kept from it on (`messages`' list, `snapshot_json`'s text)."""
        if self._built.pop(message_id, None) is not None:
            self._json.pop(message_id, None)
            pos = self._pos[message_id]
            if pos < self._fresh:
                self._fresh = pos
            if pos < len(self._pieces):
                del self._pieces[pos:]

    def add(self, message_id: str, **fields: Any) -> dict[str, Any]:
        entry = self.data.get(message_id)
        if entry is None:
            entry = self.data[message_id] = {"id": message_id, **fields}
            self._pos[message_id] = len(self.order)
            self.order.append(message_id)
        return entry

    def event(self, event: LoopEvent) -> None:
        if type(event) is ev.TextDelta or type(event) is ev.ReasoningDelta:  # one per token
            entry = self.data.get(event.message_id)
            if entry is None:
                role = "assistant" if type(event) is ev.TextDelta else "reasoning"
                entry = self.add(event.message_id, role=role, text=[])
            entry["text"].append(event.delta)
            self._changed(event.message_id)
            return
        self._touch(event)
        if isinstance(event, ev.UserMessage | ev.SteerApplied | ev.FollowUpApplied):
            self.add(event.message_id, role="user", content=user_content(event.content))
        elif isinstance(event, ev.TextStart):
            self.add(event.message_id, role="assistant", text=[])
        elif isinstance(event, ev.ReasoningStart):
            self.add(event.message_id, role="reasoning", text=[])
        elif isinstance(event, ev.ToolCallStart):
            parent = self.add(event.parent_message_id, role="assistant", text=[])
            calls = parent.setdefault("calls", [])
            if event.call_id not in self.call_args:
                self.call_order.append(event.call_id)
            self.call_args[event.call_id] = (event.parent_message_id, len(calls))
            calls.append([event.call_id, event.name, []])
        elif isinstance(event, ev.ToolCallDelta):
            where = self.call_args.get(event.call_id)
            if where is not None:
                self.data[where[0]]["calls"][where[1]][2].append(event.delta)
        elif isinstance(event, ev.ToolCallEnd):
            where = self.call_args.get(event.call_id)
            if where is not None:
                call = self.data[where[0]]["calls"][where[1]]
                call[1], call[2] = event.name, [event.arguments_json]
        elif isinstance(event, ev.ToolFinished):
            self._result(event)
        elif isinstance(event, ev.PlanUpdated):
            entry = self.add(plan_message_id(self.thread_id), role="activity")
            entry["content"] = {"entries": codec.event_to_jsonable(event)["entries"]}
        elif isinstance(event, ev.Compaction):
            pass  # the client keeps the full thread; compaction only shortens the model's view

    def _touch(self, event: LoopEvent) -> None:
        """Forget what was built of the message `event` changes (if any)."""
        if not self._built:
            return
        if isinstance(event, ev.ToolCallStart):
            self._changed(event.parent_message_id)
        elif isinstance(event, ev.ToolCallDelta | ev.ToolCallEnd):
            where = self.call_args.get(event.call_id)
            if where is not None:
                self._changed(where[0])
        elif isinstance(event, ev.ToolFinished):
            self._changed(result_message_id(event.call_id))
        elif isinstance(event, ev.PlanUpdated):
            self._changed(plan_message_id(self.thread_id))
        elif isinstance(
            event,
            ev.UserMessage
            | ev.SteerApplied
            | ev.FollowUpApplied
            | ev.TextStart
            | ev.ReasoningStart,
        ):
            self._changed(event.message_id)

    def _result(self, event: ev.ToolFinished) -> None:
        text = "".join(p.text for p in event.content if isinstance(p, TextPart))
        entry = self.add(result_message_id(event.call_id), role="tool", call=event.call_id)
        entry["content"] = text
        if event.status != "completed":
            entry["error"] = event.error.message if event.error is not None else event.status

    def ids(self) -> set[str]:
        """Every id `known_ids(self.messages())` gives (messages and tool calls), without
        building the messages."""
        return {*self.order, *self.call_args}

    def mark(self) -> tuple[int, int]:
        """Where `ids_since` reads on from next: how many messages and calls are known."""
        return len(self.order), len(self.call_order)

    def ids_since(self, mark: tuple[int, int]) -> list[str]:
        """The ids `ids()` gives that came after `mark` (both only grow: a thread learns
        what is new, not the whole thread again)."""
        return [*self.order[mark[0] :], *self.call_order[mark[1] :]]

    def covered_by(self, ids: Container[str], *, before: int) -> bool:
        """Whether a client holding messages with `ids` holds the whole thread once it has
        applied what was streamed natively since the fold had `before` messages: every
        earlier message (activity messages aside: clients keep those themselves and do not
        send them back) is among `ids`, and every later one is a streamed kind (assistant
        text and tool calls, reasoning, tool results) or among `ids`."""
        order, data = self.order, self.data
        for index, message_id in enumerate(order):
            if message_id in ids:
                continue
            role = data[message_id]["role"]
            if role == "activity" or (index >= before and role != "user"):
                continue
            return False
        return True

    def messages(self) -> list[Message]:
        """The thread's messages, a new list each call; one no event changed since the last
        call is the same object as then (only what changed is built again, and the list's
        unchanged start is copied, not looked up again)."""
        built = self._built
        fresh = self._fresh
        out = self._last[:fresh]
        for message_id in self.order[fresh:]:
            message = built.get(message_id)
            if message is None:
                message = built[message_id] = self._build(message_id)
            out.append(message)
        self._last, self._fresh = out, len(out)
        return out

    def snapshot_json(self, messages: list[Message]) -> Sequence[bytes]:
        """`",".join(map(self.json_of, messages))` in UTF-8, as pieces to be joined: for the
        list the last `messages()` gave, while no event changed the fold, the pieces made
        before are kept and only what follows is made (a long thread's MESSAGES_SNAPSHOT does
        not walk the whole thread in Python again on every run)."""
        current = messages is self._last and self._fresh == len(messages) == len(self.order)
        if not current:
            return [",".join(map(self.json_of, messages)).encode()]
        pieces = self._pieces
        done = len(pieces)
        kept = self._json
        for at, message in enumerate(messages[done:]):
            text = kept.pop(message.id, None) or message.model_dump_json(by_alias=True)
            pieces.append((b"," if done or at else b"") + text.encode())
        return tuple(pieces)

    def json_of(self, message: Message) -> str:
        """`message.model_dump_json(by_alias=True)`, kept for a message of the last
        `messages()` until an event changes it (a long thread's snapshot then encodes only
        what is new): as text, or once `snapshot_json` made its piece, only there (one
        copy of a long thread's JSON, not two)."""
        if self._built.get(message.id) is not message:
            return message.model_dump_json(by_alias=True)
        text = self._json.get(message.id)
        if text is None:
            pos = self._pos[message.id]
            if pos < len(self._pieces):
                piece = self._pieces[pos]
                return piece[1 if pos else 0 :].decode()
            text = self._json[message.id] = message.model_dump_json(by_alias=True)
        return text

    def _build(self, message_id: str) -> Message:
        data = self.data[message_id]
        role = data["role"]
        if role == "user":
            return UserMessage(id=message_id, content=data["content"])
        if role == "assistant":
            text = _joined(data["text"])
            calls = [
                ToolCall(id=cid, function=FunctionCall(name=name, arguments=_joined(args)))
                for cid, name, args in data.get("calls", [])
            ]
            return AssistantMessage(id=message_id, content=text or None, tool_calls=calls or None)
        if role == "reasoning":
            return ReasoningMessage(id=message_id, content=_joined(data["text"]))
        if role == "tool":
            return ToolMessage(
                id=message_id,
                content=data["content"],
                tool_call_id=data["call"],
                error=data.get("error"),
            )
        return ActivityMessage(id=message_id, activity_type="plan", content=data["content"])


def _joined(pieces: list[str]) -> str:
    """The pieces as one string, kept as one piece from now on (a fold kept open holds one
    string per message, not one per streamed delta)."""
    if len(pieces) == 1:
        return pieces[0]
    text = "".join(pieces)
    pieces[:] = [text]
    return text


def thread_messages(thread_id: str, events: Iterable[LoopEvent]) -> list[Message]:
    """The thread's AG-UI messages, rebuilt from its log."""
    fold = MessageFold(thread_id)
    for event in events:
        fold.event(event)
    return fold.messages()


def known_ids(messages: Iterable[Message]) -> set[str]:
    """Every id a client may send back for these messages (messages and tool calls)."""
    ids: set[str] = set()
    for message in messages:
        ids.add(message.id)
        for call in getattr(message, "tool_calls", None) or ():
            ids.add(call.id)
    return ids
