"""The individual agent-side probes `check acp` runs against a spawned ACP agent.

`AgentProbe` holds one live connection (the SDK's client side), the process, and the raw
transcript, and offers one method per behaviour: `initialize`, `new_session`, `prompt`,
`cancel`, `unknown_method`, `malformed_json`, `load`, `resume`. Each grades what the agent
sent — judged on the raw JSON-RPC messages, since the SDK's models are lenient — into
`checks`, with evidence quoting what came back. Every wait has a deadline from
`AgentCheckSettings`. A prompt the agent refuses for want of credentials, or answers with a
JSON-RPC error from its model (the right way to report an upstream failure), leaves the
prompt-based checks "could not check" (skipped) with the agent's own words, its error data
(`data.details` included) and the end of its stderr — not a failure. Session-level updates
(`available_commands_update`, `session_info_update`, `usage_update`, ...) may come at any
time, after a response too; only turn content counts as "after the response". Nothing here
spawns or kills processes.
"""

from __future__ import annotations

import json
import re
from asyncio.subprocess import Process
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import anyio
from acp import PROTOCOL_VERSION, RequestError, text_block
from acp.client.connection import ClientSideConnection
from acp.schema import ClientCapabilities, Implementation, InitializeResponse
from pydantic import ValidationError

from steerable_bridge.conformance.acp_rules import SESSION_LEVEL_UPDATES
from steerable_bridge.conformance.validators.report import Check, CheckStatus, CouldNotRun
from steerable_bridge.conformance.validators.transcript import (
    Transcript,
    TranscriptEntry,
    response_to,
)

__all__ = [
    "AgentCheckSettings",
    "AgentProbe",
    "CouldNotRun",
    "initialize_response_problems",
    "needs_credentials",
]

PROBE_ID_PREFIX = "steerable-check-"
"""Ids of requests written around the SDK on purpose; the transcript rules skip them."""
PROMPT = "Reply with one short sentence: say hello."
LONG_PROMPT = (
    "Take your time: think it through, make a plan, then count from 1 to 500, one number per"
    " line, using any tools you have."
)
_CREDENTIALS = re.compile(
    r"\bcredentials?\b|(?<![a-z])api[ _-]?keys?(?![a-z])|\bunauthori[sz]ed\b|\b401\b"
    r"|\bauth(entication|orization)? (is )?(required|failed|missing|needed)\b"
    r"|\b(not|isn't|aren't) (logged|signed) in\b|\b(log|sign) ?in (first|required)\b"
    r"|\b(please|run|must) [`'\"]?[\w-]* ?(log|sign) ?in\b"
    r"|\b(missing|invalid|expired|no) (access |auth |api |bearer )?(token|key)s?\b"
    r"|\baccess token\b|\bauth_required\b",
    re.IGNORECASE,
)
"""Words of an agent that lacks credentials. Narrow on purpose: "auth" or "token" alone
also appear in real errors (a context window of N tokens, an author) that must not be
skipped."""
_PROTOCOL_ERRORS = {-32700, -32600, -32601, -32602}
"""Error codes that blame the request itself: our prompt is valid, so these are failures."""
_CONTENT_UPDATES = frozenset(
    {"agent_message_chunk", "agent_thought_chunk", "tool_call", "tool_call_update", "plan"}
)
"""Updates that show the turn itself has started (the cancel probe waits for one)."""


@dataclass(frozen=True, slots=True)
class AgentCheckSettings:
    """Deadlines (seconds) for each kind of answer the agent owes."""

    init_timeout: float = 20.0
    prompt_timeout: float = 90.0
    cancel_timeout: float = 15.0
    probe_timeout: float = 5.0
    quiet_period: float = 0.5
    """How long to keep listening after a response for updates that should not come."""
    cancel_crossing: float = 0.15
    """A prompt that ends other than `cancelled` this soon after session/cancel was sent may
    have ended before the agent read the cancel (the two crossed, which is legal): could not
    check, rather than fail."""


class _Cancelling(Protocol):
    cancelling: set[str]


