"""The client validator's turn: walk an ACP client through every feature it advertised.

`Walkthrough.run()` is what the reference agent does with any prompt. It streams its
progress as agent messages and a plan, and grades each response of the client into a
`CheckLog`: every `session/update` variant (each followed by a ping the client must answer,
which proves it took the update without choking), `session/request_permission` (a valid
outcome; a selected option must be one that was offered), then hands over to the
`client_resources` steps (`fs/*`, terminals) and last to `client_cancel` (press stop). The
plumbing every step shares lives here: `send`, `say`, `probe`, `request` (a client request
with a deadline, its failure put into words) and `grade_update`. Every wait is bounded; a
step the person did not act on in time is reported as skipped, saying so.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import anyio
from acp import (
    RequestError,
    plan_entry,
    start_tool_call,
    tool_content,
    tool_diff_content,
    update_agent_message_text,
    update_agent_thought_text,
    update_plan,
    update_tool_call,
)
from acp.helpers import update_available_commands, update_current_mode
from acp.interfaces import Client
from acp.schema import (
    AvailableCommand,
    ClientCapabilities,
    ConfigOptionUpdate,
    Cost,
    PermissionOption,
    PermissionOptionKind,
    RequestPermissionResponse,
    SessionInfoUpdate,
    ToolCallLocation,
    ToolCallUpdate,
    UnstructuredCommandInput,
    UsageUpdate,
)
from pydantic import ValidationError

from steerable_bridge.conformance.validators.client_cancel import cancellation
from steerable_bridge.conformance.validators.client_resources import file_system, terminal
from steerable_bridge.conformance.validators.client_session import (
    CONFIG_ID,
    CONFIG_VALUES,
    MODES,
    PING_METHOD,
    CheckLog,
    ValidatorSession,
    ValidatorSettings,
    config_options,
)

__all__ = ["Walkthrough"]

T = TypeVar("T")


class Walkthrough:
    """One validation turn against one client session; `run()` returns True if cancelled."""

    def __init__(
        self,
        conn: Client,
        session: ValidatorSession,
        capabilities: ClientCapabilities | None,
        settings: ValidatorSettings,
        log: CheckLog,
    ) -> None:
        self.conn = conn
        self.session = session
        self.caps = capabilities or ClientCapabilities()
        self.settings = settings
        self.log = log
        self.nonce = secrets.token_hex(4)
        self.can_probe = True
        self._steps = ["session/update variants", "permission", "file system", "terminal", "cancel"]
        self._done = 0

    # -- plumbing ----------------------------------------------------------------------

    async def send(self, update: Any) -> str:
        """Send one session/update; '' on success, else what went wrong."""
        try:
            with anyio.fail_after(self.settings.request_timeout):
                await self.conn.session_update(session_id=self.session.id, update=update)
        except TimeoutError:
            return "the client did not read a session/update within the timeout"
        except ConnectionError:
            return "the connection closed"
        self.session.history.append(update)
        return ""

    async def say(self, text: str) -> None:
        await self.send(update_agent_message_text(text))

    async def probe(self) -> tuple[bool, str]:
        """Ping the client (an unknown extension request it must answer, even with an error)."""
        start = time.monotonic()
        try:
            with anyio.fail_after(self.settings.probe_timeout):
                await self.conn.ext_method(PING_METHOD, {})
        except RequestError:
            pass  # answering "method not found" is a perfectly good answer
        except TimeoutError:
            return (
                False,
                f"the client did not answer a ping within {self.settings.probe_timeout:g} s",
            )
        except ConnectionError:
            return False, "the client closed the connection"
        return (
            True,
            f"client answered the next request in {(time.monotonic() - start) * 1000:.0f} ms",
        )

    async def request(self, what: str, call: Callable[[], Awaitable[T]]) -> tuple[T | None, str]:
        """Make one client request with a deadline; (result, '') or (None, why it failed)."""
        try:
            with anyio.fail_after(self.settings.request_timeout):
                return await call(), ""
        except TimeoutError:
            return None, f"no answer to {what} within {self.settings.request_timeout:g} s"
        except RequestError as err:
            return None, f"{what} answered with JSON-RPC error {err.code}: {err} {err.data or ''}"
        except ValidationError as err:
            first = err.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            return None, f"the answer to {what} breaks the ACP schema at {where}: {first['msg']}"
        except ConnectionError:
            return None, f"the connection closed during {what}"

    async def unknown_request(self) -> None:
        """The liveness probe itself: an unknown request must get an answer (-32601)."""
        start = time.monotonic()
        try:
            with anyio.fail_after(self.settings.probe_timeout):
                result = await self.conn.ext_method(PING_METHOD, {})
        except RequestError as err:
            took = (time.monotonic() - start) * 1000
            self.log.record(
                "client.unknown_request",
                "pass",
                f"_{PING_METHOD} answered with error {err.code} in {took:.0f} ms"
                + ("" if err.code == -32601 else " (-32601 method not found is usual)"),
            )
            return
        except (TimeoutError, ConnectionError) as err:
            self.can_probe = False
            self.log.record(
                "client.unknown_request",
                "fail",
                f"no answer to the unknown request _{PING_METHOD} within"
                f" {self.settings.probe_timeout:g} s ({type(err).__name__}); JSON-RPC requires"
                " every request to be answered, with error -32601 when the method is unknown",
            )
            return
        self.log.record(
            "client.unknown_request", "pass", f"_{PING_METHOD} answered with result {result!r:.60}"
        )

    async def grade_update(self, check_id: str, update: Any, what: str) -> None:
        problem = await self.send(update)
        if problem:
            self.log.record(check_id, "fail", f"sending {what}: {problem}")
            return
        if not self.can_probe:
            self.log.record(
                check_id,
                "skipped",
                f"sent {what}; uptake cannot be confirmed: the client does not answer requests"
                " it does not know (see client.unknown_request)",
            )
            return
        alive, detail = await self.probe()
        self.log.record(check_id, "pass" if alive else "fail", f"sent {what}; {detail}")

    async def progress(self, note: str) -> None:
        entries = [
            plan_entry(
                f"Check {name}",
                priority="high",
                status="completed"
                if i < self._done
                else "in_progress"
                if i == self._done
                else "pending",
            )
            for i, name in enumerate(self._steps)
        ]
        await self.send(update_plan(entries))
        await self.say(f"\n\n**Step {self._done + 1}/{len(self._steps)}: {note}**\n")

    def path(self, name: str) -> str:
        return str(Path(self.session.cwd) / name)

    # -- the turn ----------------------------------------------------------------------

    async def run(self) -> bool:
        await self.say(
            "steerable-bridge ACP client validator. I will walk your client through every"
            " feature it advertised and grade each answer; a summary table ends the turn."
        )
        await self.unknown_request()
        await self.progress("session/update variants")
        await self.updates()
        self._done += 1
        await self.progress("session/request_permission — please answer with any option")
        await self.permission()
        self._done += 1
        await self.progress("fs/read_text_file and fs/write_text_file")
        await file_system(self)
        self._done += 1
        await self.progress("terminal lifecycle")
        await terminal(self)
        self._done += 1
        await self.progress("cancellation — you will be asked to press stop")
        cancelled = await cancellation(self)
        self._done += 1
        return cancelled

    async def updates(self) -> None:
        sid = self.session.id
        scratch = self.path(f".steerable-validator-{self.nonce}.txt")
        await self.grade_update(
            "update.agent_message_chunk",
            update_agent_message_text("An agent message chunk (you are reading it). "),
            "agent_message_chunk",
        )
        await self.grade_update(
            "update.agent_thought_chunk",
            update_agent_thought_text("A thought chunk: clients usually fold these away."),
            "agent_thought_chunk",
        )
        entries = [
            plan_entry("A finished task", priority="low", status="completed"),
            plan_entry("A running task", priority="medium", status="in_progress"),
            plan_entry("A pending task", priority="high", status="pending"),
        ]
        await self.grade_update("update.plan", update_plan(entries), "plan with 3 entries")
        read_id = f"validator-read-{self.nonce}"
        await self.grade_update(
            "update.tool_call",
            start_tool_call(
                read_id,
                "Validator: read a file (demonstration)",
                kind="read",
                status="pending",
                locations=[ToolCallLocation(path=scratch, line=1)],
                raw_input={"path": scratch},
            ),
            "tool_call (kind read, pending, with a location)",
        )
        await self.send(update_tool_call(read_id, status="in_progress"))
        await self.grade_update(
            "update.tool_call_update.text",
            update_tool_call(
                read_id,
                status="completed",
                content=[tool_content(_text("A tool result shown as text content."))],
                raw_output={"ok": True},
            ),
            "tool_call_update (completed, text content, rawOutput)",
        )
        edit_id = f"validator-edit-{self.nonce}"
        await self.send(
            start_tool_call(
                edit_id,
                "Validator: edit a file (demonstration)",
                kind="edit",
                status="in_progress",
                locations=[ToolCallLocation(path=scratch, line=2)],
            )
        )
        await self.grade_update(
            "update.tool_call_update.diff",
            update_tool_call(
                edit_id,
                status="completed",
                content=[tool_diff_content(scratch, "line 1\nline two\n", "line 1\nline 2\n")],
                locations=[ToolCallLocation(path=scratch, line=2)],
            ),
            "tool_call_update (completed, diff content, locations)",
        )
        commands = [
            AvailableCommand(name="validate", description="Run the client validation again"),
            AvailableCommand(
                name="explain",
                description="Explain a check",
                input=UnstructuredCommandInput(hint="check id"),
            ),
        ]
        await self.grade_update(
            "update.available_commands_update",
            update_available_commands(commands),
            "available_commands_update with 2 commands",
        )
        other = next(m for m, _ in MODES if m != self.session.mode_id)
        self.session.mode_id = other
        await self.grade_update(
            "update.current_mode_update",
            update_current_mode(other),
            f"current_mode_update to {other!r}",
        )
        quick = CONFIG_VALUES[1][0]
        self.session.config_value = quick
        await self.grade_update(
            "update.config_option_update",
            ConfigOptionUpdate(
                session_update="config_option_update", config_options=config_options(quick)
            ),
            f"config_option_update ({CONFIG_ID} = {quick!r})",
        )
        now = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
        await self.grade_update(
            "update.session_info_update",
            SessionInfoUpdate(
                session_update="session_info_update", title="ACP client validation", updated_at=now
            ),
            "session_info_update (title, updatedAt)",
        )
        await self.grade_update(
            "update.usage_update",
            UsageUpdate(
                session_update="usage_update",
                used=1234,
                size=200000,
                cost=Cost(amount=0.01, currency="USD"),
            ),
            "usage_update (used, size, cost)",
        )
        del sid

    def permission_options(self, tag: str) -> list[PermissionOption]:
        kinds: tuple[tuple[PermissionOptionKind, str], ...] = (
            ("allow_once", "Allow once"),
            ("allow_always", "Always allow"),
            ("reject_once", "Reject"),
            ("reject_always", "Always reject"),
        )
        return [
            PermissionOption(option_id=f"{tag}-{kind}-{self.nonce}", name=name, kind=kind)
            for kind, name in kinds
        ]

    async def permission(self) -> None:
        call_id = f"validator-permission-{self.nonce}"
        target = self.path(f".steerable-validator-{self.nonce}.txt")
        options = self.permission_options("validator")
        offered = [o.option_id for o in options]
        await self.send(
            start_tool_call(
                call_id,
                "Validator: a change that needs your permission (answer with any option)",
                kind="edit",
                status="pending",
                locations=[ToolCallLocation(path=target)],
                raw_input={"path": target},
            )
        )
        tool_call = ToolCallUpdate(
            tool_call_id=call_id,
            title="Validator: permission request",
            kind="edit",
            status="pending",
        )
        try:
            with anyio.fail_after(self.settings.person_timeout):
                answer, problem = await self.ask(tool_call, options)
        except TimeoutError:
            why = f"person did not act in time ({self.settings.person_timeout:g} s)"
            self.log.record("permission.outcome", "skipped", why)
            self.log.record("permission.option_offered", "skipped", why)
            await self.send(update_tool_call(call_id, status="failed"))
            return
        if answer is None:
            self.log.record("permission.outcome", "fail", problem)
            self.log.record("permission.option_offered", "skipped", "no valid answer to grade")
            await self.send(update_tool_call(call_id, status="failed"))
            return
        outcome = answer.outcome
        self.log.record(
            "permission.outcome", "pass", f"answered with a valid outcome: {outcome.outcome!r}"
        )
        if outcome.outcome == "cancelled":
            self.log.record(
                "permission.option_offered",
                "skipped",
                "the request was dismissed (outcome cancelled); no option to check",
            )
            await self.send(update_tool_call(call_id, status="failed"))
            return
        chosen = outcome.option_id
        if chosen in offered:
            self.log.record(
                "permission.option_offered",
                "pass",
                f"selected {chosen!r}, one of the {len(offered)} offered",
            )
        else:
            self.log.record(
                "permission.option_offered",
                "fail",
                f"selected optionId {chosen!r}, which was not offered"
                f" (offered: {', '.join(offered)})",
            )
        allowed = chosen in offered and "allow" in chosen
        await self.send(update_tool_call(call_id, status="completed" if allowed else "failed"))

    async def ask(
        self, tool_call: ToolCallUpdate, options: list[PermissionOption]
    ) -> tuple[RequestPermissionResponse | None, str]:
        try:
            answer = await self.conn.request_permission(
                session_id=self.session.id, tool_call=tool_call, options=options
            )
        except RequestError as err:
            return (
                None,
                f"session/request_permission answered with JSON-RPC error {err.code}: {err}",
            )
        except ValidationError as err:
            first = err.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            return (
                None,
                f"the answer breaks the RequestPermissionResponse schema at {where}:"
                f" {first['msg']}",
            )
        except ConnectionError:
            return None, "the connection closed before the client answered"
        return answer, ""


def _text(text: str) -> Any:
    from acp import text_block

    return text_block(text)
