"""`check acp -- CMD ARGS`: spawn any ACP agent and grade it from the client's seat.

`check_acp_agent(command)` starts the agent as a process group of its own
(`agent_process.py`, its stderr kept in a temporary file for evidence; the whole group is
ended when the check ends), connects the `acp` SDK's client side to its pipes, records the
raw transcript, and runs the agent-side checks in order: `initialize` (raw protocolVersion,
capability shapes), `session/new`, one prompt (skipped with the agent's own reason when it
needs credentials it lacks), cancel semantics (stop reason `cancelled`, nothing after the
response), an unknown method (→ -32601), a malformed JSON line (→ -32700 parse error; no
answer at all is only a warning, as the official SDKs give none; and the agent still answers
afterwards — written as raw bytes around the SDK), `session/load` replay if advertised and
`session/resume` without replay if advertised; with `--tool-prompt TEXT`, the permission
flow of a turn that runs a tool (`permission_probe.py`), then a cancel while that permission
is pending (`state_probes.py`); before `session/load`, the session is switched to another
mode and model, which the load must keep; with `--fail-prompt TEXT`, a session whose turn
failed must still load and replay the turn after it. The checker advertises fs and terminal
and serves them in its temporary workspace (`checker_services.py`). Last, the conformance
suite's ACP transcript rules run over everything recorded; their evidence names lines of the
`--record` file. Every check that did not run is listed as skipped with the reason, so a
report always holds the same ids. Raises `CouldNotRun` when the agent cannot be started or
exits before answering `initialize`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Sequence, Set
from pathlib import Path
from typing import IO, Any, cast

import anyio
from acp import RequestError
from acp.client.connection import ClientSideConnection
from acp.interfaces import Agent, Client
from acp.schema import (
    AllowedOutcome,
    CreateTerminalResponse,
    DeniedOutcome,
    EnvVariable,
    KillTerminalResponse,
    ReadTextFileResponse,
    ReleaseTerminalResponse,
    RequestPermissionResponse,
    TerminalOutputResponse,
    WaitForTerminalExitResponse,
    WriteTextFileResponse,
)

from steerable_bridge.conformance.validators.agent_probes import (
    PROBE_ID_PREFIX,
    AgentCheckSettings,
    AgentProbe,
    CouldNotRun,
)
from steerable_bridge.conformance.validators.agent_process import agent_process
from steerable_bridge.conformance.validators.checker_services import WorkspaceServices
from steerable_bridge.conformance.validators.permission_probe import PERMISSION_CHECKS, tool_prompt
from steerable_bridge.conformance.validators.report import Check, Report
from steerable_bridge.conformance.validators.state_probes import (
    AFTER_FAILURE,
    LOAD_STATE_CHECKS,
    grade_load_state,
    load_after_failure,
    permission_cancel,
    set_session_state,
)
from steerable_bridge.conformance.validators.transcript import Transcript

__all__ = ["AgentCheckSettings", "CheckerClient", "CouldNotRun", "check_acp_agent"]


class CheckerClient:
    """The client half: takes updates, answers permission, serves files and terminals.

    Permission: the first allow option, or `cancelled` once the session is being cancelled.
    A session in `holding` keeps its permission request open (`asked` is set when one
    arrives) until `released` is set, then answers `cancelled`: the permission-cancel probe.
    Files and terminals are `WorkspaceServices`, confined to the check's workspace.
    """

    def __init__(self, services: WorkspaceServices | None = None, hold_for: float = 15.0) -> None:
        self.cancelling: set[str] = set()
        self.holding: dict[str, tuple[anyio.Event, anyio.Event]] = {}
        self.hold_for = hold_for
        self.agent: Agent | None = None
        self.services = services

    def on_connect(self, conn: Agent) -> None:
        self.agent = conn

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        return None  # the transcript keeps the raw message

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any
    ) -> RequestPermissionResponse:
        held = self.holding.get(session_id)
        if held is not None:
            asked, released = held
            asked.set()
            with anyio.move_on_after(self.hold_for):
                await released.wait()
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        if session_id in self.cancelling or not options:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        allow = [o for o in options if o.kind == "allow_once"] or options
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=allow[0].option_id)
        )

    def _served(self) -> WorkspaceServices:
        if self.services is None:
            raise RequestError.method_not_found("fs and terminal are not offered")
        return self.services

    async def read_text_file(
        self, session_id: str, path: str, line: int | None = None, limit: int | None = None,
        **kwargs: Any,
    ) -> ReadTextFileResponse:  # fmt: skip
        return await self._served().read_text_file(path, line, limit)

    async def write_text_file(
        self, session_id: str, path: str, content: str, **kwargs: Any
    ) -> WriteTextFileResponse:
        return await self._served().write_text_file(path, content)

    async def create_terminal(
        self, session_id: str, command: str, args: list[str] | None = None,
        env: list[EnvVariable] | None = None, cwd: str | None = None,
        output_byte_limit: int | None = None, **kwargs: Any,
    ) -> CreateTerminalResponse:  # fmt: skip
        return await self._served().create_terminal(command, args, env, cwd, output_byte_limit)

    async def terminal_output(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> TerminalOutputResponse:
        return await self._served().terminal_output(terminal_id)

    async def wait_for_terminal_exit(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> WaitForTerminalExitResponse:
        return await self._served().wait_for_terminal_exit(terminal_id)

    async def kill_terminal(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> KillTerminalResponse:
        return await self._served().kill_terminal(terminal_id)

    async def release_terminal(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> ReleaseTerminalResponse:
        return await self._served().release_terminal(terminal_id)

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise RequestError.method_not_found(f"_{method}")

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None


async def check_acp_agent(
    command: Sequence[str],
    *,
    settings: AgentCheckSettings | None = None,
    env: dict[str, str] | None = None,
    record: str | Path | None = None,
) -> Report:
    """Spawn `command` as an ACP agent, run every agent-side check, return the report."""
    if not command:
        raise CouldNotRun("no agent command given; use: steerable-bridge check acp -- CMD [ARGS]")
    settings = settings or AgentCheckSettings()
    transcript = Transcript("client")
    checks: list[Check] = []
    crossed: set[str] = set()
    workdir = tempfile.mkdtemp(prefix="steerable-check-acp-")
    services = WorkspaceServices(workdir, wait_timeout=settings.prompt_timeout)
    client = CheckerClient(services, hold_for=settings.prompt_timeout)
    failure: CouldNotRun | None = None
    with tempfile.TemporaryFile() as stderr:
        try:
            async with services.running():
                try:
                    checks, crossed = await _check_process(
                        command, env, workdir, stderr, transcript, client, settings
                    )
                except (FileNotFoundError, PermissionError) as err:
                    failure = CouldNotRun(f"could not start {command[0]!r}: {err}")
                except CouldNotRun as err:  # raised after the task group, not wrapped in it
                    failure = err
        finally:
            if record is not None:
                transcript.write_jsonl(record)
            shutil.rmtree(workdir, ignore_errors=True)
    if failure is not None:
        raise failure
    checks = _with_skips(checks)
    checks.extend(_transcript_rules(transcript, crossed))
    return Report("acp-agent-check", " ".join(command), tuple(checks))


async def _check_process(
    command: Sequence[str],
    env: dict[str, str] | None,
    workdir: str,
    stderr: IO[bytes],
    transcript: Transcript,
    client: CheckerClient,
    settings: AgentCheckSettings,
) -> tuple[list[Check], set[str]]:
    async with agent_process(
        command, env=dict(os.environ if env is None else env), cwd=workdir, stderr=stderr
    ) as agent:
        process = agent.process
        assert process.stdin is not None and process.stdout is not None
        conn = ClientSideConnection(
            cast(Client, client),  # a plain class: unimplemented → method not found
            process.stdin,
            process.stdout,
            observers=[transcript.observe],
        )
        try:
            probe = AgentProbe(
                conn, process, transcript, client, settings, workdir, lambda: _tail(stderr)
            )
            return await _run_checks(probe, stderr), probe.crossed_cancels
        finally:
            await conn.close()


AGENT_CHECKS = (
    "agent.initialize",
    "agent.initialize.schema",
    "agent.initialize.version",
    "agent.initialize.capabilities",
    "agent.session.new",
    "agent.prompt",
    "agent.prompt.nothing_after_response",
    "agent.cancel.stop_reason",
    "agent.cancel.nothing_after_response",
    *PERMISSION_CHECKS,
    "agent.cancel.permission",
    "agent.unknown_method",
    "agent.unknown_extension_method",
    "agent.malformed_json.parse_error",
    "agent.malformed_json.alive",
    "agent.session.load",
    *LOAD_STATE_CHECKS,
    AFTER_FAILURE,
    "agent.session.resume",
)
"""Every agent-side check, in report order; one that did not run is reported as skipped."""


def _with_skips(checks: list[Check]) -> list[Check]:
    """`checks` plus a skipped entry, with the reason, for every check that did not run."""
    graded = {check.id for check in checks}
    if "agent.initialize" in graded:
        why = "not run: initialize did not succeed, so nothing else could be asked"
    else:
        why = "not run: an earlier step it depends on did not succeed"
        graded.add("agent.initialize")  # reported through its .schema / .version parts
    order = {check_id: n for n, check_id in enumerate(AGENT_CHECKS)}
    missing = [Check(i, "skipped", why) for i in AGENT_CHECKS if i not in graded]
    return sorted([*checks, *missing], key=lambda c: order.get(c.id, len(order)))


_SESSION_CHECKS = (
    "agent.prompt",
    "agent.prompt.nothing_after_response",
    "agent.cancel.stop_reason",
    "agent.cancel.nothing_after_response",
    *PERMISSION_CHECKS,
    "agent.cancel.permission",
    "agent.session.load",
    *LOAD_STATE_CHECKS,
    AFTER_FAILURE,
    "agent.session.resume",
)


async def _run_checks(probe: AgentProbe, stderr: IO[bytes]) -> list[Check]:
    try:
        init = await probe.initialize()
    except CouldNotRun as err:
        raise CouldNotRun(f"{err}{_tail(stderr)}") from None
    if init is None:
        return probe.checks
    session = await probe.new_session()
    if session is None:
        without = "no session: session/new did not succeed"
        probe.skip(_SESSION_CHECKS, without)
    else:
        reason = await probe.prompt(session)
        if reason:
            probe.skip(
                ("agent.cancel.stop_reason", "agent.cancel.nothing_after_response",
                 *PERMISSION_CHECKS, "agent.cancel.permission"),
                reason,
            )  # fmt: skip
        else:
            second = await probe.new_session(record=False)
            if second is not None:
                await probe.cancel(second)
            else:
                probe.skip(
                    ("agent.cancel.stop_reason", "agent.cancel.nothing_after_response"),
                    "a second session/new (for the cancel probe) did not succeed",
                )
            await _tool_prompt(probe)
    await probe.unknown_method()
    await probe.malformed_json()
    caps = init.agent_capabilities
    if session is None:
        pass
    elif caps is not None and caps.load_session:
        switch = await set_session_state(probe, session)
        loaded = await probe.load(session, prompted=not reason)
        grade_load_state(probe, switch, loaded)
        if probe.settings.fail_prompt and not reason:
            await load_after_failure(probe, probe.settings.fail_prompt)
        else:
            why = reason or "not asked: pass --fail-prompt TEXT, a prompt whose turn fails"
            probe.skip((AFTER_FAILURE,), why)
    else:
        probe.skip(
            ("agent.session.load", *LOAD_STATE_CHECKS, AFTER_FAILURE),
            "agent did not advertise loadSession",
        )
    resume = caps.session_capabilities.resume if caps and caps.session_capabilities else None
    if session is None:
        pass
    elif resume is not None:
        await probe.resume(session)
    else:
        probe.skip(("agent.session.resume",), "agent did not advertise sessionCapabilities.resume")
    if probe.process.returncode is not None:
        probe.record(
            "agent.alive",
            "fail",
            f"the agent exited with status {probe.process.returncode} during the checks"
            + _tail(stderr),
        )
    return probe.checks


async def _tool_prompt(probe: AgentProbe) -> None:
    text = probe.settings.tool_prompt
    if not text:
        probe.skip(
            (*PERMISSION_CHECKS, "agent.cancel.permission"),
            "not asked: pass --tool-prompt TEXT, a prompt that makes the agent's model call a"
            " tool needing permission",
        )
        return
    session = await probe.new_session(record=False)
    if session is None:
        probe.skip(
            (*PERMISSION_CHECKS, "agent.cancel.permission"),
            "a session/new (for the tool prompt) did not succeed",
        )
        return
    await tool_prompt(probe, session, text)
    asked = next((c for c in probe.checks if c.id == "agent.permission.request"), None)
    if asked is None or asked.status == "skipped":
        probe.skip(
            ("agent.cancel.permission",),
            "could not check: the tool prompt brought no permission request (see"
            " agent.permission.request)",
        )
        return
    held = await probe.new_session(record=False)
    if held is None:
        probe.skip(("agent.cancel.permission",), "a session/new (for it) did not succeed")
    else:
        await permission_cancel(probe, held, text)


def _transcript_rules(transcript: Transcript, crossed: Set[str] = frozenset()) -> list[Check]:
    from steerable_bridge.conformance.acp_rules import check_acp_transcript
    from steerable_bridge.conformance.validators.report import checks_from_findings

    # Our deliberate probes (an unknown method, a broken line) and the agent's answers to
    # them are not conversation traffic; the rules would rightly flag the probes themselves.
    # A session/cancel that crossed the prompt's response (the cancel probe could not
    # check it) cancelled nothing: the rules must not expect `cancelled` after it.
    kept = [
        m
        for m in transcript.messages()
        if not _is_probe(m["message"]) and not _crossed_cancel(m["message"], crossed)
    ]
    messages = [{"sender": m["sender"], "message": m["message"]} for m in kept]
    findings = check_acp_transcript(messages, lines=[m["line"] for m in kept])
    return [
        *_served_flows(messages, {f.rule_id for f in findings}),
        *checks_from_findings(
            findings,
            clean_id="transcript.rules",
            clean_evidence=f"{len(messages)} JSON-RPC messages keep every ACP transcript rule",
        ),
    ]


_SERVED = {
    "agent.client.fs": ("fs/", ("acp.client-capability", "acp.fs-path")),
    "agent.client.terminal": (
        "terminal/",
        ("acp.client-capability", "acp.terminal-lifecycle", "acp.terminal-released"),
    ),
}


def _served_flows(messages: list[dict[str, Any]], broken: Set[str]) -> list[Check]:
    """Whether the agent used the fs / terminal the checker served, and how it went."""
    checks = []
    for check_id, (prefix, rules) in _SERVED.items():
        used: dict[str, int] = {}
        for m in messages:
            method = m["message"].get("method")
            if m["sender"] == "agent" and isinstance(method, str) and method.startswith(prefix):
                used[method] = used.get(method, 0) + 1
        if not used:
            checks.append(
                Check(check_id, "skipped", f"the agent sent no {prefix}* request (it was offered)")
            )
            continue
        bad = sorted(broken & set(rules))
        summary = ", ".join(f"{method} x{n}" for method, n in used.items())
        checks.append(
            Check(
                check_id,
                "fail" if bad else "pass",
                f"{summary}; " + (f"broke {', '.join(bad)} (see below)" if bad else "in order"),
            )
        )
    return checks


def _crossed_cancel(message: dict[str, Any], crossed: Set[str]) -> bool:
    params = message.get("params")
    return (
        message.get("method") == "session/cancel"
        and isinstance(params, dict)
        and params.get("sessionId") in crossed
    )


def _is_probe(message: dict[str, Any]) -> bool:
    if "error" in message and "method" not in message and message.get("id") is None:
        return True  # the answer to our broken line: id null, or (codex-acp) no id at all
    request_id = message.get("id")
    return isinstance(request_id, str) and request_id.startswith(PROBE_ID_PREFIX)


def _tail(stderr: IO[bytes], lines: int = 5) -> str:
    with contextlib.suppress(OSError, ValueError):
        stderr.flush()
        stderr.seek(0)
        text = stderr.read().decode("utf-8", errors="replace").strip().splitlines()
        if text:
            return "; its stderr ends: " + " | ".join(text[-lines:])
    return ""
