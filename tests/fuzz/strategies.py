"""Hypothesis strategies for hostile input: JSON-RPC frames and AG-UI RunAgentInput bodies.

Each strategy draws a plausible message (real method names and field names, so the
agent's handlers are reached, not only its parser) and then, often, breaks it: wrong id
types, params of the wrong shape, NaN / Infinity / 1e400 in place of a number, a lone
surrogate escape or raw invalid UTF-8 inside a string, nesting hundreds deep, truncation,
or a random JSON value instead of a message. `frames()` draws bytes for one ACP line;
`bodies()` draws `(body, headers)` for one `POST /agent`. Used by tests/fuzz and
bench/fuzz.py.
"""

from __future__ import annotations

import json
import random
from typing import Any

from hypothesis import strategies as st

METHODS = [
    "initialize",
    "authenticate",
    "session/new",
    "session/load",
    "session/resume",
    "session/list",
    "session/close",
    "session/delete",
    "session/fork",
    "session/set_mode",
    "session/set_config_option",
    "session/prompt",
    "session/cancel",
    "logout",
    "$/cancel_request",
    "_steerable/unknown",
    "no/such",
]
KEYS = [
    "protocolVersion",
    "clientCapabilities",
    "sessionId",
    "cwd",
    "mcpServers",
    "prompt",
    "cursor",
    "modeId",
    "configId",
    "value",
    "id",
    "type",
    "text",
    "_meta",
]
TEXT = st.text(max_size=12)
NUMBERS = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
)
JSON = st.recursive(
    st.none() | st.booleans() | NUMBERS | TEXT,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.sampled_from(KEYS) | TEXT, inner, max_size=4)
    ),
    max_leaves=12,
)
VALID_IDS = st.one_of(st.integers(min_value=0, max_value=2**53), st.text(max_size=8))
BAD_IDS = st.one_of(
    st.booleans(),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(TEXT, st.integers(), max_size=2),
)
PARAMS = st.one_of(
    st.fixed_dictionaries(
        {},
        optional={
            "protocolVersion": st.one_of(st.just(1), NUMBERS, TEXT, st.booleans()),
            "sessionId": st.one_of(TEXT, NUMBERS),
            "cwd": st.one_of(st.just("/tmp"), TEXT, st.none()),
            "mcpServers": st.one_of(st.just([]), JSON),
            "prompt": st.one_of(
                st.lists(
                    st.fixed_dictionaries({"type": st.just("text"), "text": TEXT}), max_size=2
                ),
                JSON,
            ),
            "cursor": JSON,
            "id": JSON,
            "_meta": JSON,
        },
    ),
    JSON,
)

# Byte-level damage: what a broken or hostile client can put on a line.
INVALID_UTF8 = [b"\xed\xa0\x80", b"\xff", b"\xc0\xaf", b"\xe2\x82", b"\xf4\x90\x80\x80"]
NON_FINITE = [b"NaN", b"Infinity", b"-Infinity", b"1e400", b"-1e999"]
SURROGATES = [b"\\ud800", b"\\udfff", b"x\\ud83d", b"\\ude00y"]


def _deep(depth: int, leaf: bytes, kind: str) -> bytes:
    if kind == "array":
        return b"[" * depth + leaf + b"]" * depth
    return b'{"a":' * depth + leaf + b"}" * depth


@st.composite
def messages(draw: st.DrawFn) -> Any:
    """A JSON-RPC-shaped value (request, notification, response or junk)."""
    kind = draw(st.sampled_from(["request", "request", "notification", "response", "junk"]))
    if kind == "junk":
        return draw(JSON)
    message: dict[str, Any] = {}
    if draw(st.integers(0, 9)):
        message["jsonrpc"] = "2.0"
    else:
        message["jsonrpc"] = draw(st.sampled_from(["1.0", 2, None]))
    if kind in ("request", "response"):
        message["id"] = draw(VALID_IDS if draw(st.integers(0, 3)) else BAD_IDS | st.none())
    if kind in ("request", "notification"):
        message["method"] = draw(st.sampled_from(METHODS) | TEXT | NUMBERS)
        if draw(st.integers(0, 5)):
            message["params"] = draw(PARAMS)
    else:
        which = draw(st.sampled_from(["result", "error", "both", "neither"]))
        if which in ("result", "both"):
            message["result"] = draw(JSON)
        if which in ("error", "both"):
            message["error"] = draw(
                st.fixed_dictionaries({"code": st.integers(-32800, 0), "message": TEXT}) | JSON
            )
    return message