def needs_credentials(error: RequestError) -> bool:
    """Whether a JSON-RPC error says the agent lacks credentials (auth_required or its words)."""
    return error.code == -32000 or bool(_CREDENTIALS.search(error_text(error)))


def error_text(error: RequestError, limit: int = 600) -> str:
    """The error's message and data as the agent sent them (`data.details` kept whole)."""
    message = str(error)
    data = error.data
    parts = [message]
    if isinstance(data, dict) and isinstance(data.get("details"), str):
        parts.append(f"details: {data['details']}")
        rest = {k: v for k, v in data.items() if k != "details"}
        if rest:
            parts.append(json.dumps(rest, ensure_ascii=False))
    elif data is not None:
        parts.append(json.dumps(data, ensure_ascii=False))
    text = "; ".join(p for p in parts if p)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def initialize_response_problems(raw: object) -> list[str]:
    """What is wrong with a raw initialize result, judged strictly (the SDK model is lenient)."""
    if not isinstance(raw, dict):
        return [f"result must be an object, got {json.dumps(raw)[:80]}"]
    problems = []
    version = raw.get("protocolVersion")
    if not isinstance(version, int) or isinstance(version, bool):
        problems.append(f"protocolVersion must be an integer, got {version!r}")
    caps = raw.get("agentCapabilities", {})
    if not isinstance(caps, dict):
        problems.append("agentCapabilities must be an object")
        caps = {}
    if not isinstance(caps.get("loadSession", False), bool):
        problems.append("agentCapabilities.loadSession must be a boolean")
    for key in ("promptCapabilities", "mcpCapabilities", "sessionCapabilities"):
        if not isinstance(caps.get(key, {}), dict):
            problems.append(f"agentCapabilities.{key} must be an object")
    prompt_caps = caps.get("promptCapabilities", {})
    for key in ("image", "audio", "embeddedContext"):
        if isinstance(prompt_caps, dict) and not isinstance(prompt_caps.get(key, False), bool):
            problems.append(f"agentCapabilities.promptCapabilities.{key} must be a boolean")
    if not isinstance(raw.get("authMethods", []), list):
        problems.append("authMethods must be a list")
    try:
        InitializeResponse.model_validate(raw)
    except ValidationError as err:
        problems.append(f"does not validate as InitializeResponse: {str(err)[:160]}")
    return problems


