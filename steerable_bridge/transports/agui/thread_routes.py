"""The thread routes: a user's threads, one thread's snapshot and events, deletion, capabilities.

`ThreadRoutes` serves what a web client needs to survive a reload (`docs/agui-routes.md`
has the JSON shapes): `GET /agent/threads` lists the caller's threads, newest first, a page
at a time; `GET /agent/threads/{threadId}` answers the thread as a MESSAGES_SNAPSHOT-shaped
object with its state, whether it runs and the interrupts (an approval's with the options
offered for it) and frontend tool calls its last run left waiting;
`GET /agent/threads/{threadId}/events` resumes its stream after the SSE id the client names
(`Last-Event-ID` or `?after=`; `resume.py`); `DELETE` removes it; `GET /agent/capabilities`
answers AG-UI's `AgentCapabilities`. Each request is first told who sends it
(`identity.py`); a thread another user created answers exactly what a thread that does not
exist answers (404 `thread_not_found`), so ids reveal nothing. Everything goes through the
agent port.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import anyio
from ag_ui.core import (
    AgentCapabilities,
    HumanInTheLoopCapabilities,
    IdentityCapabilities,
    MessagesSnapshotEvent,
    ReasoningCapabilities,
    StateCapabilities,
    ToolsCapabilities,
    TransportCapabilities,
)
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.encoding import codec
from steerable_bridge.runtime.ports.port import AgentPort
from steerable_bridge.runtime.ports.storage import SessionNotFound, SessionOwned, StoreError
from steerable_bridge.transports.agui.identity import AuthRefused, Identity
from steerable_bridge.transports.agui.native import interrupt
from steerable_bridge.transports.agui.resume import EventId, resume
from steerable_bridge.transports.agui.stream import EventStream, StreamRefused, Write
from steerable_bridge.transports.agui.threads import Thread, Threads

__all__ = ["ThreadRoutes", "not_found"]

MAX_PAGE = 200
LIST_TIMEOUT_S = 30.0
"""The longest `GET /agent/threads` may take (the store, a bridged agent's own list)."""

ErrorBody = Callable[..., JSONResponse]


def not_found(error: ErrorBody, thread_id: str) -> JSONResponse:
    """The one answer for a thread that does not exist or is another user's."""
    return error(
        404,
        "thread_not_found",
        f"thread {thread_id[:200]} does not exist; list your threads with GET /agent/threads",
    )


def _dump(model: Any) -> Any:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


class ThreadRoutes:
    """The endpoints around threads (see the module docstring)."""

    def __init__(
        self,
        port: AgentPort,
        threads: Threads,
        identity: Identity,
        error: ErrorBody,
        *,
        keepalive_s: float,
        version: str,
    ) -> None:
        self.port = port
        self.threads = threads
        self.identity = identity
        self.error = error
        self.keepalive_s = keepalive_s
        self.version = version
        self._capabilities: dict[str, Any] | None = None

    async def who(self, request: Request) -> str | Response | None:
        """The request's user, or the 401 that refuses it."""
        try:
            return await self.identity.user(request)
        except AuthRefused as refused:
            return self.error(401, refused.code, refused.message)

    async def visible(self, user: str | None, thread_id: str) -> bool:
        """Whether the thread exists and `user` may see it (every thread, single-user)."""
        record = await self.port.describe(thread_id)
        if record is None:
            return False
        return not self.identity.multi_user or record.user == user

    async def owned_by_other(self, user: str | None, thread_id: str) -> bool:
        """Whether the thread exists and another user created it (a run must not reach it)."""
        if not self.identity.multi_user:
            return False
        record = await self.port.describe(thread_id)
        return record is not None and record.user != user

    # -- the routes -------------------------------------------------------------------------

    async def list_threads(self, request: Request) -> Response:
        user = await self.who(request)
        if isinstance(user, Response):
            return user
        try:
            limit = int(request.query_params.get("limit", "50"))
        except ValueError:
            limit = 0
        if not 1 <= limit <= MAX_PAGE:
            return self.error(400, "invalid_limit", f"limit must be 1 to {MAX_PAGE}; send one")
        try:
            with anyio.fail_after(LIST_TIMEOUT_S):
                page = await self.port.list(
                    cursor=request.query_params.get("cursor") or None,
                    limit=limit,
                    user=user if self.identity.multi_user else None,
                )
        except StoreError as err:
            status = 400 if err.code == "invalid_cursor" else 503
            return self.error(status, err.code, err.message)
        except TimeoutError:
            return self.error(
                503, "list_timeout", f"listing threads took over {LIST_TIMEOUT_S:g} s; retry"
            )
        rows = [
            {
                "threadId": record.session_id,
                "title": record.title,
                "createdAt": record.created_at,
                "updatedAt": record.updated_at,
                "running": await self.port.is_running(record.session_id),
            }
            for record in page.records
        ]
        return JSONResponse({"threads": rows, "nextCursor": page.next_cursor})

    async def snapshot(self, request: Request) -> Response:
        user = await self.who(request)
        if isinstance(user, Response):
            return user
        thread_id = request.path_params["thread_id"]
        if not await self.visible(user, thread_id):
            return not_found(self.error, thread_id)
        try:
            conversation = await self.port.load(thread_id)
            items = await self.port.replay_after(thread_id, -1)
        except SessionNotFound:
            return not_found(self.error, thread_id)
        history = Thread(thread_id)
        history.take_replay(items)
        events = [item.event for item in items]
        interrupts: list[Any] = []
        pending: list[str] = []
        final = next((e for e in reversed(events) if isinstance(e, ev.RunFinished)), None)
        waiting = set(conversation.open_calls)
        if final is not None and not conversation.running:
            offered = _offered_options(events)
            interrupts = [
                _dump(interrupt(item, offered.get(item.tool_call_id or "")))
                for item in final.interrupts
                if item.tool_call_id is None or item.tool_call_id in waiting
            ]
            pending = [cid for cid in final.pending_tool_call_ids if cid in waiting]
        body = _dump(MessagesSnapshotEvent(messages=history.messages()))
        body.update(
            threadId=thread_id,
            title=conversation.title,
            state=conversation.state,
            running=conversation.running,
            lastEventId=str(items[-1].last_seq if items else -1),
            interrupts=interrupts,
            pendingToolCallIds=pending,
        )
        return JSONResponse(body)

    async def delete(self, request: Request) -> Response:
        user = await self.who(request)
        if isinstance(user, Response):
            return user
        thread_id = request.path_params["thread_id"]
        if not await self.visible(user, thread_id):
            return not_found(self.error, thread_id)
        await self.port.cancel(thread_id, "the thread was deleted")
        try:
            deleted = await self.port.delete(thread_id)
        except SessionOwned as err:
            return self.error(409, "thread_busy", f"{err}; or stop its run first, then delete")
        thread = self.threads.get(thread_id)
        thread.forget()
        self.threads.discard(thread)
        if not deleted:
            return not_found(self.error, thread_id)
        return Response(status_code=204)

    async def events(self, request: Request) -> Response | EventStream:
        user = await self.who(request)
        if isinstance(user, Response):
            return user
        thread_id = request.path_params["thread_id"]
        given = request.headers.get("last-event-id") or request.query_params.get("after")
        try:
            after = EventId.parse(given) if given else EventId(-1)
        except ValueError:
            return self.error(
                400,
                "invalid_event_id",
                f"{(given or '')[:60]!r} is not an event id of this server (like 57 or 57.0); send"
                " the id of the last event received, or -1 for the whole thread",
            )
        if not await self.visible(user, thread_id):
            return not_found(self.error, thread_id)
        legacy = request.query_params.get("protocol", "1").split(".", 1)[0] == "0"
        thread = self.threads.get(thread_id)
        refusal = not_found(self.error, thread_id)
        following = anyio.CancelScope()  # a client gone: stop following the run for it

        async def produce(write: Write) -> None:
            wrote = False

            async def counted(data: bytes) -> None:
                nonlocal wrote
                wrote = True
                await write(data)

            try:
                with following:
                    await resume(self.port, thread, after, counted, legacy_outcomes=legacy)
            except SessionNotFound:  # deleted in between
                if not wrote:
                    raise StreamRefused(refusal) from None

        return EventStream(produce, on_disconnect=following.cancel, keepalive_s=self.keepalive_s)

    async def capabilities(self, request: Request) -> Response:
        user = await self.who(request)
        if isinstance(user, Response):
            return user
        if self._capabilities is None:
            self._capabilities = self._build_capabilities()
        return JSONResponse(self._capabilities)

    def _build_capabilities(self) -> dict[str, Any]:
        info = self.port.info()
        capabilities = AgentCapabilities(
            identity=IdentityCapabilities(
                name=info.name, type="steerable-bridge", version=info.version
            ),
            transport=TransportCapabilities(streaming=True, resumable=True),
            tools=ToolsCapabilities(supported=True, client_provided=True, parallel_calls=True),
            state=StateCapabilities(snapshots=True, deltas=True, persistent_state=True),
            reasoning=ReasoningCapabilities(supported=True, streaming=True),
            human_in_the_loop=HumanInTheLoopCapabilities(
                supported=True, approvals=True, interrupts=True, interventions=info.can_steer
            ),
            custom={
                "steerable": {
                    "steering": info.can_steer,
                    "followUp": info.can_steer,
                    "stop": True,
                    "threads": True,
                    "reconnect": "last-event-id",
                    "models": list(info.models),
                    "defaultModel": info.default_model,
                    "auth": self.identity.name,
                }
            },
        )
        return dict(_dump(capabilities))


def _offered_options(events: Sequence[ev.LoopEvent]) -> dict[str, Any]:
    """Call id → `{"steerable": {"options": [...]}}`: the permission options last offered
    for it (what CUSTOM `steerable.permission_requested` carried), so a client opening the
    thread from its snapshot offers the same choices as the live stream did."""
    offered: dict[str, Any] = {}
    for event in events:
        if isinstance(event, ev.PermissionRequested):
            options = codec.event_to_jsonable(event)["options"]
            offered[event.call_id] = {"steerable": {"options": options}}
    return offered
