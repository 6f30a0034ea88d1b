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
time, after a response too; only turn content counts as "after the response". A broken
JSON line that gets no answer at all is a warning, not a failure: the official TypeScript
and Python SDKs drop such lines, so no agent on them could pass. `session/load` must replay
the model's content; notices only the live turn streamed (`live_only_chunks`) are
tolerated and named in the evidence. Nothing here spawns or kills processes; the grading
rules themselves (deadlines, credential errors, the strict initialize shape, entry classes)
are in `agent_grading.py`.
"""

from __future__ import annotations

import json
from asyncio.subprocess import Process
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import anyio
from acp import PROTOCOL_VERSION, RequestError, text_block
from acp.client.connection import ClientSideConnection
from acp.schema import Implementation, InitializeResponse, LoadSessionResponse
from pydantic import ValidationError

from steerable_bridge.conformance.acp_rules import SESSION_LEVEL_UPDATES
from steerable_bridge.conformance.validators.agent_grading import (
    PROTOCOL_ERRORS,
    AgentCheckSettings,
    describe_init,
    error_text,
    initialize_response_problems,
    is_content,
    is_response,
    needs_credentials,
    stop_text,
    variant,
)
from steerable_bridge.conformance.validators.checker_services import CHECKER_CAPABILITIES
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
    "live_only_chunks",
    "needs_credentials",
]

PROBE_ID_PREFIX = "steerable-check-"
"""Ids of requests written around the SDK on purpose; the transcript rules skip them."""
PROMPT = "Reply with one short sentence: say hello."
LONG_PROMPT = (
    "Take your time: think it through, make a plan, then count from 1 to 500, one number per"
    " line, using any tools you have."
)


def live_only_chunks(replayed: str, live: Sequence[str]) -> str | None:
    """What the live turn streamed beyond the replay: '' when they match, None when they differ.

    The replay must carry the model's content; agents may also stream notices during the
    live turn that their history does not keep (codex-acp sends "Model metadata for `X` not
    found ..." as an agent_message_chunk before the answer). So the replay matches when it
    equals the live text, or equals it less whole live chunks before and after it; what was
    left out is returned so the evidence can name it. Whitespace at either end is ignored.
    The wire cannot tell a notice chunk from an answer chunk, so a replay missing whole
    leading or trailing chunks of the answer passes too; the evidence then quotes them.
    """
    text = "".join(live)
    wanted = replayed.strip()
    if wanted == text.strip():
        return ""
    if not wanted:
        return None
    bounds = {0}
    offset = 0
    for chunk in live:
        offset += len(chunk)
        bounds.add(offset)
    at = text.find(wanted)
    while at >= 0:
        end = at + len(wanted)
        head, tail = text[:at], text[end:]
        head_ok = not head.strip() or at in bounds or len(head.rstrip()) in bounds
        tail_ok = not tail.strip() or end in bounds or len(text) - len(tail.lstrip()) in bounds
        if head_ok and tail_ok:
            return (head + tail).strip()
        at = text.find(wanted, at + 1)
    return None


class _Cancelling(Protocol):
    cancelling: set[str]
    holding: dict[str, tuple[anyio.Event, anyio.Event]]


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
        self.first_turn_chunks: list[str] = []
        self.first_turn_tools: set[str] = set()
        self.crossed_cancels: set[str] = set()
        """Sessions whose session/cancel crossed the prompt's response (see `cancel`)."""

    def record(self, check_id: str, status: CheckStatus, evidence: str) -> None:
        self.checks.append(Check(check_id, status, evidence))

    def skip(self, check_ids: Sequence[str], reason: str) -> None:
        for check_id in check_ids:
            self.record(check_id, "skipped", reason)

    # -- transcript helpers ------------------------------------------------------------

    async def _late_updates(self, session: str, response: int) -> list[TranscriptEntry]:
        """Turn updates after the response; session-level updates may come at any time."""
        await anyio.sleep(self.settings.quiet_period)
        if response < 0:
            return []
        return [
            e
            for e in self.transcript.session_updates(session, response + 1)
            if variant(e) not in SESSION_LEVEL_UPDATES
        ]

    # -- probes ------------------------------------------------------------------------

    async def initialize(self) -> InitializeResponse | None:
        try:
            with anyio.fail_after(self.settings.init_timeout):
                init = await self.conn.initialize(
                    protocol_version=PROTOCOL_VERSION,
                    client_capabilities=CHECKER_CAPABILITIES,
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
        _, response = self.transcript.exchange("initialize", 0)
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
        self.record("agent.initialize.capabilities", "pass", describe_init(init))
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
            if err.code not in PROTOCOL_ERRORS:
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
        _, response = self.transcript.exchange("session/prompt", start, session)
        updates = self.transcript.session_updates(
            session, start, response if response >= 0 else None
        )
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
                chunk = str((update.get("content") or {}).get("text", ""))
                self.first_turn_text += chunk
                self.first_turn_chunks.append(chunk)
            if update.get("sessionUpdate") == "tool_call":
                self.first_turn_tools.add(str(update.get("toolCallId")))
        return ""

    def _grade_late(self, check_id: str, late: list[TranscriptEntry]) -> None:
        if late:
            kinds = ", ".join(variant(e) for e in late[:5])
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
                lambda e: is_content(e) or is_response(e),
                within=self.settings.prompt_timeout,
                start=start,
            )
            if began is not None and not is_content(began):
                with anyio.move_on_after(self.settings.probe_timeout):
                    await done.wait()
                began = None
            if done.is_set():
                reason = (
                    f"the turn ended ({stop_text(answers)}) before session/cancel could be sent"
                )
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
        stop = stop_text(answers)
        when = (
            f"after its first {variant(began)}"
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
            self._gradestop_text(stop, when)
        _, response = self.transcript.exchange("session/prompt", start, session)
        self._grade_late(
            "agent.cancel.nothing_after_response", await self._late_updates(session, response)
        )

    def _gradestop_text(self, stop: str, when: str) -> None:
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
        if entry is None:
            # The official TypeScript and Python SDKs drop a line they cannot parse without
            # answering (only the Rust one answers -32700): no agent built on them could pass,
            # so silence is graded a warning; a wrong answer is still a failure.
            self.record(
                "agent.malformed_json.parse_error",
                "warn",
                f"a broken JSON line got no answer within {self.settings.probe_timeout:g} s;"
                " JSON-RPC asks for a -32700 parse error (id null), but the official"
                " TypeScript and Python ACP SDKs drop such a line silently, so this is a"
                " warning, not a failure",
            )
            await self._alive_after_malformed()
            return
        self.record(
            "agent.malformed_json.parse_error",
            "pass" if code == -32700 else "fail",
            "answered a broken JSON line with error -32700"
            if code == -32700
            else f"a broken JSON line got error {code} within {self.settings.probe_timeout:g}"
            " s; JSON-RPC requires a -32700 parse error (id null)",
        )
        await self._alive_after_malformed()

    async def _alive_after_malformed(self) -> None:
        answer = await self._raw_request("alive-after-malformed", "steerable/no_such_method")
        self.record(
            "agent.malformed_json.alive",
            "pass" if answer is not None else "fail",
            "still answered requests afterwards"
            if answer is not None
            else f"no answer to the next request within {self.settings.probe_timeout:g} s",
        )

    async def load(self, session: str, *, prompted: bool) -> LoadSessionResponse | None:
        start = len(self.transcript)
        try:
            with anyio.fail_after(self.settings.prompt_timeout):
                loaded = await self.conn.load_session(
                    cwd=self.workdir, session_id=session, mcp_servers=[]
                )
        except (TimeoutError, RequestError, ValidationError, ConnectionError) as err:
            self.record(
                "agent.session.load",
                "fail",
                f"session/load failed: {str(err)[:200] or type(err).__name__}",
            )
            return None
        _, response = self.transcript.exchange("session/load", start, session)
        replay = self.transcript.session_updates(
            session, start, response if response >= 0 else None
        )
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
        live_only = live_only_chunks(agent, self.first_turn_chunks) if prompted else ""
        if live_only is None:
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
                f" ({', '.join(variant(e) for e in late[:5])})"
            )
        self.record(
            "agent.session.load",
            "fail" if problems else "pass",
            "; ".join(problems)
            or f"replayed {len(replay)} updates before responding ({len(tools)} tool calls,"
            f" {len(agent)} chars of agent text)"
            + (
                f"; the live turn also streamed {live_only[:120]!r}, which history does not keep"
                " (a live-only notice, tolerated)"
                if live_only
                else ""
            ),
        )
        return loaded

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
        replayed = self.transcript.session_updates(session, start)
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
