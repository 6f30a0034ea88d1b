"""What an ACP agent's answers mean: the grading rules `AgentProbe` applies.

Pure functions and settings, no connection: the deadlines each kind of answer has
(`AgentCheckSettings`), whether an error means the agent lacks credentials (then the
prompt-based checks are "could not check", not failures), the error codes that blame the
request itself, the strict shape an initialize result must have (the SDK's model is
lenient), and how a raw transcript entry is classified (turn content, a response, its
`sessionUpdate` variant). `agent_probes.py` drives the agent and records checks with these.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from acp import RequestError
from acp.schema import InitializeResponse
from pydantic import ValidationError

from steerable_bridge.conformance.validators.transcript import TranscriptEntry

__all__ = [
    "PROTOCOL_ERRORS",
    "AgentCheckSettings",
    "describe_init",
    "error_text",
    "initialize_response_problems",
    "is_content",
    "is_response",
    "needs_credentials",
    "stop_text",
    "variant",
]

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
PROTOCOL_ERRORS = {-32700, -32600, -32601, -32602}
"""Error codes that blame the request itself: our prompt is valid, so these are failures."""
_CONTENT_UPDATES = frozenset(
    {"agent_message_chunk", "agent_thought_chunk", "tool_call", "tool_call_update", "plan"}
)
"""Updates that show the turn itself has started (the cancel probe waits for one)."""


@dataclass(frozen=True, slots=True)
class AgentCheckSettings:
    """Deadlines (seconds) for each kind of answer the agent owes, and what to ask it."""

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
    tool_prompt: str = ""
    """A prompt that makes the agent's model call a tool needing permission (`--tool-prompt`);
    empty: the permission checks are skipped."""
    fail_prompt: str = ""
    """A prompt that makes the agent's turn fail (its model errors; `--fail-prompt`); empty:
    the load-after-a-failed-turn check is skipped."""


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


def is_content(entry: TranscriptEntry) -> bool:
    return (
        entry.sender == "agent"
        and entry.message.get("method") == "session/update"
        and variant(entry) in _CONTENT_UPDATES
    )


def is_response(entry: TranscriptEntry) -> bool:
    message = entry.message
    return entry.sender == "agent" and "method" not in message and "id" in message


def variant(entry: TranscriptEntry) -> str:
    """The `sessionUpdate` of a session/update entry."""
    params = entry.message.get("params")
    update = params.get("update") if isinstance(params, dict) else None
    return str(update.get("sessionUpdate")) if isinstance(update, dict) else "?"


def stop_text(answers: list[Any]) -> str:
    if not answers:
        return "no response"
    answer = answers[0]
    if isinstance(answer, Exception):
        return f"error {answer}"[:120]
    return f"stopReason {answer.stop_reason!r}"


def describe_init(init: InitializeResponse) -> str:
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
