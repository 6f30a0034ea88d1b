"""Each ACP rule accepts a valid transcript and catches the one break made for it."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from steerable_bridge.conformance import (
    ConformanceError,
    WireMessage,
    assert_valid_acp_transcript,
    check_acp_transcript,
)
from steerable_bridge.conformance.acp_rules import ACP_RULES
from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.encoding import codec

Entry = dict[str, Any]
Transcript = list[Entry]


def c(message: dict[str, Any]) -> Entry:
    return {"sender": "client", "message": {"jsonrpc": "2.0", **message}}


def a(message: dict[str, Any]) -> Entry:
    return {"sender": "agent", "message": {"jsonrpc": "2.0", **message}}


def update(session: str, body: dict[str, Any]) -> Entry:
    return a({"method": "session/update", "params": {"sessionId": session, "update": body}})


def text(session: str, chunk: str) -> Entry:
    return update(
        session,
        {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": chunk}},
    )


def event_note(seq: int, run_id: str = "r1") -> Entry:
    event = ev.TextDelta(session_id="s1", run_id=run_id, seq=seq, ts=0, message_id="m", delta="x")
    return a({"method": "_steerable/event", "params": codec.event_to_jsonable(event)})


def valid_transcript() -> Transcript:
    prompt = [{"type": "text", "text": "hi"}]
    return [
        c(
            {
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": 1,
                    "clientCapabilities": {
                        "elicitation": {"form": {}, "url": {}},
                        "session": {"notices": {}, "compaction": {}},
                    },
                },
            }
        ),
        a(
            {
                "id": 0,
                "result": {
                    "protocolVersion": 1,
                    "agentCapabilities": {"loadSession": True},
                    "authMethods": [
                        {"id": "stored", "name": "Stored credentials"},
                        {"id": "login", "name": "Log in", "type": "terminal", "args": ["login"]},
                    ],
                },
            }
        ),
        c({"id": 1, "method": "session/new", "params": {"cwd": "/tmp", "mcpServers": []}}),
        a({"id": 1, "result": {"sessionId": "s1"}}),
        update("s1", {"sessionUpdate": "available_commands_update", "availableCommands": []}),
        c({"id": 2, "method": "session/prompt", "params": {"sessionId": "s1", "prompt": prompt}}),
        event_note(5),
        text("s1", "Hello"),
        update("s1", {"sessionUpdate": "notice", "severity": "warning", "title": "Paused"}),
        update(
            "s1",
            {"sessionUpdate": "compaction_update", "compactionId": "k1", "status": "in_progress"},
        ),
        update(
            "s1",
            {
                "sessionUpdate": "compaction_summary_chunk",
                "compactionId": "k1",
                "content": {"type": "text", "text": "We fixed the bug."},
            },
        ),
        update(
            "s1",
            {"sessionUpdate": "compaction_update", "compactionId": "k1", "status": "completed"},
        ),
        update(
            "s1",
            {
                "sessionUpdate": "tool_call",
                "toolCallId": "c1",
                "title": "Edit",
                "status": "pending",
            },
        ),
        a(
            {
                "id": 0,
                "method": "session/request_permission",
                "params": {
                    "sessionId": "s1",
                    "toolCall": {"toolCallId": "c1"},
                    "options": [{"optionId": "allow_once", "name": "Allow", "kind": "allow_once"}],
                },
            }
        ),
        c({"id": 0, "result": {"outcome": {"outcome": "selected", "optionId": "allow_once"}}}),
        a(
            {
                "id": 1,
                "method": "elicitation/create",
                "params": {
                    "sessionId": "s1",
                    "toolCallId": "c1",
                    "mode": "form",
                    "message": "Which size?",
                    "requestedSchema": {
                        "type": "object",
                        "properties": {"size": {"type": "string", "enum": ["s", "l"]}},
                        "required": ["size"],
                    },
                },
            }
        ),
        c({"id": 1, "result": {"action": "accept", "content": {"size": "l"}}}),
        a(
            {
                "id": 20,
                "method": "elicitation/create",
                "params": {
                    "sessionId": "s1",
                    "toolCallId": "c1",
                    "mode": "url",
                    "elicitationId": "e1",
                    "url": "https://example.com/consent",
                    "message": "Approve access",
                },
            }
        ),
        c({"id": 20, "result": {"action": "accept"}}),
        a({"method": "elicitation/complete", "params": {"elicitationId": "e1"}}),
        update(
            "s1", {"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "in_progress"}
        ),
        update(
            "s1", {"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "completed"}
        ),
        a({"id": 2, "result": {"stopReason": "end_turn"}}),
        c({"id": 3, "method": "session/prompt", "params": {"sessionId": "s1", "prompt": prompt}}),
        text("s1", "Wor"),
        c({"method": "session/cancel", "params": {"sessionId": "s1"}}),
        a({"id": 3, "result": {"stopReason": "cancelled"}}),
        c(
            {
                "id": 4,
                "method": "session/load",
                "params": {"sessionId": "s1", "cwd": "/tmp", "mcpServers": []},
            }
        ),
        text("s1", "Hello"),
        update(
            "s1",
            {"sessionUpdate": "tool_call", "toolCallId": "c1", "title": "E", "status": "completed"},
        ),
        a({"id": 4, "result": {}}),
        c({"id": 5, "method": "session/resume", "params": {"sessionId": "s1", "cwd": "/tmp"}}),
        a({"id": 5, "result": {}}),
    ]


def _find(transcript: Transcript, pred: Callable[[dict[str, Any]], bool]) -> int:
    return next(i for i, e in enumerate(transcript) if pred(e["message"]))


def _method(name: str) -> Callable[[dict[str, Any]], bool]:
    return lambda m: m.get("method") == name


def _answer(request_id: int) -> Callable[[dict[str, Any]], bool]:
    return lambda m: "method" not in m and m.get("id") == request_id


def _set_stop(transcript: Transcript) -> None:
    transcript[_find(transcript, _answer(3))]["message"]["result"]["stopReason"] = "end_turn"


def _move_after(
    pred_move: Callable[[dict[str, Any]], bool], request_id: int
) -> Callable[..., None]:
    def edit(transcript: Transcript) -> None:
        entry = transcript.pop(_find(transcript, pred_move))
        transcript.insert(_find(transcript, _answer(request_id)) + 1, entry)

    return edit


def _is_update(variant: str, status: str | None = None) -> Callable[[dict[str, Any]], bool]:
    def pred(m: dict[str, Any]) -> bool:
        u = (m.get("params") or {}).get("update") or {}
        return u.get("sessionUpdate") == variant and (status is None or u.get("status") == status)

    return pred


def _edit(
    index_of: Callable[[Transcript], int], change: Callable[[Entry], None]
) -> Callable[..., None]:
    def edit(transcript: Transcript) -> None:
        change(transcript[index_of(transcript)])

    return edit


def _resume_replays(transcript: Transcript) -> None:
    transcript.insert(_find(transcript, _answer(5)), text("s1", "again"))


def _update_before_prompt(transcript: Transcript) -> None:
    transcript.insert(_find(transcript, _method("session/prompt")), text("s1", "early"))


BREAKS: dict[str, Callable[[Transcript], None]] = {
    "acp.jsonrpc": _edit(lambda t: 0, lambda e: e["message"].update(jsonrpc="1.0")),
    "acp.schema": _edit(
        lambda t: _find(t, _answer(2)),
        lambda e: e["message"]["result"].update(stopReason="done"),
    ),
    "acp.response-unmatched": lambda t: t.append(a({"id": 42, "result": {}})),
    "acp.unanswered": lambda t: t.__delitem__(_find(t, _answer(5))),
    "acp.update-outside-prompt": _update_before_prompt,
    "acp.after-response": _move_after(_is_update("tool_call_update", "completed"), 2),
    "acp.tool-call-order": lambda t: t.__delitem__(_find(t, _is_update("tool_call"))),
    "acp.status-regress": _edit(
        lambda t: _find(t, _is_update("tool_call_update", "completed")),
        lambda e: e["message"]["params"]["update"].update(status="pending"),
    ),
    "acp.cancel-stop-reason": _set_stop,
    "acp.load-replay": _move_after(
        lambda m: _is_update("tool_call")(m) and m["params"]["update"]["status"] == "completed", 4
    ),
    "acp.resume-replay": _resume_replays,
    "acp.event-channel": lambda t: t.insert(_find(t, _answer(2)), event_note(5)),
    "acp.elicitation-mode": _edit(
        lambda t: 0, lambda e: e["message"]["params"].pop("clientCapabilities")
    ),
    "acp.elicitation-url": _edit(
        lambda t: _find(t, _answer(20)) - 1,
        lambda e: e["message"]["params"].update(url="javascript:alert(1)"),
    ),
    "acp.elicitation-complete": _edit(
        lambda t: _find(t, _method("elicitation/complete")),
        lambda e: e["message"]["params"].update(elicitationId="e2"),
    ),
    "acp.notice-capability": _edit(
        lambda t: 0, lambda e: e["message"]["params"]["clientCapabilities"]["session"].clear()
    ),
    "acp.compaction-capability": _edit(
        lambda t: 0,
        lambda e: e["message"]["params"]["clientCapabilities"]["session"].pop("compaction"),
    ),
    "acp.compaction-lifecycle": lambda t: t.insert(
        _find(t, _is_update("compaction_update", "completed")) + 1,
        update(
            "s1",
            {
                "sessionUpdate": "compaction_summary_chunk",
                "compactionId": "k1",
                "content": {"type": "text", "text": "late"},
            },
        ),
    ),
    "acp.auth-methods": _edit(
        lambda t: 1,
        lambda e: e["message"]["result"]["authMethods"].append(
            {"id": "key", "name": "API key", "type": "env_var", "vars": [{"name": "KEY"}]}
        ),
    ),
}


def test_a_url_elicitation_id_is_used_once_and_completed_once() -> None:
    transcript = valid_transcript()
    at = _find(transcript, _method("elicitation/complete"))
    again = copy.deepcopy(transcript[at - 2 : at + 1])
    again[0]["message"]["id"] = again[1]["message"]["id"] = 21
    transcript[at + 1 : at + 1] = again
    findings = [(f.rule_id, f.message) for f in check_acp_transcript(transcript)]
    assert [rule for rule, _ in findings] == ["acp.elicitation-url", "acp.elicitation-complete"]
    assert "used before" in findings[0][1] and "completed before" in findings[1][1]


def test_v125_updates_must_match_the_stable_schema() -> None:
    transcript = valid_transcript()
    transcript.insert(
        _find(transcript, _answer(2)),
        update("s1", {"sessionUpdate": "notice", "severity": "warning", "title": ""}),
    )
    findings = check_acp_transcript(transcript)
    assert [f.rule_id for f in findings] == ["acp.schema"]
    assert "SessionNotification" in findings[0].message and "title" in findings[0].message


def test_a_notice_outside_a_prompt_is_legal() -> None:
    transcript = valid_transcript()
    transcript.append(update("s1", {"sessionUpdate": "notice", "severity": "info", "title": "Hi"}))
    assert check_acp_transcript(transcript) == []


def test_the_valid_transcript_has_no_findings() -> None:
    assert check_acp_transcript(valid_transcript()) == []
    assert_valid_acp_transcript(valid_transcript())


def test_every_rule_has_a_break() -> None:
    assert set(BREAKS) == {rule.id for rule in ACP_RULES}


@pytest.mark.parametrize("rule_id", sorted(BREAKS))
def test_each_rule_catches_its_break(rule_id: str) -> None:
    transcript = copy.deepcopy(valid_transcript())
    BREAKS[rule_id](transcript)
    findings = check_acp_transcript(transcript)
    assert rule_id in {f.rule_id for f in findings}, findings
    with pytest.raises(ConformanceError) as caught:
        assert_valid_acp_transcript(transcript)
    assert rule_id in {f.rule_id for f in caught.value.findings}


def test_an_error_after_cancel_is_caught_too() -> None:
    transcript = valid_transcript()
    index = _find(transcript, _answer(3))
    transcript[index] = a({"id": 3, "error": {"code": -32603, "message": "stopped"}})
    assert [f.rule_id for f in check_acp_transcript(transcript)] == ["acp.cancel-stop-reason"]


def test_transcripts_may_be_wire_messages_or_flat_dicts() -> None:
    entries = valid_transcript()
    as_objects = [WireMessage(sender=e["sender"], message=e["message"]) for e in entries]
    flat = [{"sender": e["sender"], **e["message"]} for e in entries]
    assert check_acp_transcript(as_objects) == []
    assert check_acp_transcript(flat) == []


def test_a_parse_error_answer_without_an_id_is_recognised() -> None:
    """JSON-RPC says id null; codex-acp leaves the id out. Neither is a broken message."""
    parse_error = {"code": -32700, "message": "Parse error"}
    transcript = valid_transcript()
    transcript.append(a({"error": parse_error}))
    transcript.append(a({"id": None, "error": parse_error}))
    assert check_acp_transcript(transcript) == []


def test_session_level_updates_after_every_response_are_legal() -> None:
    transcript = valid_transcript()
    transcript.append(update("s1", {"sessionUpdate": "usage_update", "used": 5, "size": 100}))
    transcript.append(update("s1", {"sessionUpdate": "session_info_update", "title": "t"}))
    assert check_acp_transcript(transcript) == []


def test_findings_name_the_record_files_line_when_given() -> None:
    transcript = valid_transcript()
    transcript.append(text("s1", "late"))
    lines = [n * 2 + 1 for n in range(len(transcript))]  # e.g. raw notes between messages
    (finding,) = check_acp_transcript(transcript, lines=lines)
    assert finding.where.startswith(f"line {lines[-1]} ")
