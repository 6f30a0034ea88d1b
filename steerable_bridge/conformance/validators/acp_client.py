"""The ACP client validator: a reference agent that grades the client talking to it.

`ClientValidator` implements the agent side of ACP directly on the `acp` SDK (a plain class,
not a subclass of `acp.Agent`, so a method it does not implement is "method not found").
Point an editor at `steerable-bridge acp --validate-client --report PATH` and send any
prompt: the turn is a `Walkthrough` of every feature the client advertised, and it ends
with the summary table as an agent message and the same report written as JSON (and JUnit
XML with `--junit`). Besides the walk-through it grades what the client sends on its own —
`initialize` (raw protocolVersion and capabilities), `session/new`, the prompt's content
blocks against the prompt capabilities it was offered, `session/set_mode`,
`session/set_config_option`, and `session/load` (the whole conversation is replayed) /
`session/resume` (nothing is replayed) when the client uses them — and runs the conformance
suite's ACP transcript rules over the raw messages. It never writes to stdout itself:
stdout is the protocol stream. `acp_client_run.py` serves it as a process.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
from acp import (
    PROTOCOL_VERSION,
    RequestError,
    update_agent_message_text,
    update_user_message,
)
from acp.interfaces import Client
from acp.schema import (
    AgentCapabilities,
    ClientCapabilities,
    Implementation,
    InitializeResponse,
    ListSessionsResponse,
    LoadSessionResponse,
    NewSessionResponse,
    PromptCapabilities,
    PromptResponse,
    ResumeSessionResponse,
    SessionCapabilities,
    SessionInfo,
    SessionListCapabilities,
    SessionMode,
    SessionModeState,
    SessionResumeCapabilities,
    SetSessionConfigOptionResponse,
    SetSessionModeResponse,
)

from steerable_bridge.conformance.acp_rules import check_acp_transcript
from steerable_bridge.conformance.validators.client_session import (
    CONFIG_ID,
    CONFIG_VALUES,
    MODES,
    CheckLog,
    ValidatorSession,
    ValidatorSettings,
    config_options,
)
from steerable_bridge.conformance.validators.client_walkthrough import Walkthrough
from steerable_bridge.conformance.validators.report import (
    Report,
    checks_from_findings,
    write_report,
)
from steerable_bridge.conformance.validators.transcript import Transcript, TranscriptEntry

__all__ = ["ClientValidator"]

VALIDATOR_NAME = "acp-client-validator"


class ClientValidator:
    """The agent half of ACP, answering every prompt with a graded walk-through."""

    def __init__(
        self,
        settings: ValidatorSettings | None = None,
        *,
        transcript: Transcript | None = None,
        report_path: str | Path | None = None,
        junit: bool = False,
    ) -> None:
        self.settings = settings or ValidatorSettings()
        self.transcript = transcript or Transcript("agent")
        self.report_path = Path(report_path) if report_path else None
        self.junit = junit
        self.log = CheckLog()
        self.client_info: Implementation | None = None
        self.capabilities: ClientCapabilities | None = None
        self.sessions: dict[str, ValidatorSession] = {}
        self.last_report: Report | None = None
        self._conn: Client | None = None

    def on_connect(self, conn: Client) -> None:
        self._conn = conn

    @property
    def conn(self) -> Client:
        if self._conn is None:
            raise RuntimeError("the validator is not connected; run it with acp.run_agent")
        return self._conn

    # -- what the client sends -----------------------------------------------------------

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: ClientCapabilities | None = None,
        client_info: Implementation | None = None,
        **kwargs: Any,
    ) -> InitializeResponse:
        self.capabilities = client_capabilities
        self.client_info = client_info
        raw = self._last_request("initialize")
        params = raw.get("params") if raw else None
        version = params.get("protocolVersion") if isinstance(params, dict) else None
        if not isinstance(version, int) or isinstance(version, bool):
            self.log.record(
                "client.initialize", "fail", f"protocolVersion must be an integer, got {version!r}"
            )
        elif not isinstance(params, dict) or not isinstance(
            params.get("clientCapabilities", {}), dict
        ):
            self.log.record("client.initialize", "fail", "clientCapabilities must be an object")
        else:
            self.log.record(
                "client.initialize",
                "pass",
                f"protocolVersion {version}; advertised: "
                + (", ".join(_advertised(client_capabilities)) or "nothing optional"),
            )
        return InitializeResponse(
            protocol_version=min(protocol_version, PROTOCOL_VERSION)
            if protocol_version >= 1
            else PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(
                load_session=True,
                prompt_capabilities=PromptCapabilities(
                    image=False, audio=False, embedded_context=False
                ),
                session_capabilities=SessionCapabilities(
                    list=SessionListCapabilities(), resume=SessionResumeCapabilities()
                ),
            ),
            agent_info=Implementation(name="steerable-bridge-client-validator", version=_version()),
            auth_methods=[],
        )

    async def new_session(
        self,
        cwd: str,
        additional_directories: list[str] | None = None,
        mcp_servers: list[Any] | None = None,
        **kwargs: Any,
    ) -> NewSessionResponse:
        self._grade_session_request("client.session_new", "session/new", cwd)
        session = ValidatorSession(id=f"validator-{secrets.token_hex(6)}", cwd=cwd)
        self.sessions[session.id] = session
        return NewSessionResponse(
            session_id=session.id,
            modes=_modes(session),
            config_options=config_options(session.config_value),
        )

    async def load_session(
        self,
        cwd: str,
        session_id: str,
        mcp_servers: list[Any] | None = None,
        additional_directories: list[str] | None = None,
        **kwargs: Any,
    ) -> LoadSessionResponse:
        session = self.sessions.get(session_id)
        if session is None:
            self.log.record(
                "client.session_load",
                "skipped",
                f"client asked to load {session_id!r}, which this validator process never"
                " created (sessions live only as long as the process)",
            )
            raise RequestError.resource_not_found(session_id)
        if not self._grade_session_request("client.session_load", "session/load", cwd):
            return LoadSessionResponse(
                modes=_modes(session), config_options=config_options(session.config_value)
            )
        walk = Walkthrough(self.conn, session, self.capabilities, self.settings, self.log)
        replay = list(session.history)
        for update in replay:
            await self.conn.session_update(session_id=session.id, update=update)
        if self._probe_failed():
            alive, detail = True, "uptake not confirmed (the client does not answer pings)"
        else:
            alive, detail = await walk.probe()
        self.log.record(
            "client.session_load",
            "pass" if alive else "fail",
            f"replayed the whole conversation ({len(replay)} updates) before answering; {detail}",
        )
        return LoadSessionResponse(
            modes=_modes(session), config_options=config_options(session.config_value)
        )

    async def resume_session(
        self,
        session_id: str,
        cwd: str,
        additional_directories: list[str] | None = None,
        mcp_servers: list[Any] | None = None,
        **kwargs: Any,
    ) -> ResumeSessionResponse:
        session = self.sessions.get(session_id)
        if session is None:
            self.log.record(
                "client.session_resume",
                "skipped",
                f"client asked to resume {session_id!r}, which this validator process never"
                " created",
            )
            raise RequestError.resource_not_found(session_id)
        if self._grade_session_request("client.session_resume", "session/resume", cwd):
            self.log.record(
                "client.session_resume",
                "pass",
                "resumed without replay; the client kept its own history",
            )
        return ResumeSessionResponse(
            modes=_modes(session), config_options=config_options(session.config_value)
        )

    async def list_sessions(
        self, cwd: str | None = None, cursor: str | None = None, **kwargs: Any
    ) -> ListSessionsResponse:
        found = [
            SessionInfo(session_id=s.id, cwd=s.cwd, title="ACP client validation")
            for s in self.sessions.values()
            if cwd in (None, s.cwd)
        ]
        return ListSessionsResponse(sessions=found)

    async def set_session_mode(
        self, session_id: str, mode_id: str, **kwargs: Any
    ) -> SetSessionModeResponse:
        session = self._session(session_id)
        offered = [m for m, _ in MODES]
        if mode_id not in offered:
            self.log.record(
                "client.set_mode",
                "fail",
                f"asked for mode {mode_id!r}, which was not offered ({', '.join(offered)})",
            )
            raise RequestError.invalid_params({"modeId": mode_id, "offered": offered})
        session.mode_id = mode_id
        self.log.record("client.set_mode", "pass", f"switched to offered mode {mode_id!r}")
        return SetSessionModeResponse()

    async def set_config_option(
        self, config_id: str, session_id: str, value: str | bool, **kwargs: Any
    ) -> SetSessionConfigOptionResponse:
        session = self._session(session_id)
        offered = [v for v, _ in CONFIG_VALUES]
        if config_id != CONFIG_ID or value not in offered:
            self.log.record(
                "client.set_config_option",
                "fail",
                f"set {config_id!r} = {value!r}; offered only {CONFIG_ID!r} with"
                f" {', '.join(offered)}",
            )
            raise RequestError.invalid_params({"configId": config_id, "value": value})
        session.config_value = str(value)
        self.log.record(
            "client.set_config_option", "pass", f"set {config_id!r} to offered value {value!r}"
        )
        return SetSessionConfigOptionResponse(config_options=config_options(session.config_value))

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        session = self._session(session_id)
        self._grade_prompt()
        for block in prompt:
            session.history.append(update_user_message(block))
        session.cancelled = anyio.Event()
        session.cancelled_at = None
        walk = Walkthrough(self.conn, session, self.capabilities, self.settings, self.log)
        try:
            cancelled = await walk.run()
        except BaseException:
            # The connection went away mid-turn: keep what was graded so far.
            self.log.record(
                "turn.completed", "fail", "the connection ended during the walk-through"
            )
            self.finish()
            raise
        self.log.record("turn.completed", "pass", "the walk-through ran to its end")
        prompt_request = self._last_request("session/prompt")
        report = self.report(
            closing=(
                prompt_request.get("id") if prompt_request else None,
                "cancelled" if cancelled else "end_turn",
            )
        )
        await walk.send(update_agent_message_text("\n\n" + report.to_markdown() + "\n"))
        if self.report_path is not None:
            written = write_report(report, self.report_path, junit=self.junit)
            await walk.send(
                update_agent_message_text(f"\n\nReport written to {', '.join(map(str, written))}\n")
            )
        return PromptResponse(stop_reason="cancelled" if cancelled else "end_turn")

    def finish(self) -> Report:
        """The report as it stands, written to the report path (used when no turn ended it)."""
        if not self.log.has("turn.completed"):
            self.log.record("turn.completed", "skipped", "the client never sent session/prompt")
        report = self.report()
        if self.report_path is not None:
            write_report(report, self.report_path, junit=self.junit)
        return report

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        session = self.sessions.get(session_id)
        if session is not None and not session.cancelled.is_set():
            session.cancelled_at = _monotonic()
            session.cancelled.set()

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise RequestError.method_not_found(f"_{method}")

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None

    # -- grading helpers -------------------------------------------------------------------

    def report(self, closing: tuple[object, str] | None = None) -> Report:
        """Everything graded so far on this connection, with checks that never ran explained.

        `closing` is the open prompt's (request id, stop reason): the transcript rules are
        run as if its response had been sent, since the report is part of that very turn.
        """
        for check_id, what in (
            ("client.session_load", "session/load"),
            ("client.session_resume", "session/resume"),
            ("client.set_mode", "session/set_mode"),
            ("client.set_config_option", "session/set_config_option"),
        ):
            if not self.log.has(check_id):
                self.log.record(
                    check_id, "skipped", f"client did not call {what} during this connection"
                )
        messages = self.transcript.messages()
        if closing is not None and closing[0] is not None:
            response = {"jsonrpc": "2.0", "id": closing[0], "result": {"stopReason": closing[1]}}
            messages.append({"sender": "agent", "message": response})
        checks = checks_from_findings(
            check_acp_transcript(messages),
            clean_id="transcript.rules",
            clean_evidence=f"{len(messages)} JSON-RPC messages keep every ACP transcript rule",
        )
        name = (
            f"{self.client_info.name} {self.client_info.version}"
            if self.client_info
            else "unnamed ACP client"
        )
        self.last_report = Report(VALIDATOR_NAME, name, (*self.log.checks, *checks))
        return self.last_report

    def _probe_failed(self) -> bool:
        return any(c.id == "client.unknown_request" and c.status == "fail" for c in self.log.checks)

    def _session(self, session_id: str) -> ValidatorSession:
        session = self.sessions.get(session_id)
        if session is None:
            raise RequestError.invalid_params(
                {"sessionId": session_id, "hint": "call session/new first"}
            )
        return session

    def _last_request(self, method: str) -> dict[str, Any] | None:
        entry = _last(
            self.transcript.entries,
            lambda e: e.sender == "client" and e.message.get("method") == method,
        )
        return entry.message if entry else None

    def _grade_session_request(self, check_id: str, method: str, cwd: str) -> bool:
        raw = self._last_request(method) or {}
        params = raw.get("params") if isinstance(raw.get("params"), dict) else {}
        assert isinstance(params, dict)
        problems = []
        if not os.path.isabs(cwd):
            problems.append(f"cwd {cwd!r} is not an absolute path")
        if "mcpServers" in params and not isinstance(params["mcpServers"], list):
            problems.append("mcpServers must be a list")
        if method == "session/new" and "mcpServers" not in params:
            problems.append("mcpServers is required (an empty list is fine)")
        if problems:
            self.log.record(check_id, "fail", "; ".join(problems))
            return False
        if method == "session/new":
            self.log.record(
                check_id,
                "pass",
                f"absolute cwd {cwd!r}, mcpServers list of {len(params.get('mcpServers', []))}",
            )
        return True

    def _grade_prompt(self) -> None:
        raw = self._last_request("session/prompt") or {}
        params = raw.get("params") if isinstance(raw.get("params"), dict) else {}
        assert isinstance(params, dict)
        blocks = params.get("prompt")
        if not isinstance(blocks, list) or not blocks:
            self.log.record(
                "client.prompt", "fail", "prompt must be a non-empty list of content blocks"
            )
            return
        kinds = [b.get("type") if isinstance(b, dict) else None for b in blocks]
        unoffered = [k for k in kinds if k not in ("text", "resource_link")]
        if unoffered:
            self.log.record(
                "client.prompt",
                "fail",
                f"sent {', '.join(map(str, unoffered))} blocks, which the agent's"
                " promptCapabilities did not allow (only text and resource_link)",
            )
        else:
            self.log.record(
                "client.prompt",
                "pass",
                f"{len(blocks)} content block(s) of allowed types: {', '.join(map(str, kinds))}",
            )


def _last(entries: Sequence[TranscriptEntry], predicate: Any) -> TranscriptEntry | None:
    for entry in reversed(entries):
        if predicate(entry):
            return entry
    return None


def _advertised(caps: ClientCapabilities | None) -> list[str]:
    if caps is None:
        return []
    found = []
    if caps.fs and caps.fs.read_text_file:
        found.append("fs.readTextFile")
    if caps.fs and caps.fs.write_text_file:
        found.append("fs.writeTextFile")
    if caps.terminal:
        found.append("terminal")
    return found


def _modes(session: ValidatorSession) -> SessionModeState:
    return SessionModeState(
        current_mode_id=session.mode_id,
        available_modes=[SessionMode(id=m, name=n) for m, n in MODES],
    )


def _monotonic() -> float:
    import time

    return time.monotonic()


def _version() -> str:
    from steerable_bridge import __version__

    return __version__
