"""ACP transcript validity: the rules a session's JSON-RPC traffic must keep, each with an id.

`check_acp_transcript(messages)` reads a transcript (see `transcript.py`: every message in
both directions, in wire order, tagged with its sender) and returns one `Finding` per broken
rule. It checks framing (JSON-RPC 2.0), that every message validates against the SDK's
schema models for its method (requests, results, errors and notifications), that every
request is answered once, and the behaviour editors rely on: conversation updates only while
a `session/prompt` is open (or while `session/load` replays), nothing after the response,
`tool_call` before any `tool_call_update` of that id, status only moving forward, stop reason
`cancelled` after `session/cancel`, `session/load` replaying before it responds and
`session/resume` not replaying at all, and `elicitation/create` only in a mode the client
advertised in `initialize` (`clientCapabilities.elicitation.form` / `.url`), a url-mode one
naming an http(s) page under an `elicitationId` not used before, and `elicitation/complete`
only for such an id, once. Schema 1.25:
`notice` / `compaction_update` / `compaction_summary_chunk` validate against the generated
stable models and only after the client advertised `session.notices` / `session.compaction`;
a compaction changes nothing once it ended; `initialize` offers only `agent` / `terminal`
auth methods.
The rules for client-served flows and state kept across `session/load`
(`acp_flow_rules.py`) run too.
`_steerable/event` notifications must carry valid LoopEvents with increasing `seq` (a
`session/load` replay starts them over). Nothing here repairs a transcript; it only reports.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from acp import schema as s
from pydantic import BaseModel, RootModel, ValidationError

from steerable_bridge.conformance.findings import Finding, Rule
from steerable_bridge.conformance.transcript import Sender, WireMessage, as_transcript
from steerable_bridge.runtime.encoding import codec

__all__ = [
    "ACP_RULES",
    "EVENT_METHOD",
    "SESSION_LEVEL_UPDATES",
    "V125_UPDATES",
    "check_acp_transcript",
]

EVENT_METHOD = "_steerable/event"
"""The extension notification that carries every LoopEvent to a client that opted in."""

ACP_RULES: tuple[Rule, ...] = (
    Rule(id="acp.jsonrpc", requires="every message is a JSON-RPC 2.0 request, notification or"
         " response"),
    Rule(id="acp.schema", requires="params, results and errors validate against the acp.schema"
         " model of their method"),
    Rule(id="acp.response-unmatched", requires="every response answers one open request of the"
         " other side, once"),
    Rule(id="acp.unanswered", requires="every request gets a response"),
    Rule(id="acp.update-outside-prompt", requires="conversation updates and permission requests"
         " only while a session/prompt is open"),
    Rule(id="acp.after-response", requires="nothing about a turn after its session/prompt"
         " response"),
    Rule(id="acp.tool-call-order", requires="tool_call comes once, before any tool_call_update of"
         " that id"),
    Rule(id="acp.status-regress", requires="a tool call's status only moves forward (pending →"
         " in_progress → completed | failed)"),
    Rule(id="acp.cancel-stop-reason", requires="a prompt cancelled with session/cancel ends with"
         " stopReason cancelled"),
    Rule(id="acp.load-replay", requires="session/load replays the conversation before it"
         " responds"),
    Rule(id="acp.resume-replay", requires="session/resume does not replay the conversation"),
    Rule(id="acp.elicitation-mode", requires="elicitation/create only in a mode (form, url) the"
         " client advertised in clientCapabilities.elicitation"),
    Rule(id="acp.elicitation-url", requires="a url-mode elicitation/create names an absolute"
         " http(s) url and an elicitationId no earlier elicitation of the connection used"),
    Rule(id="acp.elicitation-complete", requires="elicitation/complete names the elicitationId"
         " of an earlier url-mode elicitation/create, and completes it once"),
    Rule(id="acp.event-channel", requires="_steerable/event carries a valid LoopEvent of that"
         " session, seq increasing"),
    Rule(id="acp.notice-capability", requires="notice updates only after the client advertised"
         " clientCapabilities.session.notices in initialize"),
    Rule(id="acp.compaction-capability", requires="compaction_update and"
         " compaction_summary_chunk only after the client advertised"
         " clientCapabilities.session.compaction in initialize"),
    Rule(id="acp.compaction-lifecycle", requires="a compaction (by compactionId) gets no"
         " summary chunk and no other status once it is completed, failed or cancelled"),
    Rule(id="acp.auth-methods", requires="initialize offers only the stable auth method types"
         " agent (type omitted or \"agent\") and terminal"),
)  # fmt: skip

V125_UPDATES = frozenset({"notice", "compaction_update", "compaction_summary_chunk"})
"""`sessionUpdate` kinds of schema 1.25 that the SDK 0.12.1 models lack; they validate
against the generated `schema/stable.py` models (loaded on first need)."""

_COMPACTION_DONE = frozenset({"completed", "failed", "cancelled"})


class ElicitationCreate(RootModel[s.CreateElicitationRequest]):
    """`elicitation/create` params (the SDK has them as a union, not a model)."""


class ElicitationAnswer(RootModel[s.CreateElicitationResponse]):
    """`elicitation/create` result: accept (content) / decline / cancel."""


_CLIENT_REQUESTS: dict[str, tuple[type[BaseModel] | None, type[BaseModel]]] = {
    "initialize": (s.InitializeRequest, s.InitializeResponse),
    "authenticate": (s.AuthenticateRequest, s.AuthenticateResponse),
    "logout": (s.LogoutRequest, s.LogoutResponse),
    "session/new": (s.NewSessionRequest, s.NewSessionResponse),
    "session/load": (s.LoadSessionRequest, s.LoadSessionResponse),
    "session/list": (s.ListSessionsRequest, s.ListSessionsResponse),
    "session/delete": (s.DeleteSessionRequest, s.DeleteSessionResponse),
    "session/fork": (s.ForkSessionRequest, s.ForkSessionResponse),
    "session/resume": (s.ResumeSessionRequest, s.ResumeSessionResponse),
    "session/close": (s.CloseSessionRequest, s.CloseSessionResponse),
    "session/set_mode": (s.SetSessionModeRequest, s.SetSessionModeResponse),
    "session/set_config_option": (None, s.SetSessionConfigOptionResponse),
    "session/prompt": (s.PromptRequest, s.PromptResponse),
}
_AGENT_REQUESTS: dict[str, tuple[type[BaseModel] | None, type[BaseModel]]] = {
    "session/request_permission": (s.RequestPermissionRequest, s.RequestPermissionResponse),
    "fs/read_text_file": (s.ReadTextFileRequest, s.ReadTextFileResponse),
    "fs/write_text_file": (s.WriteTextFileRequest, s.WriteTextFileResponse),
    "terminal/create": (s.CreateTerminalRequest, s.CreateTerminalResponse),
    "terminal/output": (s.TerminalOutputRequest, s.TerminalOutputResponse),
    "terminal/wait_for_exit": (s.WaitForTerminalExitRequest, s.WaitForTerminalExitResponse),
    "terminal/kill": (s.KillTerminalRequest, s.KillTerminalResponse),
    "terminal/release": (s.ReleaseTerminalRequest, s.ReleaseTerminalResponse),
    "elicitation/create": (ElicitationCreate, ElicitationAnswer),
}
_NOTIFICATIONS: dict[tuple[Sender, str], type[BaseModel]] = {
    ("client", "session/cancel"): s.CancelNotification,
    ("client", "$/cancel_request"): s.CancelRequestNotification,
    ("agent", "session/update"): s.SessionNotification,
    ("agent", "elicitation/complete"): s.CompleteElicitationNotification,
}

SESSION_LEVEL_UPDATES = frozenset(
    {
        "available_commands_update",
        "current_mode_update",
        "config_option_update",
        "session_info_update",
        "usage_update",
        "notice",
    }
)
"""Update variants about the session, not a turn: allowed outside a prompt."""

_STATUS_RANK = {"pending": 0, "in_progress": 1, "completed": 2, "failed": 2}


@dataclass(slots=True)
class _Session:
    open_kind: str | None = None
    """'prompt', 'load' or 'resume' while such a request is open."""
    open_id: object = None
    last_closed: str | None = None
    cancelled: bool = False
    tools: dict[str, str | None] = field(default_factory=dict)
    last_seq: int = -1
    compactions: dict[str, str] = field(default_factory=dict)
    """compactionId → its last status (a first summary chunk opens it in_progress)."""


@dataclass(slots=True)
class _Request:
    method: str
    session_id: str | None
    index: int


class _Checker:
    def __init__(self, lines: Sequence[int] | None = None) -> None:
        self.lines = lines
        self.findings: list[Finding] = []
        self.where = ""
        self.open: dict[tuple[Sender, object], _Request] = {}
        self.sessions: dict[str, _Session] = {}
        self.elicitation: set[str] | None = None
        """The elicitation modes the client advertised in `initialize` (None: not seen)."""
        self.url_elicitations: dict[str, bool] = {}
        """elicitationId of each url-mode elicitation/create → whether it was completed."""
        self.session_caps: set[str] | None = None
        """The v1.25 `clientCapabilities.session` keys advertised (notices, compaction)."""

    def report(self, rule_id: str, message: str) -> None:
        self.findings.append(Finding(rule_id=rule_id, message=message, where=self.where))

    def session(self, session_id: str) -> _Session:
        return self.sessions.setdefault(session_id, _Session())

    def check(self, index: int, entry: WireMessage) -> None:
        message = entry.message
        method = message.get("method")
        self.where = f"{self.place(index)} ({entry.sender} {method or 'response'})"
        if message.get("jsonrpc") != "2.0":
            self.report("acp.jsonrpc", "'jsonrpc' must be the string \"2.0\"")
        if isinstance(method, str):
            if "id" in message:
                self.on_request(index, entry.sender, method, message)
            else:
                self.on_notification(entry.sender, method, message.get("params"))
        elif message.get("id") is None and "error" in message and "result" not in message:
            # The answer to a request whose id could not be read (a parse error): JSON-RPC
            # sends id null; some agents (codex-acp) leave the id out. Either answers no one.
            self.validate(s.Error, message["error"], "error")
        elif "id" in message:
            self.on_response(entry.sender, message)
        else:
            self.report("acp.jsonrpc", "neither a request, a notification nor a response")

    def place(self, index: int) -> str:
        """Where message `index` is: its line in the record file when known."""
        if self.lines is not None and index < len(self.lines):
            return f"line {self.lines[index]}"
        return f"message {index}"

    # -- framing and schema -----------------------------------------------------------------

    def validate(self, model: type[BaseModel] | None, value: object, what: str) -> bool:
        if model is None:
            return True
        try:
            model.model_validate(value)
        except ValidationError as err:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}"
                for e in err.errors()[:5]
            )
            self.report("acp.schema", f"{what} does not validate against {model.__name__}:"
                        f" {problems}")  # fmt: skip
            return False
        return True

    def on_request(
        self, index: int, sender: Sender, method: str, message: Mapping[str, Any]
    ) -> None:
        params = message.get("params")
        table = _CLIENT_REQUESTS if sender == "client" else _AGENT_REQUESTS
        if method in table:
            model = table[method][0]
            if method == "session/set_config_option" and isinstance(params, Mapping):
                model = (
                    s.SetSessionConfigOptionBooleanRequest
                    if params.get("type") == "boolean"
                    else s.SetSessionConfigOptionSelectRequest
                )
            self.validate(model, params, f"{method} params")
        elif not method.startswith("_"):
            self.report("acp.schema", f"{sender} sent unknown method {method!r}")
        key = (sender, message["id"])
        if key in self.open:
            self.report("acp.jsonrpc", f"request id {message['id']!r} is still in use")
        session_id = params.get("sessionId") if isinstance(params, Mapping) else None
        self.open[key] = _Request(method=method, session_id=session_id, index=index)
        opens_turn = method in ("session/prompt", "session/load", "session/resume")
        if sender == "client" and isinstance(session_id, str) and opens_turn:
            state = self.session(session_id)
            state.open_kind = method.removeprefix("session/")
            state.open_id = message["id"]
            state.cancelled = False
            if method == "session/load":  # the replay starts the story over
                state.tools.clear()
                state.compactions.clear()
                state.last_seq = -1
        if method == "initialize" and sender == "client" and isinstance(params, Mapping):
            caps = params.get("clientCapabilities")
            offered = caps.get("elicitation") if isinstance(caps, Mapping) else None
            self.elicitation = (
                {m for m in ("form", "url") if offered.get(m) is not None}
                if isinstance(offered, Mapping)
                else set()
            )
            session = caps.get("session") if isinstance(caps, Mapping) else None
            self.session_caps = (
                {k for k in ("notices", "compaction") if isinstance(session.get(k), Mapping)}
                if isinstance(session, Mapping)
                else set()
            )
        if method == "elicitation/create" and isinstance(params, Mapping):
            mode = params.get("mode")
            known = self.elicitation
            if known is not None and mode in ("form", "url") and mode not in known:
                self.report(
                    "acp.elicitation-mode",
                    f"elicitation/create in {mode} mode, which the client did not advertise",
                )
            if mode == "url":
                self.url_elicitation(params)
        if method in ("session/request_permission", "elicitation/create") and isinstance(
            session_id, str
        ):
            self.turn_output(session_id, method)

    def url_elicitation(self, params: Mapping[str, Any]) -> None:
        """A url-mode elicitation/create: an http(s) page, an id not used before."""
        url, elicitation_id = params.get("url"), params.get("elicitationId")
        parts = urlsplit(url) if isinstance(url, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
            self.report(
                "acp.elicitation-url",
                f"url {url!r} is not an absolute http(s) address; send the page to open",
            )
        if not isinstance(elicitation_id, str):
            return
        if elicitation_id in self.url_elicitations:
            self.report(
                "acp.elicitation-url",
                f"elicitationId {elicitation_id!r} was used before; give each its own id",
            )
            return
        self.url_elicitations[elicitation_id] = False

    def completed(self, params: object) -> None:
        """elicitation/complete: for a known url elicitation, once."""
        elicitation_id = params.get("elicitationId") if isinstance(params, Mapping) else None
        done = self.url_elicitations.get(str(elicitation_id))
        if done is None:
            self.report(
                "acp.elicitation-complete",
                f"elicitation/complete for {elicitation_id!r}, which no url-mode"
                " elicitation/create opened",
            )
        elif done:
            self.report(
                "acp.elicitation-complete", f"elicitation {elicitation_id!r} was completed before"
            )
        else:
            self.url_elicitations[str(elicitation_id)] = True

    def on_notification(self, sender: Sender, method: str, params: object) -> None:
        model = _NOTIFICATIONS.get((sender, method))
        if method == "session/update" and _v125_update(params):
            from steerable_bridge.transports.acp.schema import stable

            model = stable.SessionNotification
        if model is not None:
            if not self.validate(model, params, f"{method} params"):
                return
            if method == "elicitation/complete":
                self.completed(params)
                return
        elif method == EVENT_METHOD and sender == "agent":
            self.on_event(params)
            return
        elif not method.startswith("_"):
            self.report("acp.schema", f"{sender} sent unknown notification {method!r}")
            return
        if not isinstance(params, Mapping):
            return
        session_id = params.get("sessionId")
        if not isinstance(session_id, str):
            return
        if method == "session/cancel":
            state = self.session(session_id)
            if state.open_kind == "prompt":
                state.cancelled = True
        elif method == "session/update":
            self.on_update(session_id, params["update"])

    def on_response(self, sender: Sender, message: Mapping[str, Any]) -> None:
        other: Sender = "agent" if sender == "client" else "client"
        request = self.open.pop((other, message["id"]), None)
        if request is None:
            self.report(
                "acp.response-unmatched",
                f"response to id {message['id']!r}, which no open {other} request has",
            )
            return
        self.where += f" to {request.method}"
        has_result, has_error = "result" in message, "error" in message
        if has_result == has_error:
            self.report("acp.jsonrpc", "a response holds exactly one of 'result' and 'error'")
            return
        if has_error:
            self.validate(s.Error, message["error"], "error")
        else:
            table = _CLIENT_REQUESTS if sender == "agent" else _AGENT_REQUESTS
            if request.method in table:
                self.validate(table[request.method][1], message["result"], "result")
        if sender == "agent" and request.method == "initialize" and has_result:
            self.auth_methods(message["result"])
        if sender == "agent" and isinstance(request.session_id, str):
            self.closes(request, message)

    def auth_methods(self, result: object) -> None:
        methods = result.get("authMethods") if isinstance(result, Mapping) else None
        for method in methods if isinstance(methods, list) else ():
            kind = method.get("type", "agent") if isinstance(method, Mapping) else None
            if kind not in ("agent", "terminal"):
                self.report(
                    "acp.auth-methods",
                    f"auth method of type {kind!r}; the stable schema has only agent and"
                    " terminal (env_var was removed): offer one of those",
                )

    def closes(self, request: _Request, message: Mapping[str, Any]) -> None:
        assert request.session_id is not None
        state = self.session(request.session_id)
        kind = request.method.removeprefix("session/")
        if state.open_kind != kind or kind not in ("prompt", "load", "resume"):
            return
        if kind == "prompt" and state.cancelled:
            result = message.get("result")
            stop = result.get("stopReason") if isinstance(result, Mapping) else None
            if stop != "cancelled":
                got = f"stopReason {stop!r}" if "result" in message else "an error"
                self.report(
                    "acp.cancel-stop-reason",
                    f"the prompt was cancelled with session/cancel but ended with {got};"
                    ' answer stopReason "cancelled"',
                )
        state.open_kind = None
        state.open_id = None
        state.last_closed = kind
        state.cancelled = False

    # -- turn output ------------------------------------------------------------------------

    def turn_output(self, session_id: str, what: str) -> None:
        state = self.session(session_id)
        if state.open_kind in ("prompt", "load"):
            return
        if state.open_kind == "resume" or (
            state.open_kind is None and state.last_closed == "resume"
        ):
            self.report(
                "acp.resume-replay",
                f"{what} during or after session/resume; resume must not replay the conversation",
            )
        elif state.last_closed == "prompt":
            self.report(
                "acp.after-response",
                f"{what} after the session/prompt response; send every update before responding",
            )
        elif state.last_closed == "load":
            self.report(
                "acp.load-replay",
                f"{what} after the session/load response; replay everything before responding",
            )
        else:
            self.report(
                "acp.update-outside-prompt",
                f"{what} while no session/prompt is open for session {session_id}",
            )

    def on_update(self, session_id: str, update: Mapping[str, Any]) -> None:
        variant = str(update.get("sessionUpdate"))
        if variant in V125_UPDATES:
            self.on_v125_update(session_id, variant, update)
        if variant in SESSION_LEVEL_UPDATES:
            return
        self.turn_output(session_id, f"update {variant}")
        state = self.session(session_id)
        if variant == "tool_call":
            self.on_tool_call(state, update)
        elif variant == "tool_call_update":
            self.on_tool_call_update(state, update)

    def on_v125_update(self, session_id: str, variant: str, update: Mapping[str, Any]) -> None:
        caps = self.session_caps
        needed = "notices" if variant == "notice" else "compaction"
        if caps is not None and needed not in caps:
            rule = "acp.notice-capability" if variant == "notice" else "acp.compaction-capability"
            self.report(rule, f"{variant} sent, but the client did not advertise"
                        f" clientCapabilities.session.{needed}; send it only to clients that"
                        " did (a notice may fall back to an agent message)")  # fmt: skip
        if variant == "notice":
            return
        compactions = self.session(session_id).compactions
        compaction_id = str(update.get("compactionId"))
        before = compactions.get(compaction_id)
        status = update.get("status") if variant == "compaction_update" else "in_progress"
        if before in _COMPACTION_DONE and (variant != "compaction_update" or status != before):
            self.report("acp.compaction-lifecycle", f"{variant} for compaction"
                        f" {compaction_id!r} after it was {before}")  # fmt: skip
            return
        if isinstance(status, str):
            compactions[compaction_id] = status

    def on_tool_call(self, state: _Session, update: Mapping[str, Any]) -> None:
        call_id = str(update.get("toolCallId"))
        if call_id in state.tools:
            self.report("acp.tool-call-order", f"tool_call {call_id!r} was already announced;"
                        " send tool_call_update to change it")  # fmt: skip
        state.tools[call_id] = update.get("status") or "pending"

    def on_tool_call_update(self, state: _Session, update: Mapping[str, Any]) -> None:
        call_id = str(update.get("toolCallId"))
        if call_id not in state.tools:
            self.report("acp.tool-call-order", f"tool_call_update for {call_id!r} before its"
                        " tool_call; announce the call first")  # fmt: skip
            state.tools[call_id] = None
        status = update.get("status")
        if not isinstance(status, str):
            return
        before = state.tools[call_id]
        if before is not None and (
            _STATUS_RANK.get(status, 0) < _STATUS_RANK.get(before, 0)
            or (_STATUS_RANK.get(before) == 2 and status != before)
        ):
            self.report("acp.status-regress", f"tool call {call_id!r} went from {before!r} back"
                        f" to {status!r}")  # fmt: skip
        state.tools[call_id] = status

    def on_event(self, params: object) -> None:
        try:
            event = codec.event_from_jsonable(params)
        except ValidationError as err:
            self.report("acp.event-channel", f"params are not a LoopEvent: {err.errors()[:1]}")
            return
        state = self.session(event.session_id)
        if event.seq <= state.last_seq:
            self.report("acp.event-channel", f"seq {event.seq} is not above the previous"
                        f" {state.last_seq}")  # fmt: skip
        state.last_seq = event.seq
        if event.run_id:
            self.turn_output(event.session_id, f"{EVENT_METHOD} {event.kind}")

    def finish(self, count: int) -> None:
        self.where = f"end of transcript (after {count} messages)"
        for (sender, request_id), request in self.open.items():
            self.report(
                "acp.unanswered",
                f"{sender} request {request.method} (id {request_id!r},"
                f" {self.place(request.index)}) never got a response",
            )


def _order(finding: Finding, lines: Sequence[int] | None) -> int:
    """Wire position of a finding (its 'message N' / 'line N'); the end of transcript last."""
    head = finding.where.split(" ", 2)
    if len(head) >= 2 and head[0] in ("message", "line") and head[1].isdigit():
        return int(head[1])
    return 1 << 62


def _v125_update(params: object) -> bool:
    update = params.get("update") if isinstance(params, Mapping) else None
    return isinstance(update, Mapping) and update.get("sessionUpdate") in V125_UPDATES


def check_acp_transcript(
    messages: Iterable[object], *, lines: Sequence[int] | None = None
) -> list[Finding]:
    """Every rule the transcript breaks, in wire order; empty when it is valid.

    `lines` (one per message) are where each message sits in a saved transcript file; the
    findings then say "line N" instead of "message N" (the index among `messages`).
    """
    transcript = as_transcript(messages)
    checker = _Checker(lines)
    for index, entry in enumerate(transcript):
        checker.check(index, entry)
    checker.finish(len(transcript))
    from steerable_bridge.conformance.acp_flow_rules import check_acp_flows

    flows = check_acp_flows(transcript, lines=lines)
    return sorted([*checker.findings, *flows], key=lambda f: _order(f, lines))
