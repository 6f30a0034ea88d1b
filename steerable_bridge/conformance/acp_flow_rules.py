"""ACP transcript rules for the flows a client serves and the state a session must keep.

`check_acp_flows(transcript)` is run by `check_acp_transcript` beside the core rules and
reports, each with an id in `FLOW_RULES`: file-system and terminal requests the client did
not advertise in `initialize` (`acp.client-capability`); file paths and terminal cwds that
are not absolute (`acp.fs-path`); terminal requests naming a terminal the client never
created for that session, or one already released (`acp.terminal-lifecycle`); terminals
never released by the end of the transcript (`acp.terminal-released`);
a permission request that was open when the client sent `session/cancel`, or came after it,
answered other than `cancelled` (`acp.permission-after-cancel`); and `session/load`
answering with a mode, model or config value other than the one the session was last set to
(`acp.load-keeps-mode`, `acp.load-keeps-model`, `acp.load-keeps-config`: a mode or model
"lost on load"). The current mode comes from session/new or session/load results,
successful `session/set_mode` requests and `current_mode_update`; the model from the
(unstable) `models.currentModelId` and successful `session/set_model`; config values from
`configOptions` results and `config_option_update`. Setting one of a pair (`set_mode` and a
config option of category `mode`; `set_model` and one of category `model`) leaves the other
unjudged, as agents may answer either. Nothing here repairs a transcript.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from steerable_bridge.conformance.findings import Finding, Rule
from steerable_bridge.conformance.transcript import Sender, WireMessage

__all__ = ["FLOW_RULES", "check_acp_flows"]

FLOW_RULES: tuple[Rule, ...] = (
    Rule(id="acp.client-capability", requires="fs/* and terminal/* requests only when the client"
         " advertised that capability in initialize"),
    Rule(id="acp.fs-path", requires="fs paths and terminal cwds are absolute"),
    Rule(id="acp.terminal-lifecycle", requires="terminal requests name a terminal the client"
         " created in that session and that is not yet released"),
    Rule(id="acp.terminal-released", requires="every terminal the agent created is released"),
    Rule(id="acp.permission-after-cancel", requires="a permission request open at (or sent"
         " after) session/cancel is answered with outcome cancelled"),
    Rule(id="acp.load-keeps-mode", requires="session/load answers with the mode the session was"
         " last set to"),
    Rule(id="acp.load-keeps-model", requires="session/load answers with the model the session"
         " was last set to"),
    Rule(id="acp.load-keeps-config", requires="session/load answers with the config values the"
         " session was last set to"),
)  # fmt: skip

_FS = {"fs/read_text_file": "readTextFile", "fs/write_text_file": "writeTextFile"}
_TERMINAL_USE = (
    "terminal/output",
    "terminal/wait_for_exit",
    "terminal/kill",
    "terminal/release",
)


@dataclass(slots=True)
class _State:
    mode: str | None = None
    model: str | None = None
    config: dict[str, object] = field(default_factory=dict)
    categories: dict[str, object] = field(default_factory=dict)
    prompt_id: object = None
    cancelled: bool = False
    asks: dict[object, bool] = field(default_factory=dict)
    """Open permission request ids → whether they must be answered `cancelled`."""
    terminals: dict[str, int] = field(default_factory=dict)
    """Live terminal ids → index of their terminal/create."""


@dataclass(slots=True)
class _Open:
    sender: Sender
    method: str
    params: Mapping[str, Any]
    index: int


class _Flows:
    def __init__(self, lines: Sequence[int] | None) -> None:
        self.lines = lines
        self.findings: list[Finding] = []
        self.where = ""
        self.caps: Mapping[str, Any] | None = None
        self.open: dict[tuple[Sender, object], _Open] = {}
        self.sessions: dict[str, _State] = {}

    def place(self, index: int) -> str:
        if self.lines is not None and index < len(self.lines):
            return f"line {self.lines[index]}"
        return f"message {index}"

    def report(self, rule_id: str, message: str) -> None:
        self.findings.append(Finding(rule_id=rule_id, message=message, where=self.where))

    def state(self, params: Mapping[str, Any]) -> _State | None:
        session = params.get("sessionId")
        return self.sessions.setdefault(session, _State()) if isinstance(session, str) else None

    def check(self, index: int, entry: WireMessage) -> None:
        message = entry.message
        method = message.get("method")
        params = message.get("params")
        params = params if isinstance(params, Mapping) else {}
        self.where = f"{self.place(index)} ({entry.sender} {method or 'response'})"
        if isinstance(method, str) and "id" in message:
            self.open[(entry.sender, message["id"])] = _Open(entry.sender, method, params, index)
            self.on_request(index, entry.sender, method, params, message["id"])
        elif isinstance(method, str):
            self.on_notification(entry.sender, method, params)
        elif "id" in message:
            other: Sender = "agent" if entry.sender == "client" else "client"
            request = self.open.pop((other, message["id"]), None)
            if request is not None:
                self.where += f" to {request.method}"
                self.on_response(request, message)

    # -- requests ---------------------------------------------------------------------------

    def on_request(
        self, index: int, sender: Sender, method: str, params: Mapping[str, Any], rid: object
    ) -> None:
        if sender == "client":
            if method == "initialize":
                caps = params.get("clientCapabilities")
                self.caps = caps if isinstance(caps, Mapping) else {}
            elif method == "session/prompt" and (state := self.state(params)):
                state.prompt_id, state.cancelled = rid, False
            return
        state = self.state(params)
        if method in _FS or method.startswith("terminal/"):
            self.capability(method)
        if method in _FS:
            self.absolute(params.get("path"), f"{method} path")
        if method == "terminal/create" and params.get("cwd") is not None:
            self.absolute(params.get("cwd"), "terminal/create cwd")
        if method in _TERMINAL_USE and state is not None:
            terminal = params.get("terminalId")
            if terminal not in state.terminals:
                self.report(
                    "acp.terminal-lifecycle",
                    f"{method} names terminal {terminal!r}, which the client did not create in"
                    " this session or which was already released; use the id terminal/create"
                    " returned, before terminal/release",
                )
            elif method == "terminal/release":
                del state.terminals[str(terminal)]
        if method == "session/request_permission" and state is not None:
            state.asks[rid] = state.cancelled

    def capability(self, method: str) -> None:
        if self.caps is None:
            return  # no initialize in this transcript: nothing to judge against
        if method in _FS:
            fs = self.caps.get("fs")
            offered = isinstance(fs, Mapping) and fs.get(_FS[method]) is True
        else:
            offered = self.caps.get("terminal") is True
        if not offered:
            self.report(
                "acp.client-capability",
                f"{method}, which the client did not advertise in initialize; check"
                " clientCapabilities before delegating to the client",
            )

    def absolute(self, path: object, what: str) -> None:
        if not isinstance(path, str) or (not path.startswith("/") and not _windows_abs(path)):
            self.report("acp.fs-path", f"{what} {path!r} is not absolute; send absolute paths")

    # -- notifications ----------------------------------------------------------------------

    def on_notification(self, sender: Sender, method: str, params: Mapping[str, Any]) -> None:
        state = self.state(params)
        if state is None:
            return
        if sender == "client" and method == "session/cancel" and state.prompt_id is not None:
            state.cancelled = True
            for rid in state.asks:
                state.asks[rid] = True
        update = params.get("update")
        if sender != "agent" or method != "session/update" or not isinstance(update, Mapping):
            return
        kind = update.get("sessionUpdate")
        if kind == "current_mode_update" and isinstance(update.get("currentModeId"), str):
            state.mode = update["currentModeId"]
        elif kind == "config_option_update":
            self.remember_config(state, update.get("configOptions"))

    # -- responses --------------------------------------------------------------------------

    def on_response(self, request: _Open, message: Mapping[str, Any]) -> None:
        state = self.state(request.params)
        result = message.get("result")
        result = result if isinstance(result, Mapping) else None
        method = request.method
        if method == "session/new" and result is not None:
            state = self.state(result)
        if state is None:
            return
        if method == "session/request_permission":
            self.permission_answered(state, message, result)
        elif method == "session/prompt":
            state.prompt_id, state.cancelled = None, False
        elif method == "terminal/create" and result is not None:
            terminal = result.get("terminalId")
            if isinstance(terminal, str):
                state.terminals[terminal] = request.index
        elif result is None:
            return
        elif method == "session/set_mode" and isinstance(request.params.get("modeId"), str):
            state.mode = request.params["modeId"]
            self.forget(state, "mode")  # a mode config option follows it
        elif method == "session/set_model" and isinstance(request.params.get("modelId"), str):
            state.model = request.params["modelId"]
            self.forget(state, "model")  # a model config option follows it
        elif method == "session/set_config_option":
            option = str(request.params.get("configId"))
            if not self.remember_config(state, result.get("configOptions")):
                state.config[option] = request.params.get("value")
            if state.categories.get(option) == "model":
                state.model = None  # the (unstable) models field follows it
        elif method == "session/load":
            self.compare_load(state, result)
            self.remember(state, result)
        elif method in ("session/new", "session/resume", "session/fork"):
            self.remember(state, result)

    def permission_answered(
        self, state: _State, message: Mapping[str, Any], result: Mapping[str, Any] | None
    ) -> None:
        """A permission request pending at `session/cancel` must be answered "cancelled"."""
        must_cancel = state.asks.pop(message["id"], False)
        outcome = (result or {}).get("outcome")
        got = outcome.get("outcome") if isinstance(outcome, Mapping) else None
        if must_cancel and result is not None and got != "cancelled":
            self.report(
                "acp.permission-after-cancel",
                f"a permission request pending at session/cancel was answered {got!r};"
                ' answer every pending request with outcome "cancelled"',
            )

    def remember(self, state: _State, result: Mapping[str, Any]) -> None:
        modes = result.get("modes")
        if isinstance(modes, Mapping) and isinstance(modes.get("currentModeId"), str):
            state.mode = modes["currentModeId"]
        models = result.get("models")
        if isinstance(models, Mapping) and isinstance(models.get("currentModelId"), str):
            state.model = models["currentModelId"]
        self.remember_config(state, result.get("configOptions"))

    def forget(self, state: _State, category: str) -> None:
        """Stop judging config options of `category`: another request changed them."""
        for option, kind in state.categories.items():
            if kind == category:
                state.config.pop(option, None)

    def remember_config(self, state: _State, options: object) -> bool:
        if not isinstance(options, list):
            return False
        for option in options:
            if isinstance(option, Mapping) and isinstance(option.get("id"), str):
                state.config[option["id"]] = option.get("currentValue")
                state.categories[option["id"]] = option.get("category")
        return True

    def compare_load(self, state: _State, result: Mapping[str, Any]) -> None:
        modes = result.get("modes")
        now = modes.get("currentModeId") if isinstance(modes, Mapping) else None
        if state.mode is not None and now is not None and now != state.mode:
            self.report(
                "acp.load-keeps-mode",
                f"session/load answered mode {now!r}, but the session was in {state.mode!r};"
                " restore the session's mode on load",
            )
        models = result.get("models")
        model = models.get("currentModelId") if isinstance(models, Mapping) else None
        if state.model is not None and model is not None and model != state.model:
            self.report(
                "acp.load-keeps-model",
                f"session/load answered model {model!r}, but the session used {state.model!r};"
                " restore the session's model on load",
            )
        options = result.get("configOptions")
        for option in options if isinstance(options, list) else []:
            if not isinstance(option, Mapping) or option.get("id") not in state.config:
                continue
            was = state.config[option["id"]]
            if option.get("currentValue") != was:
                self.report(
                    "acp.load-keeps-config",
                    f"session/load answered {option['id']!r} = {option.get('currentValue')!r},"
                    f" but the session had {was!r}; restore its config on load",
                )

    def finish(self, count: int) -> None:
        self.where = f"end of transcript (after {count} messages)"
        for session, state in self.sessions.items():
            for terminal, index in state.terminals.items():
                self.report(
                    "acp.terminal-released",
                    f"terminal {terminal!r} of session {session} (created at"
                    f" {self.place(index)}) was never released; send terminal/release",
                )


def _windows_abs(path: str) -> bool:
    return len(path) > 2 and path[1] == ":" and path[2] in "\\/"


def check_acp_flows(
    transcript: Sequence[WireMessage], *, lines: Sequence[int] | None = None
) -> list[Finding]:
    """Every `FLOW_RULES` rule the transcript breaks, in wire order."""
    flows = _Flows(lines)
    for index, entry in enumerate(transcript):
        flows.check(index, entry)
    flows.finish(len(transcript))
    return flows.findings
