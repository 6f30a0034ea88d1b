"""Probes for bugs users report most: a cancel leaving permission hanging, state lost on load.

`permission_cancel(probe, session, text)` (`agent.cancel.permission`) sends the tool prompt,
keeps the agent's `session/request_permission` open, sends `session/cancel` and only then
answers the pending request `cancelled`, as the spec asks of a client: the prompt must end
with stopReason `cancelled` within the cancel deadline. An agent that waits forever on the
request, ends the turn otherwise, or errors fails; no request at all is could-not-check.

`set_session_state(probe, session)` switches the session, before `session/load`, to a mode
other than its current one (`session/set_mode`, from the session/new result's `modes`) and
to another model when one is offered as a `configOptions` entry of category `model`
(`session/set_config_option`); `grade_load_state(probe, loaded)` then grades
`agent.session.load.mode` and `agent.session.load.model`: the session/load result must
answer with what was set. What the agent does not offer is skipped with the reason (a model
offered only through the unstable `session/set_model` is not switched: the checker keeps to
stable methods).

`load_after_failure(probe, text)` (`agent.session.load.after_failure`, with `--fail-prompt
TEXT`) runs, in a session of its own, a turn that fails (its model errors: the agent may
answer an error or a stop reason), then a plain turn that must succeed, then loads the
session: the replay must still carry the plain turn (its prompt, and the model's text as
`live_only_chunks` compares it, live-only notices tolerated) — a replay that stops at, or
breaks on, the failed turn fails.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
from acp import RequestError, text_block
from acp.schema import LoadSessionResponse
from pydantic import ValidationError

from steerable_bridge.conformance.validators.agent_grading import stop_text
from steerable_bridge.conformance.validators.agent_probes import live_only_chunks

if TYPE_CHECKING:
    from steerable_bridge.conformance.validators.agent_probes import AgentProbe

__all__ = [
    "AFTER_FAILURE",
    "LOAD_STATE_CHECKS",
    "SessionSwitch",
    "grade_load_state",
    "load_after_failure",
    "permission_cancel",
    "set_session_state",
]

LOAD_STATE_CHECKS = ("agent.session.load.mode", "agent.session.load.model")
AFTER_FAILURE = "agent.session.load.after_failure"
FOLLOW_UP = "Reply with one short sentence: say hello again."


async def permission_cancel(probe: AgentProbe, session: str, text: str) -> None:
    check_id = "agent.cancel.permission"
    asked, released = anyio.Event(), anyio.Event()
    probe.client.holding[session] = (asked, released)
    answers: list[Any] = []
    done = anyio.Event()

    async def run_prompt() -> None:
        try:
            answers.append(await probe.conn.prompt(session_id=session, prompt=[text_block(text)]))
        except (RequestError, ValidationError, ConnectionError) as err:
            answers.append(err)
        finally:
            done.set()
            asked.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(run_prompt)
        with anyio.move_on_after(probe.settings.prompt_timeout):
            await asked.wait()
        if done.is_set() or not asked.is_set():
            probe.record(
                check_id,
                "skipped",
                "could not check: the tool prompt asked no permission"
                + (f" (it ended with {stop_text(answers)})" if done.is_set() else " in time"),
            )
            tg.cancel_scope.cancel()
            return
        probe.client.cancelling.add(session)
        await probe.conn.cancel(session_id=session)
        released.set()  # the client answers the pending request `cancelled`
        with anyio.move_on_after(probe.settings.cancel_timeout):
            await done.wait()
        tg.cancel_scope.cancel()
    if not answers:
        probe.record(
            check_id,
            "fail",
            "after session/cancel (and the pending permission request answered cancelled) the"
            f" prompt got no response within {probe.settings.cancel_timeout:g} s; end the turn"
            " with stopReason cancelled",
        )
        return
    stop = stop_text(answers)
    ok = stop == "stopReason 'cancelled'"
    probe.record(
        check_id,
        "pass" if ok else "fail",
        "session/cancel sent while a permission request was pending, which was then answered"
        f" cancelled; the prompt ended with {stop}"
        + ("" if ok else " (must be stopReason 'cancelled')"),
    )


@dataclass(slots=True)
class SessionSwitch:
    """What `set_session_state` switched the session to ('' when it could not), and why not."""

    mode: str = ""
    mode_why: str = ""
    model_option: str = ""
    model: str = ""
    model_why: str = ""


def _new_result(probe: AgentProbe, session: str) -> dict[str, Any]:
    for entry in probe.transcript.entries:
        result = entry.message.get("result")
        if (
            entry.sender == "agent"
            and isinstance(result, dict)
            and result.get("sessionId") == session
        ):
            return result
    return {}


async def set_session_state(probe: AgentProbe, session: str) -> SessionSwitch:
    switch = SessionSwitch()
    created = _new_result(probe, session)
    raw_modes = created.get("modes")
    modes: dict[str, Any] = raw_modes if isinstance(raw_modes, dict) else {}
    current = modes.get("currentModeId")
    others: list[str] = [
        m["id"]
        for m in modes.get("availableModes") or []
        if isinstance(m, dict) and isinstance(m.get("id"), str) and m["id"] != current
    ]
    if not others:
        switch.mode_why = "the agent offers no second session mode (session/new modes)"
    else:
        try:
            with anyio.fail_after(probe.settings.probe_timeout):
                await probe.conn.set_session_mode(session_id=session, mode_id=others[0])
            switch.mode = others[0]
        except (TimeoutError, RequestError, ValidationError) as err:
            switch.mode_why = f"session/set_mode {others[0]!r} failed: {str(err)[:160]}"
    options = created.get("configOptions") or []
    model = next((o for o in options if isinstance(o, dict) and o.get("category") == "model"), None)
    values = _select_values(model) if model else []
    other_models = [v for v in values if v != (model or {}).get("currentValue")]
    if model is None or not other_models:
        switch.model_why = (
            "the agent offers no second model as a configOptions entry of category model"
            + (" (only the unstable models field)" if created.get("models") else "")
        )
        return switch
    try:
        with anyio.fail_after(probe.settings.probe_timeout):
            await probe.conn.set_config_option(
                config_id=str(model.get("id")), session_id=session, value=other_models[0]
            )
        switch.model_option, switch.model = str(model.get("id")), other_models[0]
    except (TimeoutError, RequestError, ValidationError) as err:
        switch.model_why = f"session/set_config_option {other_models[0]!r} failed: {err}"[:200]
    return switch


def _select_values(option: dict[str, Any]) -> list[str]:
    found: list[str] = []
    for item in option.get("options") or []:
        if isinstance(item, dict) and isinstance(item.get("value"), str):
            found.append(item["value"])
        elif isinstance(item, dict) and isinstance(item.get("options"), list):  # a group
            found.extend(
                o["value"] for o in item["options"] if isinstance(o, dict) and "value" in o
            )
    return found


def grade_load_state(
    probe: AgentProbe, switch: SessionSwitch, loaded: LoadSessionResponse | None
) -> None:
    if loaded is None:
        probe.skip(LOAD_STATE_CHECKS, "session/load did not succeed")
        return
    if not switch.mode:
        probe.record("agent.session.load.mode", "skipped", f"not checked: {switch.mode_why}")
    else:
        now = loaded.modes.current_mode_id if loaded.modes else None
        probe.record(
            "agent.session.load.mode",
            "pass" if now == switch.mode else "fail",
            f"the session was switched to mode {switch.mode!r}; session/load answered"
            f" {now!r}" + ("" if now == switch.mode else " (the mode was lost on load)"),
        )
    if not switch.model:
        probe.record("agent.session.load.model", "skipped", f"not checked: {switch.model_why}")
        return
    value = next(
        (
            getattr(o, "current_value", None)
            for o in loaded.config_options or []
            if o.id == switch.model_option
        ),
        None,
    )
    probe.record(
        "agent.session.load.model",
        "pass" if value == switch.model else "fail",
        f"the session was switched to model {switch.model!r}; session/load answered"
        f" {value!r}" + ("" if value == switch.model else " (the model was lost on load)"),
    )


async def load_after_failure(probe: AgentProbe, text: str) -> None:
    session = await probe.new_session(record=False)
    if session is None:
        probe.skip((AFTER_FAILURE,), "a session/new (for it) did not succeed")
        return
    failed = "did not fail"
    try:
        with anyio.fail_after(probe.settings.prompt_timeout):
            answer = await probe.conn.prompt(session_id=session, prompt=[text_block(text)])
        failed = f"ended with stopReason {answer.stop_reason!r}"
    except RequestError as err:
        failed = f"answered error {err.code}"
    except (TimeoutError, ValidationError, ConnectionError) as err:
        probe.record(AFTER_FAILURE, "skipped", f"could not check: the failing turn: {err!r}")
        return
    start = len(probe.transcript)
    try:
        with anyio.fail_after(probe.settings.prompt_timeout):
            await probe.conn.prompt(session_id=session, prompt=[text_block(FOLLOW_UP)])
    except (TimeoutError, RequestError, ValidationError, ConnectionError) as err:
        probe.record(
            AFTER_FAILURE,
            "fail",
            f"after a failed turn ({failed}) the next prompt failed too: {str(err)[:160]!r};"
            " a session must stay usable after a turn fails",
        )
        return
    live = [
        str((u.get("content") or {}).get("text", ""))
        for u in _updates(probe, session, start)
        if u.get("sessionUpdate") == "agent_message_chunk"
    ]
    start = len(probe.transcript)
    try:
        with anyio.fail_after(probe.settings.prompt_timeout):
            await probe.conn.load_session(cwd=probe.workdir, session_id=session, mcp_servers=[])
    except (TimeoutError, RequestError, ValidationError, ConnectionError) as err:
        probe.record(
            AFTER_FAILURE,
            "fail",
            f"session/load of a session with a failed turn ({failed}) failed:"
            f" {str(err)[:160] or type(err).__name__}",
        )
        return
    replay = _updates(probe, session, start)
    replayed = _answer_after(replay, FOLLOW_UP)
    problems = []
    if replayed is None:
        problems.append("the prompt after the failed turn was not replayed")
    elif live_only_chunks(replayed, live) is None:
        problems.append(
            f"the answer after the failed turn was replayed as {replayed[:60]!r}, live it was"
            f" {''.join(live)[:60]!r}"
        )
    probe.record(
        AFTER_FAILURE,
        "fail" if problems else "pass",
        f"a failed turn ({failed}), then a turn that succeeded; session/load: "
        + ("; ".join(problems) or "replayed the turn after the failure"),
    )


def _answer_after(replay: list[dict[str, Any]], prompt: str) -> str | None:
    """The agent text replayed after the user chunk holding `prompt` (None: no such chunk)."""
    answer: str | None = None
    for update in replay:
        kind = update.get("sessionUpdate")
        text = str((update.get("content") or {}).get("text", ""))
        if kind == "user_message_chunk":
            if prompt in text:
                answer = ""
            elif answer:
                break  # the next turn began
        elif kind == "agent_message_chunk" and answer is not None:
            answer += text
    return answer


def _updates(probe: AgentProbe, session: str, start: int) -> list[dict[str, Any]]:
    found = []
    for entry in probe.transcript.session_updates(session, start):
        update = entry.message["params"].get("update")
        if isinstance(update, dict):
            found.append(update)
    return found