class AgentProbe:
    """One connection to the agent under test, and the checks graded on it so far."""

    def __init__(
        self,
        conn: ClientSideConnection,
        process: Process,
        transcript: Transcript,
        client: _Cancelling,
        settings: AgentCheckSettings,
        workdir: str,
        stderr_tail: Callable[[], str] = lambda: "",
    ) -> None:
        self.conn = conn
        self.stderr_tail = stderr_tail
        """'; its stderr ends: ...' (or '') — the agent's own account of a failure."""
        self.process = process
        self.transcript = transcript
        self.client = client
        self.settings = settings
        self.workdir = workdir
        self.checks: list[Check] = []
        self.first_turn_text = ""
        self.first_turn_tools: set[str] = set()
        self.crossed_cancels: set[str] = set()
        """Sessions whose session/cancel crossed the prompt's response (see `cancel`)."""

    def record(self, check_id: str, status: CheckStatus, evidence: str) -> None:
        self.checks.append(Check(check_id, status, evidence))

    def skip(self, check_ids: Sequence[str], reason: str) -> None:
        for check_id in check_ids:
            self.record(check_id, "skipped", reason)

    # -- transcript helpers ------------------------------------------------------------

    def _exchange(self, method: str, start: int, session: str | None = None) -> tuple[int, int]:
        """Indices of the latest `method` request since `start` and its response (-1 if none)."""
        entries = self.transcript.entries
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

    def _updates(self, session: str, start: int, end: int | None = None) -> list[TranscriptEntry]:
        entries = self.transcript.entries[start:end]
        return [
            e
            for e in entries
            if e.sender == "agent"
            and e.message.get("method") == "session/update"
            and (e.message.get("params") or {}).get("sessionId") == session
        ]

    async def _late_updates(self, session: str, response: int) -> list[TranscriptEntry]:
        """Turn updates after the response; session-level updates may come at any time."""
        await anyio.sleep(self.settings.quiet_period)
        if response < 0:
            return []
        return [
            e
            for e in self._updates(session, response + 1)
            if _variant(e) not in SESSION_LEVEL_UPDATES
        ]

    # -- probes ------------------------------------------------------------------------

    async def initialize(self) -> InitializeResponse | None:
        try:
            with anyio.fail_after(self.settings.init_timeout):
                init = await self.conn.initialize(
                    protocol_version=PROTOCOL_VERSION,
                    client_capabilities=ClientCapabilities(),
                    client_info=Implementation(name="steerable-bridge-check", version="1"),
                )
        except (TimeoutError, ConnectionError) as err:
            with anyio.move_on_after(1):
                await self.process.wait()
            if self.process.returncode is not None:
                raise CouldNotRun(
                    f"the agent exited with status {self.process.returncode} before answering"
                    " initialize; check the command and its arguments"
                ) from None
            self.record(
                "agent.initialize", "fail", f"no answer to initialize ({type(err).__name__})"
            )
            return None
        except (RequestError, ValidationError) as err:
            self.record("agent.initialize", "fail", f"initialize failed: {str(err)[:200]}")
            return None
        _, response = self._exchange("initialize", 0)
        raw = self.transcript.entries[response].message.get("result") if response >= 0 else None
        problems = initialize_response_problems(raw)
        self.record(
            "agent.initialize.schema",
            "fail" if problems else "pass",
            "; ".join(problems) or "the result validates strictly as InitializeResponse",
        )
        version = raw.get("protocolVersion") if isinstance(raw, dict) else None
        self.record(
            "agent.initialize.version",
            "pass" if version == PROTOCOL_VERSION else "fail",
            f"asked for protocol {PROTOCOL_VERSION}, agent answered {version!r}",
        )
        self.record("agent.initialize.capabilities", "pass", _describe(init))
        return init

    async def new_session(self, *, record: bool = True) -> str | None:
        try:
            with anyio.fail_after(self.settings.init_timeout):
                created = await self.conn.new_session(cwd=self.workdir, mcp_servers=[])
        except TimeoutError:
            self.record("agent.session.new", "fail", "no answer to session/new in time")
            return None
        except (RequestError, ValidationError, ConnectionError) as err:
            status: CheckStatus = (
                "skipped" if isinstance(err, RequestError) and needs_credentials(err) else "fail"
            )
            self.record("agent.session.new", status, f"session/new failed: {str(err)[:200]}")
            return None
        if record:
            self.record("agent.session.new", "pass", f"sessionId {created.session_id!r}")
        return created.session_id

    async def prompt(self, session: str) -> str:
        """Run one short prompt; '' when it ran, else why the prompt-based checks are skipped."""
        start = len(self.transcript)
        try:
            with anyio.fail_after(self.settings.prompt_timeout):
                answer = await self.conn.prompt(session_id=session, prompt=[text_block(PROMPT)])
        except RequestError as err:
            detail = error_text(err)
            if needs_credentials(err):
                reason = f"agent needs credentials it lacks: {detail}"
                self.skip(("agent.prompt", "agent.prompt.nothing_after_response"), reason)
                return "no prompt ran: the agent needs credentials it lacks (see agent.prompt)"
            if err.code not in _PROTOCOL_ERRORS:
                reason = (
                    f"could not check: the agent answered session/prompt with error {err.code}"
                    f" (a failure of its own or of its model, reported correctly): {detail}"
                    + self.stderr_tail()
                )
                self.record("agent.prompt", "skipped", reason)
                self.skip(("agent.prompt.nothing_after_response",), "see agent.prompt")
                return f"no prompt ran: the agent answered error {err.code} (see agent.prompt)"
            self.record(
                "agent.prompt",
                "fail",
                f"session/prompt answered error {err.code} to a valid prompt: {detail}"
                + self.stderr_tail(),
            )
            self.skip(("agent.prompt.nothing_after_response",), "the prompt failed")
            return "the first prompt failed"
        except (TimeoutError, ValidationError, ConnectionError) as err:
            why = (
                f"no answer within {self.settings.prompt_timeout:g} s"
                if isinstance(err, TimeoutError)
                else str(err)[:200]
            )
            self.record("agent.prompt", "fail", f"session/prompt: {why}{self.stderr_tail()}")
            self.skip(("agent.prompt.nothing_after_response",), "the prompt failed")
            return "the first prompt failed"
        _, response = self._exchange("session/prompt", start, session)
        updates = self._updates(session, start, response if response >= 0 else None)
        self.record(
            "agent.prompt",
            "pass",
            f"stopReason {answer.stop_reason!r} after {len(updates)} session/update notifications",
        )
        late = await self._late_updates(session, response)
        self._grade_late("agent.prompt.nothing_after_response", late)
        for entry in updates:
            update = entry.message["params"].get("update", {})
            if update.get("sessionUpdate") == "agent_message_chunk":
                self.first_turn_text += str((update.get("content") or {}).get("text", ""))
            if update.get("sessionUpdate") == "tool_call":
                self.first_turn_tools.add(str(update.get("toolCallId")))
        return ""

    def _grade_late(self, check_id: str, late: list[TranscriptEntry]) -> None:
        if late:
            kinds = ", ".join(_variant(e) for e in late[:5])
            self.record(
                check_id, "fail", f"{len(late)} session/update after the response ({kinds})"
            )
        else:
            self.record(
                check_id,
                "pass",
                f"no session/update within {self.settings.quiet_period:g} s of the response",
            )

    async def cancel(self, session: str) -> None:
        start = len(self.transcript)
        answers: list[Any] = []
        done = anyio.Event()
        ended_at = cancelled_at = 0.0

        async def run_prompt() -> None:
            nonlocal ended_at
            try:
                answers.append(
                    await self.conn.prompt(session_id=session, prompt=[text_block(LONG_PROMPT)])
                )
            except (RequestError, ValidationError, ConnectionError) as err:
                answers.append(err)
            ended_at = anyio.current_time()
            done.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(run_prompt)
            # Wait for the turn's own output (not session news such as the command list,
            # which many agents send first), or for the turn to end without any.
            began = await self.transcript.wait_for(
                lambda e: _is_content(e) or _is_response(e),
                within=self.settings.prompt_timeout,
                start=start,
            )
            if began is not None and not _is_content(began):
                with anyio.move_on_after(self.settings.probe_timeout):
                    await done.wait()
                began = None
            if done.is_set():
                reason = f"the turn ended ({_stop(answers)}) before session/cancel could be sent"
                self.skip(
                    ("agent.cancel.stop_reason", "agent.cancel.nothing_after_response"), reason
                )
                return
            self.client.cancelling.add(session)
            cancelled_at = anyio.current_time()
            await self.conn.cancel(session_id=session)
            with anyio.move_on_after(self.settings.cancel_timeout):
                await done.wait()
            tg.cancel_scope.cancel()
        if not answers:
            self.record(
                "agent.cancel.stop_reason",
                "fail",
                "no response to session/prompt within"
                f" {self.settings.cancel_timeout:g} s of session/cancel",
            )
            self.skip(("agent.cancel.nothing_after_response",), "the prompt never ended")
            return
        stop = _stop(answers)
        when = (
            f"after its first {_variant(began)}"
            if began is not None
            else f"with no turn output after {self.settings.prompt_timeout:g} s"
        )
        crossed = ended_at - cancelled_at
        if stop != "stopReason 'cancelled'" and crossed < self.settings.cancel_crossing:
            # The turn was over before the cancel could reach it: the agent owes no
            # `cancelled` for a turn it had already finished, and the wire cannot tell.
            self.crossed_cancels.add(session)
            self.skip(
                ("agent.cancel.stop_reason",),
                f"could not check: session/cancel sent {when} crossed the response (the"
                f" prompt ended with {stop} {crossed * 1000:.0f} ms later)",
            )
        else:
            self._grade_stop(stop, when)
        _, response = self._exchange("session/prompt", start, session)
        self._grade_late(
            "agent.cancel.nothing_after_response", await self._late_updates(session, response)
        )

    def _grade_stop(self, stop: str, when: str) -> None:
        self.record(
            "agent.cancel.stop_reason",
            "pass" if stop == "stopReason 'cancelled'" else "fail",
            f"session/cancel sent {when}; the prompt ended with {stop}"
            + ("" if stop == "stopReason 'cancelled'" else " (must be stopReason 'cancelled')"),
        )

    async def _raw_request(self, check_id: str, method: str) -> dict[str, Any] | None:
        message = {
            "jsonrpc": "2.0",
            "id": f"{PROBE_ID_PREFIX}{check_id}",
            "method": method,
            "params": {},
        }
        await self.write_raw(json.dumps(message) + "\n")
        self.transcript.note_sent(message)
        entry = await self.transcript.wait_for(
            response_to(message["id"]), within=self.settings.probe_timeout
        )
        return entry.message if entry else None

    async def write_raw(self, text: str) -> None:
        """Write bytes straight to the agent's stdin (whole lines, between SDK writes)."""
        stdin = self.process.stdin
        if stdin is None or stdin.is_closing():
            raise ConnectionError("the agent's stdin is closed")
        stdin.write(text.encode("utf-8"))
        await stdin.drain()

    async def unknown_method(self) -> None:
        for check_id, method in (
            ("agent.unknown_method", "steerable/no_such_method"),
            ("agent.unknown_extension_method", "_steerable/no_such_method"),
        ):
            answer = await self._raw_request(check_id, method)
            code = (answer or {}).get("error", {}).get("code") if answer else None
            if answer is None:
                self.record(
                    check_id,
                    "fail",
                    f"no answer to {method} within {self.settings.probe_timeout:g} s",
                )
            else:
                self.record(
                    check_id,
                    "pass" if code == -32601 else "fail",
                    f"{method} answered"
                    f" {json.dumps(answer.get('error', answer.get('result')))[:160]}"
                    + ("" if code == -32601 else " (expected error -32601 method not found)"),
                )

    async def malformed_json(self) -> None:
        start = len(self.transcript)
        broken = f'{{"jsonrpc": "2.0", "id": "{PROBE_ID_PREFIX}broken", "method": \n'
        try:
            await self.write_raw(broken)
        except (ConnectionError, OSError) as err:
            self.record("agent.malformed_json.parse_error", "fail", f"could not write: {err}")
            return
        self.transcript.note_raw("client", broken)
        entry = await self.transcript.wait_for(
            lambda e: e.sender == "agent" and "method" not in e.message and "error" in e.message,
            within=self.settings.probe_timeout,
            start=start,
        )
        code = entry.message["error"].get("code") if entry else None
        self.record(
            "agent.malformed_json.parse_error",
            "pass" if code == -32700 else "fail",
            "answered a broken JSON line with error -32700"
            if code == -32700
            else f"a broken JSON line got {'error ' + str(code) if entry else 'no answer'}"
            f" within {self.settings.probe_timeout:g} s; JSON-RPC requires a -32700 parse"
            " error (id null)",
        )
        answer = await self._raw_request("alive-after-malformed", "steerable/no_such_method")
        self.record(
            "agent.malformed_json.alive",
            "pass" if answer is not None else "fail",
            "still answered requests afterwards"
            if answer is not None
            else f"no answer to the next request within {self.settings.probe_timeout:g} s",
        )

    async def load(self, session: str, *, prompted: bool) -> None:
        start = len(self.transcript)
        try:
            with anyio.fail_after(self.settings.prompt_timeout):
                await self.conn.load_session(cwd=self.workdir, session_id=session, mcp_servers=[])
        except (TimeoutError, RequestError, ValidationError, ConnectionError) as err:
            self.record(
                "agent.session.load",
                "fail",
                f"session/load failed: {str(err)[:200] or type(err).__name__}",
            )
            return
        _, response = self._exchange("session/load", start, session)
        replay = self._updates(session, start, response if response >= 0 else None)
        late = await self._late_updates(session, response)
        kinds = [e.message["params"].get("update", {}) for e in replay]
        user = "".join(
            str((u.get("content") or {}).get("text", ""))
            for u in kinds
            if u.get("sessionUpdate") == "user_message_chunk"
        )
        agent = "".join(
            str((u.get("content") or {}).get("text", ""))
            for u in kinds
            if u.get("sessionUpdate") == "agent_message_chunk"
        )
        tools = {str(u.get("toolCallId")) for u in kinds if u.get("sessionUpdate") == "tool_call"}
        problems = []
        if prompted and PROMPT not in user:
            problems.append("the user's prompt was not replayed")
        if prompted and agent.strip() != self.first_turn_text.strip():
            problems.append(
                f"replayed agent text ({len(agent)} chars) differs from the turn"
                f" ({len(self.first_turn_text)} chars)"
            )
        if prompted and not self.first_turn_tools <= tools:
            problems.append(
                f"tool calls missing from the replay: {sorted(self.first_turn_tools - tools)}"
            )
        if late:
            problems.append(
                f"{len(late)} replayed update(s) arrived after the session/load response"
                f" ({', '.join(_variant(e) for e in late[:5])})"
            )
        self.record(
            "agent.session.load",
            "fail" if problems else "pass",
            "; ".join(problems)
            or f"replayed {len(replay)} updates before responding ({len(tools)} tool calls,"
            f" {len(agent)} chars of agent text)",
        )

    async def resume(self, session: str) -> None:
        start = len(self.transcript)
        try:
            with anyio.fail_after(self.settings.prompt_timeout):
                await self.conn.resume_session(cwd=self.workdir, session_id=session)
        except (TimeoutError, RequestError, ValidationError, ConnectionError) as err:
            self.record(
                "agent.session.resume",
                "fail",
                f"session/resume failed: {str(err)[:200] or type(err).__name__}",
            )
            return
        await anyio.sleep(self.settings.quiet_period)
        replayed = self._updates(session, start)
        conversation = [
            e
            for e in replayed
            if e.message["params"].get("update", {}).get("sessionUpdate")
            in (
                "user_message_chunk",
                "agent_message_chunk",
                "agent_thought_chunk",
                "tool_call",
                "tool_call_update",
            )
        ]
        self.record(
            "agent.session.resume",
            "fail" if conversation else "pass",
            f"session/resume replayed {len(conversation)} conversation update(s);"
            " it must not replay"
            if conversation
            else "resumed without replaying the conversation",
        )


