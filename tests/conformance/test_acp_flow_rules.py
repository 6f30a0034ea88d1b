"""The flow and kept-state rules: a valid transcript passes, each break is caught by its rule."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from steerable_bridge.conformance import check_acp_transcript
from steerable_bridge.conformance.acp_flow_rules import FLOW_RULES

Entry = dict[str, Any]


def c(message: dict[str, Any]) -> Entry:
    return {"sender": "client", "message": {"jsonrpc": "2.0", **message}}


def a(message: dict[str, Any]) -> Entry:
    return {"sender": "agent", "message": {"jsonrpc": "2.0", **message}}


MODES = {
    "currentModeId": "ask",
    "availableModes": [{"id": "ask", "name": "Ask"}, {"id": "code", "name": "Code"}],
}
MODEL_OPTION = {
    "id": "model",
    "name": "Model",
    "type": "select",
    "category": "model",
    "currentValue": "small",
    "options": [{"value": "small", "name": "Small"}, {"value": "big", "name": "Big"}],
}
CAPS = {"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": True}
S = {"sessionId": "s1"}


def flows() -> list[Entry]:
    """initialize, session/new, set mode + model, a prompt using fs, a terminal and a
    permission cancelled with the prompt, then session/load keeping mode and model."""
    return [
        c({"id": 0, "method": "initialize",
           "params": {"protocolVersion": 1, "clientCapabilities": CAPS}}),
        a({"id": 0, "result": {"protocolVersion": 1, "agentCapabilities": {"loadSession": True}}}),
        c({"id": 1, "method": "session/new", "params": {"cwd": "/w", "mcpServers": []}}),
        a({"id": 1, "result": {**S, "modes": MODES, "configOptions": [MODEL_OPTION]}}),
        c({"id": 2, "method": "session/set_mode", "params": {**S, "modeId": "code"}}),
        a({"id": 2, "result": {}}),
        c({"id": 3, "method": "session/set_config_option",
           "params": {**S, "configId": "model", "value": "big"}}),
        a({"id": 3, "result": {"configOptions": [{**MODEL_OPTION, "currentValue": "big"}]}}),
        c({"id": 4, "method": "session/prompt",
           "params": {**S, "prompt": [{"type": "text", "text": "go"}]}}),
        a({"id": 10, "method": "fs/read_text_file", "params": {**S, "path": "/w/a.txt"}}),
        c({"id": 10, "result": {"content": "x"}}),
        a({"id": 11, "method": "fs/write_text_file",
           "params": {**S, "path": "/w/b.txt", "content": "y"}}),
        c({"id": 11, "result": {}}),
        a({"id": 12, "method": "terminal/create", "params": {**S, "command": "ls", "cwd": "/w"}}),
        c({"id": 12, "result": {"terminalId": "t1"}}),
        a({"id": 13, "method": "terminal/wait_for_exit", "params": {**S, "terminalId": "t1"}}),
        c({"id": 13, "result": {"exitCode": 0}}),
        a({"id": 14, "method": "terminal/output", "params": {**S, "terminalId": "t1"}}),
        c({"id": 14, "result": {"output": "a.txt\n", "truncated": False}}),
        a({"id": 15, "method": "terminal/release", "params": {**S, "terminalId": "t1"}}),
        c({"id": 15, "result": {}}),
        a({"id": 16, "method": "session/request_permission",
           "params": {**S, "toolCall": {"toolCallId": "c1"},
                      "options": [{"optionId": "y", "name": "Yes", "kind": "allow_once"}]}}),
        c({"method": "session/cancel", "params": S}),
        c({"id": 16, "result": {"outcome": {"outcome": "cancelled"}}}),
        a({"id": 4, "result": {"stopReason": "cancelled"}}),
        c({"id": 5, "method": "session/load", "params": {**S, "cwd": "/w", "mcpServers": []}}),
        a({"id": 5, "result": {"modes": {**MODES, "currentModeId": "code"},
                               "configOptions": [{**MODEL_OPTION, "currentValue": "big"}]}}),
    ]  # fmt: skip


def _at(transcript: list[Entry], rid: int, sender: str) -> Entry:
    return next(
        e
        for e in transcript
        if e["sender"] == sender and e["message"].get("id") == rid and "method" in e["message"]
    )


def _answer(transcript: list[Entry], rid: int, sender: str) -> Entry:
    return next(
        e
        for e in transcript
        if e["sender"] == sender and e["message"].get("id") == rid and "method" not in e["message"]
    )


def _no_caps(t: list[Entry]) -> None:
    t[0]["message"]["params"]["clientCapabilities"] = {}


def _relative(t: list[Entry]) -> None:
    _at(t, 10, "agent")["message"]["params"]["path"] = "a.txt"


def _wrong_terminal(t: list[Entry]) -> None:
    _at(t, 14, "agent")["message"]["params"]["terminalId"] = "t9"


def _never_released(t: list[Entry]) -> None:
    index = t.index(_at(t, 15, "agent"))
    del t[index : index + 2]


def _allowed_after_cancel(t: list[Entry]) -> None:
    _answer(t, 16, "client")["message"]["result"]["outcome"] = {
        "outcome": "selected",
        "optionId": "y",
    }


def _mode_lost(t: list[Entry]) -> None:
    _answer(t, 5, "agent")["message"]["result"]["modes"]["currentModeId"] = "ask"


def _model_lost(t: list[Entry]) -> None:
    _answer(t, 5, "agent")["message"]["result"]["configOptions"][0]["currentValue"] = "small"


def _unstable_model_lost(t: list[Entry]) -> None:
    _answer(t, 1, "agent")["message"]["result"]["models"] = {
        "currentModelId": "small",
        "availableModels": [{"modelId": "small", "name": "S"}, {"modelId": "big", "name": "B"}],
    }
    at = t.index(_answer(t, 3, "agent")) + 1
    t[at:at] = [
        c({"id": 30, "method": "session/set_model", "params": {**S, "modelId": "big"}}),
        a({"id": 30, "result": {}}),
    ]
    _answer(t, 5, "agent")["message"]["result"]["models"] = {
        "currentModelId": "small",
        "availableModels": [],
    }


BREAKS: dict[str, Callable[[list[Entry]], None]] = {
    "acp.client-capability": _no_caps,
    "acp.fs-path": _relative,
    "acp.terminal-lifecycle": _wrong_terminal,
    "acp.terminal-released": _never_released,
    "acp.permission-after-cancel": _allowed_after_cancel,
    "acp.load-keeps-mode": _mode_lost,
    "acp.load-keeps-config": _model_lost,
    "acp.load-keeps-model": _unstable_model_lost,
}


def _flow_findings(transcript: list[Entry]) -> set[str]:
    ids = {rule.id for rule in FLOW_RULES}
    return {f.rule_id for f in check_acp_transcript(transcript) if f.rule_id in ids}


def test_the_valid_flows_break_no_rule() -> None:
    findings = check_acp_transcript(flows())
    assert [f for f in findings if f.rule_id != "acp.schema"] == [], findings


def test_every_flow_rule_has_a_break() -> None:
    assert set(BREAKS) == {rule.id for rule in FLOW_RULES}


@pytest.mark.parametrize("rule_id", sorted(BREAKS))
def test_each_flow_rule_catches_its_break(rule_id: str) -> None:
    transcript = copy.deepcopy(flows())
    BREAKS[rule_id](transcript)
    assert rule_id in _flow_findings(transcript)


def test_a_mode_changed_by_the_agent_itself_is_the_one_load_must_keep() -> None:
    transcript = flows()
    at = transcript.index(_answer(transcript, 3, "agent")) + 1
    transcript.insert(
        at,
        a({"method": "session/update",
           "params": {**S, "update": {"sessionUpdate": "current_mode_update",
                                      "currentModeId": "ask"}}}),
    )  # fmt: skip
    assert _flow_findings(transcript) == {"acp.load-keeps-mode"}
    _mode_lost(transcript)
    assert _flow_findings(transcript) == set()


def test_a_model_set_through_its_config_option_leaves_the_unstable_field_unjudged() -> None:
    """claude-agent-acp answers both `models` and a model config option; setting the option
    is a model change, so the stale `models.currentModelId` must not be held against load."""
    transcript = flows()
    models = {"currentModelId": "small", "availableModels": []}
    _answer(transcript, 1, "agent")["message"]["result"]["models"] = models
    _answer(transcript, 5, "agent")["message"]["result"]["models"] = {
        **models,
        "currentModelId": "big",
    }
    assert _flow_findings(transcript) == set()
