"""`check acp --tool-prompt TEXT`: grade the permission flow of a turn that runs a tool.

`check acp` advertises no client capabilities, so an agent runs its own tools; the one flow a
client still takes part in is `session/request_permission`. Given a prompt that makes the
agent's model call a tool needing permission (with a scripted or fake model, a fixed phrase),
`tool_prompt` sends it in a session of its own (so the load check's replay of the first
session is not changed), lets the checker's client answer each request (the first allow
option), and grades three things on the raw transcript: `agent.tool_prompt` — the turn ends
with a stop reason in time; `agent.permission.request` — every request names a tool call and
offers options with unique ids and valid kinds; `agent.permission.resolved` — every tool call
the client allowed reports a final status (`completed` or `failed`) before the prompt's
response, so the person sees how it ended. No request at all skips the last two with the
reason (the model called no tool that needs one). Credentials the agent lacks skip all three.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio
from acp import RequestError, text_block
from pydantic import ValidationError

from steerable_bridge.conformance.validators.agent_grading import error_text, needs_credentials
from steerable_bridge.conformance.validators.transcript import TranscriptEntry

if TYPE_CHECKING:
    from steerable_bridge.conformance.validators.agent_probes import AgentProbe

__all__ = ["PERMISSION_CHECKS", "tool_prompt"]

PERMISSION_CHECKS = ("agent.tool_prompt", "agent.permission.request", "agent.permission.resolved")
OPTION_KINDS = frozenset({"allow_once", "allow_always", "reject_once", "reject_always"})
FINAL_STATUSES = frozenset({"completed", "failed"})


async def tool_prompt(probe: AgentProbe, session: str, text: str) -> None:
    """Run `text` in `session` and grade its permission requests (see the module docstring)."""
    start = len(probe.transcript)
    try:
        with anyio.fail_after(probe.settings.prompt_timeout):
            answer = await probe.conn.prompt(session_id=session, prompt=[text_block(text)])
    except RequestError as err:
        if needs_credentials(err):
            probe.skip(PERMISSION_CHECKS, f"agent needs credentials it lacks: {error_text(err)}")
            return
        probe.record("agent.tool_prompt", "fail", f"session/prompt answered {error_text(err)}")
        probe.skip(PERMISSION_CHECKS[1:], "the tool prompt failed")
        return
    except (TimeoutError, ValidationError, ConnectionError) as err:
        why = (
            f"no answer within {probe.settings.prompt_timeout:g} s"
            if isinstance(err, TimeoutError)
            else str(err)[:200]
        )
        probe.record("agent.tool_prompt", "fail", f"the tool prompt: {why}{probe.stderr_tail()}")
        probe.skip(PERMISSION_CHECKS[1:], "the tool prompt failed")
        return
    _, response = probe.transcript.exchange("session/prompt", start, session)
    turn = list(probe.transcript.entries[start : response if response >= 0 else None])
    asks = [e for e in turn if _is_permission_request(e, session)]
    probe.record(
        "agent.tool_prompt",
        "pass",
        f"stopReason {answer.stop_reason!r} after {len(asks)} session/request_permission",
    )
    if not asks:
        probe.skip(
            PERMISSION_CHECKS[1:],
            "could not check: no session/request_permission came (the model called no tool"
            " that needs permission; does --tool-prompt make it call one?)",
        )
        return
    problems = [p for ask in asks for p in _request_problems(ask.message.get("params") or {})]
    probe.record(
        "agent.permission.request",
        "fail" if problems else "pass",
        "; ".join(problems[:3])
        or f"{len(asks)} request(s), each naming its tool call with valid, unique options",
    )
    unresolved = [
        call
        for ask in asks
        if (call := _allowed_call(ask, turn)) and not _reached_final_status(call, ask, turn)
    ]
    probe.record(
        "agent.permission.resolved",
        "fail" if unresolved else "pass",
        f"allowed tool call(s) {unresolved} reported no final status (completed / failed)"
        " before the prompt's response"
        if unresolved
        else "every allowed tool call reported a final status before the prompt's response",
    )


def _is_permission_request(entry: TranscriptEntry, session: str) -> bool:
    params = entry.message.get("params")
    return (
        entry.sender == "agent"
        and entry.message.get("method") == "session/request_permission"
        and isinstance(params, dict)
        and params.get("sessionId") == session
    )


def _request_problems(params: dict[str, Any]) -> list[str]:
    problems = []
    call = params.get("toolCall")
    if not isinstance(call, dict) or not call.get("toolCallId"):
        problems.append("a permission request names no toolCall.toolCallId")
    options = [o for o in params.get("options") or [] if isinstance(o, dict)]
    if not options:
        problems.append("a permission request offers no options")
    ids = [o.get("optionId") for o in options]
    if len(set(map(str, ids))) != len(ids):
        problems.append(f"a permission request repeats an optionId: {ids}")
    if bad := [o.get("kind") for o in options if o.get("kind") not in OPTION_KINDS]:
        problems.append(f"a permission request has options of unknown kind {bad}")
    return problems


def _allowed_call(ask: TranscriptEntry, turn: list[TranscriptEntry]) -> str:
    """The asked tool call's id when the client's answer selected an allow option, else ''."""
    params = ask.message.get("params") or {}
    kinds = {o.get("optionId"): o.get("kind") for o in params.get("options") or []}
    for entry in turn:
        message = entry.message
        if entry.sender != "client" or message.get("id") != ask.message.get("id"):
            continue
        outcome = (message.get("result") or {}).get("outcome") or {}
        if str(kinds.get(outcome.get("optionId"), "")).startswith("allow"):
            return str((params.get("toolCall") or {}).get("toolCallId") or "")
    return ""


def _reached_final_status(call: str, ask: TranscriptEntry, turn: list[TranscriptEntry]) -> bool:
    after = turn[turn.index(ask) :]
    for entry in after:
        params = entry.message.get("params")
        update = params.get("update") if isinstance(params, dict) else None
        if (
            entry.sender == "agent"
            and isinstance(update, dict)
            and update.get("toolCallId") == call
            and update.get("status") in FINAL_STATUSES
        ):
            return True
    return False