def _is_content(entry: TranscriptEntry) -> bool:
    return (
        entry.sender == "agent"
        and entry.message.get("method") == "session/update"
        and _variant(entry) in _CONTENT_UPDATES
    )


def _is_response(entry: TranscriptEntry) -> bool:
    message = entry.message
    return entry.sender == "agent" and "method" not in message and "id" in message


def _variant(entry: TranscriptEntry) -> str:
    """The `sessionUpdate` of a session/update entry."""
    params = entry.message.get("params")
    update = params.get("update") if isinstance(params, dict) else None
    return str(update.get("sessionUpdate")) if isinstance(update, dict) else "?"


def _stop(answers: list[Any]) -> str:
    if not answers:
        return "no response"
    answer = answers[0]
    if isinstance(answer, Exception):
        return f"error {answer}"[:120]
    return f"stopReason {answer.stop_reason!r}"


def _describe(init: InitializeResponse) -> str:
    caps = init.agent_capabilities
    if caps is None:
        return "advertises nothing optional"
    found = []
    if caps.load_session:
        found.append("loadSession")
    prompt = caps.prompt_capabilities
    if prompt is not None:
        found.extend(
            f"prompt.{k}" for k in ("image", "audio", "embedded_context") if getattr(prompt, k)
        )
    sessions = caps.session_capabilities
    if sessions is not None:
        found.extend(
            f"session.{k}"
            for k in ("list", "resume", "close", "fork")
            if getattr(sessions, k) is not None
        )
    methods = [m.id for m in init.auth_methods or [] if hasattr(m, "id")]
    if methods:
        found.append(f"authMethods {methods}")
    return "advertises " + (", ".join(found) or "nothing optional")