DAMAGE = ["none", "none", "utf8", "number", "surrogate", "deep", "truncate", "wrap", "bytes"]


def damage(text: bytes, rng: random.Random) -> bytes:
    """`text` with one kind of damage, or unchanged (plain `random`, so bench/fuzz.py can
    make variants of drawn frames far faster than drawing new ones)."""
    how = rng.choice(DAMAGE)
    at = rng.randint(0, len(text))
    if how == "utf8":
        return text[:at] + rng.choice(INVALID_UTF8) + text[at:]
    if how == "number":
        digits = [i for i, c in enumerate(text) if 48 <= c <= 57]
        if digits:
            i = rng.choice(digits)
            return text[:i] + rng.choice(NON_FINITE) + text[i + 1 :]
        return text.replace(b"null", rng.choice(NON_FINITE), 1)
    if how == "surrogate":
        quote = text.find(b'"', at)
        if quote >= 0:
            return text[: quote + 1] + rng.choice(SURROGATES) + text[quote + 1 :]
        return text
    if how == "deep":
        depth = rng.choice([63, 64, 65, 100, 999, 1000, 5000, 50_000])
        nested = _deep(depth, b"1", rng.choice(["array", "object"]))
        return text.replace(b"null", nested, 1) if b"null" in text else nested
    if how == "truncate":
        return text[:at]
    if how == "wrap":
        return b"[" + text + b"]"
    if how == "bytes":
        return bytes(rng.randrange(256) for _ in range(rng.randint(0, 40))).replace(b"\n", b"")
    return text


@st.composite
def damaged(draw: st.DrawFn, text: bytes) -> bytes:
    """`text` through `damage` with a drawn (seeded) random generator."""
    return damage(text, draw(st.randoms(use_true_random=False)))


@st.composite
def frames(draw: st.DrawFn) -> bytes:
    """One ACP line (without its newline)."""
    text = json.dumps(draw(messages())).encode()
    return draw(damaged(text))


@st.composite
def run_inputs(draw: st.DrawFn) -> Any:
    """A RunAgentInput-shaped value, often valid, often not."""
    shape = draw(st.integers(0, 9))
    if shape == 0:
        return draw(JSON)
    if shape < 4:  # valid: the agent runs a turn
        return {
            "threadId": draw(st.text(min_size=1, max_size=10)),
            "runId": draw(st.text(min_size=1, max_size=10)),
            "messages": [
                {"id": draw(st.text(min_size=1, max_size=6)), "role": "user", "content": text}
                for text in draw(st.lists(TEXT, min_size=1, max_size=2))
            ],
            "state": draw(st.dictionaries(TEXT, JSON, max_size=3)),
            "tools": [],
            "context": [],
            "forwardedProps": draw(st.dictionaries(TEXT, JSON, max_size=2)),
        }
    body: dict[str, Any] = {}
    fields = {
        "threadId": st.one_of(st.text(min_size=1, max_size=10), NUMBERS, st.none()),
        "runId": st.one_of(st.text(min_size=1, max_size=10), NUMBERS),
        "messages": st.one_of(
            st.lists(
                st.fixed_dictionaries(
                    {
                        "id": st.text(min_size=1, max_size=6),
                        "role": st.sampled_from(["user", "user", "assistant", "tool", "x"]),
                        "content": st.one_of(TEXT, JSON),
                    }
                ),
                max_size=2,
            ),
            JSON,
        ),
        "state": JSON,
        "tools": st.one_of(st.just([]), JSON),
        "context": st.one_of(st.just([]), JSON),
        "forwardedProps": JSON,
    }
    for name, strategy in fields.items():
        likely = name in ("threadId", "runId", "messages")
        if draw(st.integers(0, 9)) if likely else draw(st.booleans()):
            body[name] = draw(strategy)
    return body


CONTENT_TYPES = [
    "application/json",
    "application/json",
    "application/json",
    "application/json; charset=utf-8",
    "text/plain",
    "application/x-www-form-urlencoded",
    "",
]


@st.composite
def bodies(draw: st.DrawFn) -> tuple[bytes, dict[str, str]]:
    """One `POST /agent`: the body and its headers."""
    body = draw(damaged(json.dumps(draw(run_inputs())).encode()))
    headers = {"accept": "text/event-stream"}
    content_type = draw(st.sampled_from(CONTENT_TYPES))
    if content_type:
        headers["content-type"] = content_type
    return body, headers
